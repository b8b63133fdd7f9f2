"""The runs CSV reader: rows become scenarios with their strategy; every bad cell is one error naming the run,
the column, the value and the rule (schema: shared/reference/calibration/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.cli.main import main
from greentrain.errors import ConfigError

HEADER = "run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,dp,tp,pp,zero,status," \
         "measured_step_time_s,measured_mfu,measured_peak_memory_gib"
GOOD = "r1,nanotron,llama3.2-1b,h100-sxm,8,2048,64,1,8,1,1,1,ok,1.5,0.4,30"


def _csv(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


def test_reads_a_row(tmp_path: Path) -> None:
    (run,) = read_runs(_csv(tmp_path, GOOD))
    assert run.run_id == "r1" and run.framework == "nanotron"
    assert run.strategy.dp == 8 and run.strategy.zero == 1 and run.scenario.cluster.num_chips == 8
    assert run.measured.ran and run.measured.step_time_s == 1.5
    assert run.measured.peak_memory_bytes == 30 * 2**30
    assert run.group == ("llama3.2-1b", 8)


def test_empty_cells_take_defaults_and_dp_follows(tmp_path: Path) -> None:
    (run,) = read_runs(_csv(tmp_path, "r1,,llama3.2-1b,h100-sxm,16,2048,64,,,2,,,,,,"))
    assert run.strategy.dp == 8 and run.strategy.tp == 2 and run.measured.status is None and run.framework == ""


def test_model_file_relative_to_the_csv(tmp_path: Path) -> None:
    src = Path(__file__).parents[2] / "data" / "calibration" / "playbook-1b.json"
    (tmp_path / "m.json").write_text(src.read_text())
    (run,) = read_runs(_csv(tmp_path, GOOD.replace("llama3.2-1b", "m.json")))
    assert run.scenario.model.num_layers == 16 and run.scenario.model.vocab_size == 131072


@pytest.mark.parametrize(("row", "header", "needle"), [
    (GOOD, HEADER + ",bogus", "'bogus': is not a runs column"),
    (GOOD.replace("r1,", "", 1), HEADER.replace("run_id,", ""), "'run_id': is missing"),
    (GOOD.replace(",1.5,", ",fast,"), HEADER, "runs[r1].measured_step_time_s='fast': must be a number"),
    (GOOD.replace("h100-sxm", "h999"), HEADER, "runs[r1].chip='h999'"),
    (GOOD.replace("llama3.2-1b", "nope.json"), HEADER, "runs[r1].model='nope.json': cannot be loaded"),
    (GOOD.replace(",8,1,1,1,", ",4,1,1,1,"), HEADER, "dp*tp*pp*cp = 4*1*1*1 = 4 must equal num_chips = 8"),
    (GOOD.replace(",ok,", ",maybe,"), HEADER, "runs[r1].status='maybe': must be one of ok, failed"),
    (GOOD.replace(",0.4,", ",40,"), HEADER, "measured_mfu=40.0: must be a fraction"),
    # the column's own name, not the field's; a count past any global batch is a slip (a bad-input audit)
    (GOOD.replace(",64,1,", ",64,1e30,"), HEADER, "runs[r1].micro_batch=1000000000000000019884624838656: must be "
                                                    "an integer in [1, 100,000,000]"),
    (GOOD.replace(",64,1,", ",1e30,1,"), HEADER, "runs[r1].global_batch="),
    (GOOD.replace(",h100-sxm,8,", ",h100-sxm,-1,"), HEADER, "runs[r1].num_chips='-1': must be an integer >= 1"),
])
def test_bad_input_names_run_column_value_rule(tmp_path: Path, row: str, header: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        read_runs(_csv(tmp_path, row, header=header))
    assert needle in str(e.value), str(e.value)


def test_duplicate_run_id(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be unique"):
        read_runs(_csv(tmp_path, GOOD, GOOD))


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.yaml"
    assert main(["validate", str(_csv(tmp_path, GOOD.replace(",1.5,", ",x,")))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "measured_step_time_s" in err
    assert main(["calibrate", str(tmp_path / "runs.csv"), "-o", str(out)]) == 2
    assert not out.exists()
    assert main(["validate", str(tmp_path / "runs.csv"), "--framework", "nanotorch"]) == 2
    assert "did you mean nanotron" in capsys.readouterr().err


def test_a_fused_attention_kernel_beside_a_row_without_flash_attention_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--attention-kernel fa2 would be ignored for a row that ran without flash attention (a review finding):
    refused, naming the row; an unfused kernel beside the default (flash) rows overrides them, as in plan."""
    p = _csv(tmp_path, GOOD + ",false", GOOD.replace("r1,", "r2,") + ",true", header=HEADER + ",flash_attention")
    assert main(["validate", str(p), "--attention-kernel", "fa2"]) == 2
    err = capsys.readouterr().err
    assert "--attention-kernel='fa2': is a fused kernel: it conflicts with runs[r1].flash_attention=false" in err
    assert err.count("\n") == 1
    assert main(["validate", str(p), "--attention-kernel", "sdpa-math", "--json"]) == 0


def test_a_row_names_the_kernels_it_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """attention_kernel and loss_kernel columns: a published run that ran another kernel than its framework's
    default (an uncompiled fp32 loss, a Triton attention) is predicted with it; a flag overrides every row; an
    unknown name or a fused kernel beside flash_attention false is refused naming the row and the column."""
    from greentrain.calibrate.validate import predict, run_efficiency

    header = HEADER + ",attention_kernel,loss_kernel"
    p = _csv(tmp_path, GOOD + ",,fp32", GOOD.replace("r1,", "r2,") + ",,fused", header=header)
    a, b = read_runs(p)
    assert (a.loss_kernel, b.loss_kernel, a.attention_kernel) == ("fp32", "fused", "")
    mem = [predict(r, run_efficiency(r)).peak_memory_bytes or 0.0 for r in (a, b)]
    assert mem[0] > mem[1]  # fp32 logits held for the backward, against none
    same = [predict(r, run_efficiency(r, loss_kernel="fused")).peak_memory_bytes for r in (a, b)]
    assert same[0] == same[1]  # --loss-kernel overrides the rows
    with pytest.raises(ConfigError, match=r"runs\[r1\]\.loss_kernel='fused-liger'"):
        read_runs(_csv(tmp_path, GOOD + ",,fused-liger", header=header))
    with pytest.raises(ConfigError, match=r"runs\[r1\]\.attention_kernel='fa2': is a fused kernel: it conflicts"):
        read_runs(_csv(tmp_path, GOOD + ",fa2,,false", header=header + ",flash_attention"))
    out, p = tmp_path / "p.yaml", _csv(tmp_path, GOOD + ",,fp32", GOOD.replace("r1,", "r2,") + ",,fused", header=header)
    assert main(["calibrate", str(p), "-o", str(out)]) == 2  # one profile is fitted: the rows must agree
    assert "loss_kernel='fp32, fused': the runs mix kernels" in capsys.readouterr().err and not out.exists()


def test_unknown_framework_is_named_unless_overridden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _csv(tmp_path, GOOD.replace("nanotron", "megatron-lm"))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "runs[r1].framework='megatron-lm'" in err and "did you mean megatron" in err
    assert main(["validate", str(p), "--framework", "megatron", "--json"]) == 0


def test_calibrate_refuses_an_input_given_twice_and_a_missing_file(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An input given twice would be fitted twice, or fitted and held out (a bad-input audit); nothing is written.
    Two files whose run_ids repeat each other (r1, r2 on two clusters) are two sets of runs."""
    p, out = _csv(tmp_path, GOOD), tmp_path / "p.yaml"
    assert main(["calibrate", str(p), str(tmp_path / "." / "runs.csv"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "runs.csv': is given twice" in err and err.count("\n") == 1
    (tmp_path / "other").mkdir()
    other = _csv(tmp_path / "other", GOOD.replace(",1.5,", ",1.6,"))
    assert main(["calibrate", str(p), str(other), "-o", str(out), "--fit", "kernel_efficiency"]) == 0
    out.unlink()
    assert main(["calibrate", str(tmp_path / "nope.csv"), "-o", str(out)]) == 2
    assert "nope.csv': does not exist" in capsys.readouterr().err
    for command in (["calibrate", str(p), "-o", str(out)], ["validate", str(p)]):  # the flag's error, not row 1's
        assert main([*command, "--intra-node-link", "foo"]) == 2
        assert "argument --intra-node-link: 'foo': unknown link" in capsys.readouterr().err
    assert not out.exists()
