"""DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437) on its published cluster and layout.

§3.1: 2,048 NVIDIA H800 GPUs, 8 per node (NVLink/NVSwitch inside, InfiniBand across); §3.2 and §3.4:
16-way pipeline parallelism (DualPipe), 64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism, no
tensor parallelism; §4.2: sequence length 4,096, batch up to 15,360 sequences, FP8 mixed precision (§3.3).
The estimate must place this layout (it used to be refused: MLA and the first dense layers had no
description); what it predicts for time is the estimator's, not checked against the report here.
"""

from __future__ import annotations

from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip, get_link
from greentrain.model.load import load_preset
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload


def test_h800_is_an_h100_with_slower_nvlink() -> None:
    h800, h100 = get_chip("h800"), get_chip("h100")
    assert h800.peak_flop_per_s("bf16") == h100.peak_flop_per_s("bf16")
    assert h800.memory_bytes == h100.memory_bytes
    assert get_link(h800.intra_node_link).bytes_per_s == 200e9  # 400 GB/s bidirectional
    assert get_link(h100.intra_node_link).bytes_per_s == 450e9


def test_published_layout_plans_on_2048_h800() -> None:
    spec = load_preset("deepseek-v3")
    sc = Scenario(model=spec, cluster=build_cluster(get_chip("h800"), 2048),
                  workload=Workload(global_batch_size=15360, seq_len=4096, precision="fp8"), site=Site())
    st = Strategy(dp=128, pp=16, ep=64, zero=1, recompute="full", micro_batch_size=1)
    est = estimate_step(sc, st)  # raises InfeasibleError if it cannot be placed or does not fit
    assert est.memory.total_bytes <= est.memory_capacity_bytes
    assert est.tokens_per_step == 15360 * 4096
    assert est.ep_comm_time_s > 0  # the all-to-alls of 58 MoE layers are costed
    # model FLOPs: 6 x active non-embedding parameters per token plus attention, within the usual 6N band
    n_active = spec.num_active_params() - spec.vocab_size * spec.hidden_size
    per_token = est.model_flop_per_step / est.tokens_per_step
    assert 6 * n_active < per_token < 6 * n_active * 1.35
