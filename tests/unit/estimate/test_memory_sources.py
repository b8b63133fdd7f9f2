"""Memory terms with a source: PyTorch's unfused cross-entropy (torchtitan's loss) counted by a dispatch mode, and
Megatron-Bridge's bf16 gradient buffer that lets GPT-OSS-120B fit on DGX-B200 as its recipe ran it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.state_dtypes import workload_grad_dtype
from greentrain.estimate.step import estimate_step
from greentrain.model.loss import EAGER_LOSS_FP32_BUFFERS, LOSS_PARALLEL_FP32_BUFFERS, loss_bytes_per_logit

torch = pytest.importorskip("torch")


def _peak_loss_bytes_per_logit(tokens: int, vocab: int, hidden: int, *, parallel: bool) -> float:
    """The most bytes held at once by allocations at least half a logit buffer large (the profiler's CPU memory
    events) over torchtitan's loss path: bf16 head -> .float() -> F.cross_entropy -> backward; ``parallel``:
    under loss_parallel, the logits a vocabulary-sharded DTensor (a one-rank gloo mesh)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel
    from torch.profiler import ProfilerActivity, profile

    h = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(0))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        pred = torch.nn.functional.linear(h, w)
        if parallel:
            logits = DTensor.from_local(pred, init_device_mesh("cpu", (1,)), [Shard(-1)], run_check=False)
            with loss_parallel():
                loss = torch.nn.functional.cross_entropy(logits.float(), labels)
                del pred, logits  # torchtitan's train step drops its reference before the backward
                loss.backward()
        else:
            loss = torch.nn.functional.cross_entropy(pred.float(), labels)
            del pred
            loss.backward()
    assert not parallel or dist.is_initialized()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    now = peak = 0
    for e in events:
        if abs(e.nbytes()) * 2 >= tokens * vocab:
            now += e.nbytes()
            peak = max(peak, now)
    return peak / (tokens * vocab)


def test_eager_fp32_cross_entropy_holds_three_fp32_buffers_per_logit() -> None:
    measured = _peak_loss_bytes_per_logit(256, 4096, 32, parallel=False)
    assert measured == pytest.approx(4.0 * EAGER_LOSS_FP32_BUFFERS)
    assert loss_bytes_per_logit("fp32-eager") == measured
    assert loss_bytes_per_logit("fp32-eager") > loss_bytes_per_logit("fp32")  # nanotron's fused-in-fp32 path
    assert efficiency_for("h100-sxm", "torchtitan").loss_kernel == "fp32-eager"


def test_loss_parallel_cross_entropy_holds_four_fp32_buffers_per_logit() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        measured = _peak_loss_bytes_per_logit(256, 4096, 32, parallel=True)
    finally:
        dist.destroy_process_group()
    assert measured == pytest.approx(4.0 * LOSS_PARALLEL_FP32_BUFFERS)
    assert loss_bytes_per_logit("fp32-eager", vocab_parallel=True) == measured


HEADER = ("run_id,framework,model,chip,num_chips,chips_per_node,seq_len,global_batch,micro_batch,dp,tp,pp,cp,ep,"
          "zero,recompute,precision,status\n")


def test_megatron_bridge_recipes_keep_bf16_gradients_and_gpt_oss_120b_fits_on_b200(tmp_path: Path) -> None:
    """Megatron-Bridge 26.04 performance summary: GPT-OSS-120B, 64 DGX-B200, bf16, GBS 1280, MBS 4, seq 4096,
    EP 8 ran (13,568 tokens/s per GPU); its recipes set ddp.grad_reduce_in_fp32 false (2 bytes per parameter in
    the gradient buffer). With fp32 gradients the same layout needs more than a B200 holds."""
    row = "gptoss,{fw},gpt-oss-120b,b200,64,8,4096,1280,4,64,1,1,1,8,1,selective,bf16,ok\n"
    path = tmp_path / "runs.csv"
    path.write_text(HEADER + row.format(fw="nemo") + row.format(fw="megatron").replace("gptoss", "fp32"), "utf-8")
    nemo, megatron = read_runs(path)
    assert [workload_grad_dtype(r.scenario.workload, efficiency_for("b200", r.framework))
            for r in (nemo, megatron)] == ["bf16", "fp32"]
    est = {r.run_id: estimate_step(r.scenario, r.strategy, check_fit=False, eff=efficiency_for("b200", r.framework))
           for r in (nemo, megatron)}
    capacity = nemo.scenario.cluster.chip.memory_bytes
    assert est["gptoss"].memory.total_bytes < capacity < est["fp32"].memory.total_bytes
    # the difference is the gradient buffer alone: 2 bytes per local parameter
    diff = est["fp32"].memory.gradients_bytes - est["gptoss"].memory.gradients_bytes
    assert diff == pytest.approx(est["gptoss"].memory.gradients_bytes, rel=1e-9)


def test_expert_state_shards_over_the_expert_data_parallel_group() -> None:
    """GPT-OSS-120B on 64 B200, EP 8, distributed optimizer: the dense parameters' fp32 master and Adam moments
    (12 bytes) shard over dp = 64, the routed experts' over the expert dp group 64 / 8 = 8 (Megatron Core's
    intra_expt_dp_group); the vectorised search counts the same bytes."""
    import dataclasses

    import numpy as np

    from greentrain.estimate.vector import estimate_steps
    from greentrain.parallel.strategy import Strategy
    from greentrain.parallel.table import StrategyTable
    from greentrain.scenario import scenario_from_dict

    sc = scenario_from_dict({"model": "gpt-oss-120b", "cluster": {"chip": "b200", "num_chips": 64},
                             "workload": {"global_batch_size": 1280, "seq_len": 4096, "num_steps": 1,
                                          "grad_dtype": "bf16"}})
    eff = efficiency_for("b200", "nemo")
    s = Strategy(dp=64, ep=8, zero=1, recompute="selective", micro_batch_size=4)
    est = estimate_step(sc, s, check_fit=False, eff=eff)
    m = sc.model
    experts = m.total_layers * m.num_experts * m.expert_params() / 8  # this rank's routed experts
    dense = m.num_params() - m.total_layers * m.num_experts * m.expert_params()
    assert est.memory.optimizer_bytes == pytest.approx(12.0 * (dense / 64 + experts / 8), rel=2e-3)
    assert est.memory.weights_bytes == pytest.approx(2.0 * (dense + experts), rel=2e-3)
    # ep 1: every expert on every rank, sharded over all 64
    one = estimate_step(sc, dataclasses.replace(s, ep=1), check_fit=False, eff=eff)
    assert one.memory.optimizer_bytes == pytest.approx(12.0 * m.num_params() / 64, rel=2e-3)
    table = StrategyTable.from_strategies([s, dataclasses.replace(s, ep=1), dataclasses.replace(s, zero=3)])
    vec = estimate_steps(sc, table, check_fit=False, eff=eff)
    scalar = [est.memory, one.memory,
              estimate_step(sc, dataclasses.replace(s, zero=3), check_fit=False, eff=eff).memory]
    assert np.allclose(vec.memory_bytes, [x.total_bytes for x in scalar], rtol=1e-9)


def test_torchtitan_pipelines_keep_the_fsdp_state_gathered() -> None:
    """torch.distributed.pipelining runs a stage's FSDP2 backward with resharding and gradient sync off until the
    last micro-batch, accumulating whole fp32 gradients: with pp > 1 torchtitan's state is ZeRO-1's at ZeRO 3
    (weights 2 + gradients 4 bytes per stage parameter whole); with pp 1 ZeRO-3 shards them."""
    import dataclasses

    import numpy as np

    from greentrain.estimate.vector import estimate_steps
    from greentrain.parallel.strategy import Strategy
    from greentrain.parallel.table import StrategyTable
    from greentrain.scenario import scenario_from_dict

    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})
    tt, plain = efficiency_for("h100-sxm", "torchtitan"), efficiency_for("h100-sxm", "fsdp2")
    assert tt.pp_gathers_state and not plain.pp_gathers_state
    # ZeRO-3's state alone: no gathered block, a 16-bit weight shard beside the master
    plain = dataclasses.replace(plain, dp_bucket_per_layer=False, shards_are_master=False)
    piped = Strategy(dp=8, pp=2, zero=3, recompute="full", micro_batch_size=1)
    mem = {name: estimate_step(sc, piped, check_fit=False, eff=eff).memory for name, eff in (("tt", tt),
                                                                                           ("plain", plain))}
    assert mem["tt"].gradients_bytes == pytest.approx(8 * mem["plain"].gradients_bytes, rel=1e-9)
    assert mem["tt"].weights_bytes == pytest.approx(8 * mem["plain"].weights_bytes, rel=1e-9)
    flat = dataclasses.replace(piped, pp=1, dp=16)
    one = estimate_step(sc, flat, check_fit=False, eff=tt).memory
    assert one.gradients_bytes == pytest.approx(
        estimate_step(sc, flat, check_fit=False, eff=plain).memory.gradients_bytes)
    vec = estimate_steps(sc, StrategyTable.from_strategies([piped, flat]), check_fit=False, eff=tt)
    assert np.allclose(vec.memory_bytes, [mem["tt"].total_bytes, one.total_bytes], rtol=1e-9)


def test_fully_sharded_blocks_hold_the_prefetched_block_and_the_root_unit_gathered() -> None:
    """ZeRO-3 with one FSDP unit per block (torchtitan): at the loss's backward the LM head's unit and the block
    prefetched for the backward are gathered, 2 bytes per parameter beside the sharded state; ZeRO-2 keeps the
    weights gathered anyway (counted as weights), and a framework without per-block units adds nothing."""
    import dataclasses

    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict

    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    tt = efficiency_for("h100-sxm", "torchtitan")
    s = Strategy(dp=8, zero=3, recompute="full", micro_batch_size=1)
    z3 = estimate_step(sc, s, check_fit=False, eff=tt).memory
    z2 = estimate_step(sc, dataclasses.replace(s, zero=2), check_fit=False, eff=tt).memory
    m = sc.model
    block = (m.num_params() - 2 * m.vocab_size * m.hidden_size - m.hidden_size) / m.total_layers
    ends = 2 * m.vocab_size * m.hidden_size + m.hidden_size  # embedding, LM head (untied), final norm
    # FSDP2's shards are the fp32 master (counted with the optimizer states): the weights are the gathered copies
    assert z3.weights_bytes == pytest.approx(2.0 * (block + ends), rel=1e-3)
    assert z2.weights_bytes == pytest.approx(2.0 * m.num_params(), rel=1e-9)
    assert z3.optimizer_bytes == pytest.approx(z2.optimizer_bytes, rel=1e-9)  # the 12-byte master + moments
    unsplit = dataclasses.replace(tt, dp_bucket_per_layer=False, shards_are_master=False)
    sharded = 2.0 * m.num_params() / 8  # a 16-bit shard beside the master (ZeRO-3 as DeepSpeed keeps it)
    assert estimate_step(sc, s, check_fit=False, eff=unsplit).memory.weights_bytes == pytest.approx(sharded)


def test_a_recomputed_layer_rematerialises_its_activations_during_its_backward() -> None:
    """Full recomputation keeps each layer's input, and during one layer's backward that layer's activations as
    no recomputation keeps them exist again: the peak holds max(the loss's buffers, that layer's rest)."""
    from greentrain.estimate.memory import layer_activation, layer_activation_bytes
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict

    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 8, "seq_len": 8192, "num_steps": 1}})
    eff = dataclasses.replace(efficiency_for("h100-sxm", "megatron"), loss_kernel="chunked")  # no loss buffer
    full = estimate_step(sc, Strategy(dp=8, zero=1, recompute="full", micro_batch_size=1), check_fit=False, eff=eff)
    act = layer_activation(sc.model, 1, 8192, 2.0, moe=False, flash=True, fused_glu=eff.fused_glu)
    rest = layer_activation_bytes(act, tp=1, sp=False, recompute="none") - act.input_bytes
    assert full.memory.temporary_bytes == pytest.approx(rest, rel=1e-9)
    none = estimate_step(sc, Strategy(dp=8, zero=1, recompute="none", micro_batch_size=1), check_fit=False, eff=eff)
    assert none.memory.temporary_bytes == 0.0
