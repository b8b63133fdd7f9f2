"""Issue 16 item 13: ``Scenario.to_yaml`` read back gives the same scenario, for every field (hypothesis).

It used to drop the host link and the host memory (a pcie4 host link came back as the chip's pcie5)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greentrain.hardware.catalog import chips, links
from greentrain.parallel.strategy import RECOMPUTE
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.workload import OPTIMIZERS

MODELS = ("llama3-8b", "llama3.2-1b", "mixtral-8x7b", "t5-large", "qwen3-30b-a3b")
REGIONS = ("us-east-1", "fr", "DEU", "eu-west-1", "us-ca")


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    chips_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.integers(1, 16))
    cluster = {"chip": draw(st.sampled_from(sorted(chips()))), "num_chips": chips_per_node * nodes,
               "chips_per_node": chips_per_node, "intra_node_link": draw(st.sampled_from(sorted(links()))),
               "inter_node_link": draw(st.sampled_from(sorted(links()))),
               "host_link": draw(st.sampled_from(["pcie3", "pcie4", "pcie5"])),
               "host_memory_gib_per_node": draw(st.sampled_from([0, 256, 512.5, 2048]))}
    pp = draw(st.sampled_from([1, 2, 4]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    strategy = {"dp": draw(st.integers(1, 8)), "tp": draw(st.sampled_from([1, 2, 4])), "pp": pp, "vpp": vpp,
                "cp": draw(st.sampled_from([1, 2])), "sp": draw(st.booleans()), "zero": draw(st.integers(0, 3)),
                "recompute": draw(st.sampled_from(RECOMPUTE)), "micro_batch_size": draw(st.integers(1, 4)),
                "offload_optimizer": draw(st.booleans()), "flash_attention": draw(st.booleans()),
                "schedule": "interleaved" if vpp > 1 else draw(st.sampled_from(["1f1b", "gpipe"]))}
    length = draw(st.sampled_from([{"train_tokens": 1e9}, {"num_steps": 1000},
                                   {"num_epochs": 2.5, "dataset_tokens": 1e8}]))
    workload = {"global_batch_size": draw(st.integers(1, 4096)), "seq_len": draw(st.sampled_from([128, 512, 2048])),
                "precision": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                "optimizer": draw(st.sampled_from(OPTIMIZERS)), "grad_dtype": draw(st.sampled_from(["fp32", "bf16"])),
                **length}
    if draw(st.booleans()):
        site: dict[str, object] = {"region": draw(st.sampled_from(REGIONS))}
    else:
        site = {"grid_g_co2e_per_kwh": draw(st.floats(0, 1000)), "pue": draw(st.floats(1, 3)),
                "electricity_usd_per_kwh": draw(st.floats(0, 1))}
    return {"model": draw(st.sampled_from(MODELS)), "cluster": cluster, "strategy": strategy,
            "workload": workload, "site": site}


def _site_fields(sc: Scenario) -> tuple[object, ...]:
    s = sc.site
    return (s.region, pytest.approx(s.carbon_intensity_kg_co2e_per_j, rel=1e-12), s.pue,
            pytest.approx(s.electricity_usd_per_j, rel=1e-12))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_to_yaml_reads_back_as_the_same_scenario(data: dict[str, object]) -> None:
    sc = scenario_from_dict(data)
    back = scenario_from_dict(yaml.safe_load(sc.to_yaml()))
    assert back.model == sc.model and back.workload == sc.workload and back.strategy == sc.strategy
    assert back.cluster == sc.cluster  # chip, counts, all three links, host memory
    assert _site_fields(back) == _site_fields(sc)
    assert {f.name for f in dataclasses.fields(Scenario)} == {"model", "cluster", "workload", "site", "strategy"}


def test_host_link_and_memory_survive() -> None:
    sc = scenario_from_dict({"cluster": {"chip": "h100-sxm", "num_chips": 8, "host_link": "pcie4",
                                         "host_memory_gib_per_node": 512}})
    back = scenario_from_dict(yaml.safe_load(sc.to_yaml()))
    assert back.cluster.host_link is not None and back.cluster.host_link.name == "pcie4"
    assert back.cluster.host_memory_bytes_per_node == 512 * 2**30
