"""Activation offloading (Strategy.offload_activations; estimate/act_offload.py): the first N layers' saved
activations wait in host memory, as Transformer Engine's CPU offload runs them (Megatron Core cpu_offloading).
The device keeps the other layers', the host the offloaded ones, and a micro-batch waits only for the copies its
computation does not hide. Bad values are one line and exit 2."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.cli.main import main
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.act_offload import exposed_offload_s
from greentrain.estimate.efficiency import Profile, efficiency_for, framework_names
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import chips
from greentrain.model.load import load_model
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.search.engine import best_strategy
from greentrain.search.space import SearchSpace
from greentrain.workload import Workload


def _scenario(chip: str, model: str = "llama3-70b", seq_len: int = 8192, global_batch: int = 256) -> Scenario:
    return Scenario(model=load_model(model), cluster=build_cluster(chips()[chip], 64, 64),
                    workload=Workload(global_batch_size=global_batch, seq_len=seq_len, precision="fp8",
                                      train_tokens=1e9), site=Site())


# NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @067f987d, 26.04 container, Llama 3 70B on 64
# GB300, FP8 (current scaling), Megatron FSDP over 64, MBS 2, sequence 8,192: 5,248 tokens/s per GPU; its recipe
# (perf_recipes/llama/gb300/llama3.py llama3_70b_pretrain_64gpu_gb300_fp8cs_config) sets cpu_offloading with
# cpu_offloading_num_layers 20 and no recomputation.
FSDP = Strategy(dp=64, zero=3, micro_batch_size=2)


def test_offloaded_layers_leave_the_device_for_the_host() -> None:
    sc, eff = _scenario("gb300"), efficiency_for("gb300", "nemo")
    kept = estimate_step(sc, FSDP, eff=eff, check_fit=False)
    off = estimate_step(sc, replace(FSDP, offload_activations=20), eff=eff)  # it fits: the run ran
    assert kept.memory.total_bytes > sc.cluster.chip.memory_bytes  # refused without the offload
    k = 1.0 + eff.fragmentation  # the allocator's share on what the device holds
    layer_bytes = off.memory.host_bytes / 20
    assert kept.memory.activations_bytes - off.memory.activations_bytes == pytest.approx(20 * layer_bytes * k)
    assert off.memory.host_bytes == pytest.approx(20 * kept.memory.activations_bytes / k / 80, rel=0.02)
    # NVLink-C2C (225 GB/s each way) hides 20 layers' copies behind 80 layers' compute: no time is added
    assert off.step_time_s == pytest.approx(kept.step_time_s) and off.offload_wait_time_s == 0.0
    tokens_per_s = sc.workload.global_batch_size * sc.workload.seq_len / off.step_time_s / 64
    assert tokens_per_s / 5248 - 1 == pytest.approx(0.0, abs=0.10)


def test_a_slow_host_link_exposes_the_copies() -> None:
    """On PCIe 5 a layer's saved tensors of an 8 K micro-batch take longer to copy than the layer computes:
    the more layers offloaded, the less device memory and the longer the step."""
    sc, eff = _scenario("h100-sxm", "llama3-8b", global_batch=64), efficiency_for("h100-sxm", "nemo")
    base = Strategy(dp=64, zero=1, micro_batch_size=1)
    runs = [estimate_step(sc, replace(base, offload_activations=n), eff=eff, check_fit=False) for n in (0, 8, 16, 31)]
    mems = [r.memory.activations_bytes for r in runs]
    times = [r.step_time_s for r in runs]
    assert mems == sorted(mems, reverse=True) and times == sorted(times) and times[-1] > times[0] * 1.05
    assert runs[0].memory.host_bytes == 0.0 < runs[1].memory.host_bytes
    # the wait is its own term of the breakdown, and all of the step's growth
    assert runs[-1].offload_wait_time_s == pytest.approx(times[-1] - times[0], rel=1e-9)


def test_exposed_copies_by_hand() -> None:
    """4 of 8 layers, 10 ms of copy each at the host link's pinned-copy rate (PCIe 5: 63 GB/s x 0.85, 5.7 us
    latency), 2 ms forward and 4 ms backward a layer: the forward hides 8 x 2 ms of the 40 ms of copies, the
    backward 7 x 4 ms (the first layer's backward comes after its reload)."""
    cl, eff = build_cluster(chips()["h100-sxm"], 8, 8), efficiency_for("h100-sxm", "nemo")
    layer_bytes = 0.01 * 63e9 * eff.host_link
    fwd, bwd = exposed_offload_s(offloaded=4, layers=8, layer_bytes=layer_bytes, layer_fwd_s=0.002,
                                 layer_bwd_s=0.004, cl=cl, eff=eff)
    copy_s = 5.7e-6 + 0.01
    assert (fwd, bwd) == pytest.approx((4 * copy_s - 0.016, 4 * copy_s - 0.028))
    assert exposed_offload_s(offloaded=1, layers=8, layer_bytes=layer_bytes, layer_fwd_s=0.002, layer_bwd_s=0.004,
                             cl=cl, eff=eff) == (0.0, 0.0)


def test_rules() -> None:
    with pytest.raises(ConfigError, match="offload_activations"):
        Strategy(offload_activations=-1)
    with pytest.raises(ConfigError, match="pp = 1"):
        Strategy(pp=2, offload_activations=4)
    sc = _scenario("gb300")
    with pytest.raises(InfeasibleError, match="below the model's 80 layers"):
        estimate_step(sc, replace(FSDP, offload_activations=80), check_fit=False)


HEADER = "run_id,framework,model,chip,num_chips,chips_per_node,seq_len,global_batch,micro_batch,zero,precision," \
         "offload_activations,status,measured_tokens_per_s_per_chip"


def test_runs_csv_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "runs.csv"
    p.write_text(f"{HEADER}\nr1,nemo,llama3-70b,gb300,64,64,8192,256,2,3,fp8,20,ok,5248\n")
    (run,) = read_runs(p, frameworks=framework_names())
    assert run.scenario.strategy is not None and run.scenario.strategy.offload_activations == 20
    assert main(["validate", str(p), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["fits"] and "offload_act=20" in row["strategy"]
    p.write_text(f"{HEADER}\nr1,nemo,llama3-70b,gb300,64,64,8192,256,2,3,fp8,-2,ok,5248\n")
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "r1" in err and "offload_activations" in err and "-2" in err and len(err.strip().splitlines()) == 1


PLAN = ["plan", "--model", "llama3-70b", "--chip", "gb300", "--num-chips", "64", "--chips-per-node", "64",
        "--seq-len", "8192", "--global-batch", "256", "--framework", "nemo", "--precision", "fp8"]


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    whole = ["--tp", "1", "--pp", "1", "--zero", "3", "--recompute", "none", "--micro-batch", "2"]
    assert main([*PLAN, *whole, "--offload-activations", "20", "--json"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory_bytes_per_device"]
    assert mem["host_offloaded"] > 60 * 2**30
    # pinned alone, the search keeps it and chooses the rest: one pipeline stage, no recomputation
    assert main([*PLAN, "--offload-activations", "20", "--json"]) == 0
    chosen = json.loads(capsys.readouterr().out)["strategy"]
    assert (chosen["offload_activations"], chosen["pp"], chosen["recompute"]) == (20, 1, "none")
    assert main([*PLAN, *whole, "--pp", "2", "--offload-activations", "20"]) == 2
    assert "pp = 1" in capsys.readouterr().err
    assert main([*PLAN, "--pp", "2", "--offload-activations", "20"]) == 2  # the search's pins say the same
    assert "pp = 1" in capsys.readouterr().err
    assert main([*PLAN, "--offload-activations", "-3"]) == 2
    assert "--offload-activations=-3" in capsys.readouterr().err
    fsdp2 = [a if a != "nemo" else "fsdp2" for a in PLAN]
    assert main([*fsdp2, *whole, "--offload-activations", "20"]) == 2
    assert "no activation offload" in capsys.readouterr().err
    assert main([*fsdp2, "--offload-activations", "20"]) == 2
    assert "no activation offload" in capsys.readouterr().err


def test_the_search_offloads_where_it_pays() -> None:
    """Within NVIDIA's FSDP layout the search finds what its recipes run: the fewest layers offloaded that fit
    the chip (near-ties go to the less offloaded), 20 of 80 on GB300 and 40 on GB200; on H100 (PCIe 5) a small
    model keeps its activations; a framework without offload never offloads."""
    fsdp = SearchSpace(dp=64, tp=1, pp=1, cp=1, zero=(3,), recompute=("none",), offload=(False,))
    nemo = Profile(framework="nemo")
    for chip, layers in (("gb300", 20), ("gb200", 40)):
        s = best_strategy(_scenario(chip), fsdp, profile=nemo)
        assert (s.micro_batch_size, s.offload_activations) == (2, layers)
    small = _scenario("h100-sxm", "llama3-8b", seq_len=2048, global_batch=64)
    assert best_strategy(small, profile=nemo).offload_activations == 0
    assert best_strategy(_scenario("gb300"), profile=Profile(framework="fsdp2")).offload_activations == 0


def test_host_memory_bounds_the_offload() -> None:
    """A Grace superchip's 480 GB of LPDDR5X serve two GPUs (chips.yaml host_memory_gib 223.5 per GPU): 60 of
    80 layers at micro-batch 4 would need 405 GiB per GPU there. Where the catalog does not fix host memory
    (PCIe hosts) the cluster may give it (host_memory_gib_per_node)."""
    sc = _scenario("gb300")
    with pytest.raises(InfeasibleError, match="does not fit in host memory"):
        estimate_step(sc, replace(FSDP, micro_batch_size=4, offload_activations=60))
    assert estimate_step(sc, replace(FSDP, micro_batch_size=2, offload_activations=60)).memory.host_bytes < \
        sc.cluster.chip.host_memory_bytes
    h100 = _scenario("h100-sxm", "llama3-8b", global_batch=64)
    assert h100.cluster.host_memory_limit_bytes == 0.0  # unknown: not checked
    capped = replace(h100, cluster=replace(h100.cluster, host_memory_bytes_per_node=64 * 2**30))
    with pytest.raises(InfeasibleError, match="host memory"):
        estimate_step(capped, Strategy(dp=64, zero=1, offload_activations=16), eff=efficiency_for("h100-sxm", "nemo"))
