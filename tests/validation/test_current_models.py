"""The 2024-2026 presets go through the estimator: a step estimate on H100s with a layout each could be trained
with (expert parallelism for the MoE models, pipeline stages for the largest), and its model FLOPs agree with
the model's own op list (the estimator costs exactly the ops model/ops.py lists; Korthikanti et al. 2022
§6 convention: forward + backward = 3 x forward)."""

from __future__ import annotations

import pytest

from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_preset
from greentrain.model.ops import model_flop_per_sequence
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

# preset -> (chips, Strategy fields)
LAYOUTS: dict[str, tuple[int, dict[str, int]]] = {
    "qwen3-8b": (8, {"dp": 8, "zero": 1}),
    "qwen3-30b-a3b": (16, {"dp": 16, "ep": 8, "zero": 1}),
    "qwen3-235b-a22b": (256, {"dp": 32, "pp": 8, "ep": 32, "zero": 1}),
    "gpt-oss-20b": (16, {"dp": 16, "ep": 16, "zero": 1}),
    "gpt-oss-120b": (64, {"dp": 64, "ep": 32, "zero": 1}),
    "mixtral-8x22b": (128, {"dp": 16, "pp": 8, "ep": 8, "zero": 1}),
    "nemotron-4-340b": (1024, {"dp": 16, "tp": 8, "pp": 8, "zero": 1}),
    "gemma3-27b": (64, {"dp": 16, "tp": 4, "zero": 1}),
    "olmo2-32b": (64, {"dp": 16, "tp": 4, "zero": 1}),
    "jamba-1.5-large": (256, {"dp": 32, "pp": 8, "ep": 16, "zero": 1}),
    "deepseek-v3": (2048, {"dp": 128, "pp": 16, "ep": 64, "zero": 1}),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_new_preset_estimates(name: str) -> None:
    chips, layout = LAYOUTS[name]
    spec = load_preset(name)
    sc = Scenario(model=spec, cluster=build_cluster(get_chip("h100"), chips),
                  workload=Workload(global_batch_size=1024, seq_len=4096), site=Site())
    est = estimate_step(sc, Strategy(recompute="full", micro_batch_size=1, **layout), check_fit=False)
    assert est.model_flop_per_step == pytest.approx(1024 * model_flop_per_sequence(spec, 4096), rel=1e-9)
    assert est.step_time_s > 0 and est.memory.total_bytes > 0
    if spec.is_moe:
        assert est.ep_comm_time_s > 0
