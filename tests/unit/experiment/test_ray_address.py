"""`--ray-address` is checked where it enters: ray.init retries a malformed or unreachable address for minutes
(`--ray-address 999.1.1.1:1` ran past 100 s)."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment.cluster import check_ray_address, reach_ray_address


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


def test_an_address_nothing_listens_on_is_refused_at_once() -> None:
    import socket

    with socket.socket() as s:  # a port that was just free: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot be reached") as e:
        reach_ray_address(f"127.0.0.1:{port}", timeout_s=2.0)
    assert "\n" not in str(e.value)


def test_a_listening_address_passes() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        reach_ray_address(f"127.0.0.1:{s.getsockname()[1]}", timeout_s=2.0)
        reach_ray_address(f"ray://127.0.0.1:{s.getsockname()[1]}", timeout_s=2.0)


@pytest.mark.parametrize("address", ["", "auto", "local"])
def test_ray_resolves_its_own_words(address: str) -> None:
    reach_ray_address(address, timeout_s=0.001)
