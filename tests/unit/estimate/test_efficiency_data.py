"""Efficiency as data (estimate/efficiency.yaml): per chip from published microbenchmarks, per framework; a chip
without data falls back visibly; the attention curve reproduces the FlashAttention-2 figure it was read from."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import Profile, chip_names, efficiency_for, framework_names
from greentrain.hardware.catalog import chips


def test_every_chip_entry_is_a_catalog_chip_with_a_source() -> None:
    for name in chip_names():
        assert name in chips()
        assert efficiency_for(name).chip_source


def test_chip_without_data_says_so() -> None:
    eff = efficiency_for("t4")
    assert "no microbenchmark data" in eff.chip_source


def test_h100_matmul_is_its_mamf() -> None:
    """ml-engineering MAMF table: H100 SXM 794.5 of 989.5 TFLOP/s."""
    assert efficiency_for("h100-sxm").matmul_max == pytest.approx(794.5 / 989.5, abs=0.002)


@pytest.mark.parametrize(("d", "seq", "causal", "tflops"), [
    (64, 2048, True, 232), (64, 8192, True, 273), (64, 16384, True, 284),
    (128, 2048, True, 265), (128, 8192, True, 308), (128, 16384, True, 328),
    (64, 2048, False, 274), (128, 16384, False, 338),
])
def test_flash_attention_2_h100_figure(d: int, seq: int, causal: bool, tflops: float) -> None:
    """FlashAttention-2 paper, H100 fwd+bwd (Dao-AILab/flash-attention assets/flash2_h100_fwd_bwd_benchmark.png,
    shared/reference/microbenchmarks.md §2): within 5 %."""
    eff = efficiency_for("h100-sxm")
    assert eff.attention(d, seq, causal) * 989.5 == pytest.approx(tflops, rel=0.05)


def test_frameworks() -> None:
    assert {"megatron", "nanotron", "deepspeed", "fsdp2"} <= set(framework_names())
    assert efficiency_for("h100-sxm", "nanotron").pipeline_balance == "cost"
    assert efficiency_for("h100-sxm", "megatron").dp_overlap is False  # Megatron Core's default
    with pytest.raises(ConfigError, match="did you mean megatron"):
        Profile(framework="megatorn")


def test_framework_zero_stages_bound_plan_and_search(capsys: pytest.CaptureFixture[str]) -> None:
    """nanotron runs ZeRO 0 or 1 (its optimizer.zero_stage), DDP none: the search enumerates only those and a
    pinned stage the framework does not run is refused in one line."""
    from greentrain.cli.main import main

    assert efficiency_for("h100-sxm", "nanotron").zero_stages == (0, 1)
    assert main(["plan", "--framework", "nanotron", "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["strategy"]["zero"] in (0, 1)
    assert main(["plan", "--framework", "ddp", "--zero", "1"]) == 2
    assert "runs ZeRO stages 0" in capsys.readouterr().err


def test_plan_says_what_the_efficiency_rests_on(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from greentrain.cli.main import main

    assert main(["plan", "--chip", "t4", "--num-chips", "8", "--model", "llama3.2-1b", "--seq-len", "2048",
                 "--global-batch", "64", "--json"]) == 0
    eff = json.loads(capsys.readouterr().out)["efficiency"]
    assert eff["chip_has_data"] is False and "no microbenchmark data for t4" in eff["summary"]
    assert main(["plan", "--framework", "nanotron", "--json"]) == 0
    eff = json.loads(capsys.readouterr().out)["efficiency"]
    assert eff["chip_has_data"] is True and eff["framework"] == "nanotron"
