"""`--ray-address` is checked where it enters: ray.init retries a malformed or unreachable address for minutes
(`--ray-address 999.1.1.1:1` ran past 100 s)."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment.cluster import check_ray_address


@pytest.mark.parametrize("address", ["", "auto", "local", "10.0.0.1:6379", "ray://head:10001",
                                     "head-node.example.com:6379", "[::1]:6379"])
def test_addresses_ray_takes(address: str) -> None:
    assert check_ray_address(address) == address


@pytest.mark.parametrize("address, rule", [
    ("999.1.1.1:1", "its host must be a name or an IP address"),
    (":6379", "its host must be a name or an IP address"),
    ("a b:6379", "its host must be a name or an IP address"),
    ("head", "HOST:PORT"), ("head:0", "port 1-65535"), ("head:70000", "port 1-65535"),
    ("head:\u0661\u0662", "port 1-65535"),
])
def test_malformed_addresses_are_one_line(address: str, rule: str) -> None:
    with pytest.raises(ConfigError, match=rule) as e:
        check_ray_address(address)
    assert "executor.ray_address" in str(e.value) and "\n" not in str(e.value)
