"""`greentrain plan`: the default scenario, JSON keys, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.cli.main import main

KEYS = ("step_time_s", "tokens_per_s", "mfu", "hfu", "memory_bytes_per_device", "run_time_s", "device_hours",
        "energy_kwh", "cost_usd", "emissions_kg_co2e")


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_default_scenario_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys, "--json")
    assert code == 0
    d = json.loads(out)
    for k in KEYS:
        assert k in d
    assert d["model"] == "llama3-8b" and d["num_chips"] == 64
    assert d["strategy"]["chosen_by_planner"] is True
    mem = d["memory_bytes_per_device"]
    parts = (mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"] + mem["temporary"]
             + mem["reserved"])
    assert mem["total"] == pytest.approx(parts)
    assert mem["total"] <= mem["capacity"]
    assert 0 < d["mfu"] <= d["hfu"] < 1
    assert d["run_time_s"] == pytest.approx(d["step_time_s"] * d["num_steps"])


def test_default_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys)
    assert code == 0 and "MFU" in out and "memory per device" in out


def test_explicit_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys, "--model", "gpt3-175b", "--chip", "a100-80gb", "--num-chips", "64",
                         "--tp", "8", "--pp", "8", "--vpp", "3", "--global-batch", "64", "--seq-len", "2048",
                         "--recompute", "selective", "--no-flash-attention", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["strategy"]["dp"] == 1 and d["strategy"]["sp"] is True
    assert d["step_time_s"] == pytest.approx(13.75, rel=0.05)  # Korthikanti et al. 2022 Table 5


@pytest.mark.parametrize(("args", "needle"), [
    (["--model", "llama3-8"], "did you mean"),
    (["--chip", "h1000"], "did you mean"),
    (["--num-chips", "24", "--tp", "3"], "num_heads"),
    (["--num-chips", "64", "--tp", "8", "--pp", "2", "--dp", "2"], "!= num_chips"),
    (["--global-batch", "0"], "positive integer"),
    (["--seq-len", "-5"], "positive integer"),
    (["--pue", "0.5"], "pue"),
    (["--region", "atlantis"], "region"),
    (["--model", "gpt3-175b", "--seq-len", "2048", "--num-chips", "8", "--tp", "8", "--recompute", "none"],
     "does not fit"),
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    code, out, err = _plan(capsys, *args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_yaml = tmp_path / "s.yaml"
    bad_yaml.write_text("model: [llama3-8b\n")
    unknown_key = tmp_path / "u.yaml"
    unknown_key.write_text("model: llama3-8b\nworkload: {global_batch_size: 8, seq_len: 128, sequence_len: 3}\n")
    bad_json = tmp_path / "config.json"
    bad_json.write_text('{"model_type": "llama", "hidden_size": ')
    for args, needle in ((["plan", str(bad_yaml)], "malformed YAML"),
                         (["plan", str(unknown_key)], "did you mean seq_len"),
                         (["plan", "--model", str(bad_json)], "malformed JSON")):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1


def test_scenario_file_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("model: megatron-22b\ncluster: {chip: a100-80gb, num_chips: 8}\n"
                 "strategy: {tp: 8, sp: true, recompute: selective, micro_batch_size: 4, flash_attention: false}\n"
                 "workload: {global_batch_size: 4, seq_len: 2048, num_steps: 10}\n"
                 "site: {grid_g_co2e_per_kwh: 400, pue: 1.1}\n")
    code, out, _ = _plan(capsys, str(f), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["num_steps"] == 10 and d["grid_g_co2e_per_kwh"] == pytest.approx(400)
    assert d["step_time_s"] == pytest.approx(1.10, rel=0.05)  # Korthikanti et al. 2022 Table 5


def test_cli_process_exit_status() -> None:
    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "plan", "--chip", "nope"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "unknown chip" in r.stderr


# ---- the user audit: tracebacks, silently wrong numbers, conflicting flags -----------------------------------

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


@pytest.fixture
def audit_files(tmp_path: Path) -> Path:
    files = {"gb0.yaml": "model: gpt3-175b\nworkload: {global_batch_size: 0}\n",
             "both.yaml": "model: gpt3-175b\nworkload: {train_tokens: 1e9, num_steps: 10}\n",
             "m5.yaml": "model: 5\n", "mlist.yaml": "model: [1, 2]\n",
             "dup.yaml": "model: llama3-8b\nmodel: gpt3-175b\n",
             "decoder_target.yaml": "workload: {target_seq_len: 512}\n",
             "vpp.yaml": "strategy: {pp: 4, vpp: 2, tp: 8, dp: 2, schedule: gpipe}\n",
             "chipnull.yaml": "cluster: {chip: null}\n", "link.yaml": "cluster: {inter_node_link: ib-foo}\n",
             "regionnull.yaml": "site: {region: null}\n", "noflash.yaml": "strategy: {flash_attention: false}\n",
             "negative.yaml": "model: {name: tiny, num_layers: -1, hidden_size: 256, num_heads: 4, "
                              "ffn_hidden_size: 1024, vocab_size: 1000}\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "some.png").write_bytes(PNG)
    return tmp_path


@pytest.mark.parametrize(("args", "needle"), [
    (["{d}/gb0.yaml"], "workload.global_batch_size=0: must be >= 1"),
    (["{d}/both.yaml"], "workload.num_steps=10: conflicts with workload.train_tokens"),
    (["--tokens", "inf"], "argument --tokens: 'inf' must be a finite number"),
    (["--tokens", "nan"], "must be a finite number"),
    (["--num-chips", "inf"], "argument --num-chips: 'inf' must be a finite integer"),
    (["--grid-g-per-kwh", "inf"], "argument --grid-g-per-kwh"),
    (["{d}/some.png"], "is not a UTF-8 text file"),
    (["--model", "{d}/some.png"], "model='{d}/some.png': is not a UTF-8 text file"),
    (["{d}/m5.yaml"], "model=5: must be a preset name"),
    (["{d}/mlist.yaml"], "model=[1, 2]: must be a preset name"),
    (["{d}"], "is a directory, not a file"),
    (["{d}/dup.yaml"], "duplicate key 'model'"),
    (["--target-seq-len", "512"], "--target-seq-len=512: applies only to an encoder-decoder model"),
    (["{d}/decoder_target.yaml"], "workload.target_seq_len=512: applies only to an encoder-decoder model"),
    (["--model", str(HF_DIR / "gpt2.json"), "--seq-len", "8192"], "--seq-len=8192: must be <= 1024"),
    (["--model", "gpt3-175b"], "--seq-len=8192: must be <= 2048"),  # the default 8192 does not fit
    (["--steps", "10", "--tokens", "1e9"], "--steps=10: conflicts with --tokens"),
    (["--pp", "4", "--vpp", "2", "--tp", "8", "--dp", "2", "--schedule", "gpipe"],
     "--schedule='gpipe': conflicts with --vpp=2"),
    (["{d}/vpp.yaml"], "strategy.schedule='gpipe': conflicts with strategy.vpp=2"),
    (["--pp", "4", "--schedule", "interleaved"], "--schedule='interleaved': needs --vpp > 1"),
    # one of the two would be ignored without a word (a bad-input audit)
    (["--no-flash-attention", "--attention-kernel", "fa2"],
     "--attention-kernel='fa2': is a fused kernel: it conflicts with --no-flash-attention"),
    (["--flash-attention", "--attention-kernel", "sdpa-math"],
     "--attention-kernel='sdpa-math': materialises the scores (unfused): it conflicts with --flash-attention"),
    (["{d}/noflash.yaml", "--attention-kernel", "fa2"],
     "--attention-kernel='fa2': is a fused kernel: it conflicts with the scenario file's strategy.flash_attention: "
     "false"),
    (["{d}/negative.yaml"], "model(tiny).num_layers=-1: must be a positive integer"),  # the whole rule, not >= 0
    (["--micro-batch", str(10**8 + 1)], "--micro-batch=100000001: must be an integer in [0, 100,000,000]"),
    (["--etp", str(10**11)], "--etp=100000000000: must be an integer in [0, 16,777,216] (0: as tp)"),
    (["--dp", "8", "--tp", "8", "--ep", str(10**11)], "--ep=100000000000: must be an integer in ["),
    # a scenario file's error names its key; a flag's the flag; a cut list of names says where the rest are
    (["{d}/chipnull.yaml"], "cluster.chip=None: must be a name (a string)"),
    (["{d}/link.yaml"], "cluster.inter_node_link='ib-foo': unknown link; known: dgx1-ib-edr"),
    (["{d}/regionnull.yaml"], "site.region=None: must be a name (a string)"),
    (["--region", "zzzzzz"], "--region='zzzzzz': unknown region; known: abw,"),
    (["--chip", "nope"], "names in all; `greentrain catalog chips` lists them)"),
    (["--memory-headroom", "1"], "--memory-headroom=1.0: must be in [0, 1)"),
])
def test_audit_bad_input(audit_files: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                         needle: str) -> None:
    code, out, err = _plan(capsys, *(a.format(d=audit_files) for a in args))
    assert code == 2 and out == ""
    assert needle.format(d=audit_files) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_file_without_site_is_the_default_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Missing parts of a file take the CLI's defaults: same region, same numbers as no file at all."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    code, from_file, _ = _plan(capsys, str(empty), "--json")
    assert code == 0
    _, default, _ = _plan(capsys, "--json")
    assert json.loads(from_file) == json.loads(default)
    d = json.loads(from_file)
    assert d["grid_g_co2e_per_kwh"] > 0 and d["emissions_kg_co2e"] > 0
    code, out, _ = _plan(capsys, str(empty))
    assert "(us-east-1)" in out  # the region is stated, as for the CLI default


def test_flag_run_length_replaces_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "epochs.yaml"
    f.write_text("workload: {num_epochs: 2, dataset_tokens: 1e9}\n")
    code, out, _ = _plan(capsys, str(f), "--steps", "7", "--json")
    assert code == 0 and json.loads(out)["num_steps"] == 7


def test_finetune_flags_and_the_default_batch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Issue 15 item 6: fine-tuning Llama 3 8B on 8 A100 is planned as fine-tuning, and the plan says which
    batch it used and that it is the default."""
    base = ("--model", "llama3-8b", "--chip", "a100-80gb", "--num-chips", "8", "--tokens", "1e9", "--json")
    full = json.loads(_plan(capsys, *base)[1])
    lora = json.loads(_plan(capsys, *base, "--finetune", "lora", "--lora-rank", "8", "--lora-targets", "q,k,v,o")[1])
    assert full["training"]["mode"] == "full" and full["global_batch_is_default"] is True
    assert lora["training"]["lora_targets"] == ["q", "k", "v", "o"] and lora["training"]["lora_rank"] == 8
    assert lora["training"]["trainable_params"] < 0.01 * full["training"]["trainable_params"]
    assert lora["flop_per_step"] < 0.75 * full["flop_per_step"]
    assert lora["memory_bytes_per_device"]["optimizer"] < 0.01 * full["memory_bytes_per_device"]["optimizer"]
    given = json.loads(_plan(capsys, *base, "--global-batch", "64")[1])
    assert given["global_batch_is_default"] is False
    f = tmp_path / "ft.yaml"
    f.write_text("model: t5-large\nworkload: {global_batch_size: 32, seq_len: 512, num_steps: 10, "
                 "finetune: freeze, freeze: [encoder]}\ncluster: {chip: a100-80gb, num_chips: 1}\n")
    frozen = json.loads(_plan(capsys, str(f), "--json")[1])
    assert frozen["training"]["freeze"] == ["encoder"] and frozen["global_batch_is_default"] is False
    code, _out, err = _plan(capsys, *base, "--finetune", "freeze", "--freeze", "encoder")
    assert code == 2 and "workload.freeze" in err and "encoder-decoder" in err and len(err.splitlines()) == 1
    assert "the default" in _plan(capsys, "--model", "llama3-8b", "--finetune", "lora")[1]


def test_lora_dtype_flag_and_the_frameworks_default(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--lora-dtype (model/finetune.py LORA_DTYPES) or a file's workload.lora_dtype sets the adapters' precision;
    unset, the framework's (ddp: Hugging Face Trainer with peft, fp32-autocast); the plan says which, and fp32
    adapters keep more and run longer than the model's dtype; a bad name or one without LoRA exits 2 in one line."""
    base = ("--model", "llama3-8b", "--chip", "h200", "--num-chips", "1", "--global-batch", "2", "--seq-len", "4096",
            "--micro-batch", "2", "--finetune", "lora", "--json")
    plans = {d: json.loads(_plan(capsys, *base, "--framework", "ddp", *(("--lora-dtype", d) if d else ()))[1])
             for d in ("", "model", "fp32")}
    default = plans[""]["training"]
    assert default["lora_dtype"] == "fp32-autocast" and "the framework's" in default["summary"]
    assert plans["fp32"]["training"]["lora_dtype"] == "fp32"
    act = {d: p["memory_bytes_per_device"]["activations"] for d, p in plans.items()}
    assert act["model"] < act[""] < act["fp32"] and plans["model"]["step_time_s"] < plans["fp32"]["step_time_s"]
    f = tmp_path / "lora.yaml"
    f.write_text("model: llama3-8b\nworkload: {global_batch_size: 2, seq_len: 4096, num_steps: 1, finetune: lora, "
                 "lora_dtype: fp32}\ncluster: {chip: h200, num_chips: 1}\n")
    assert json.loads(_plan(capsys, str(f), "--json")[1])["training"]["lora_dtype"] == "fp32"
    f.write_text("model: llama3-8b\nworkload: {global_batch_size: 2, seq_len: 4096, num_steps: 1, lora_dtype: fp32}"
                 "\ncluster: {chip: h200, num_chips: 1}\n")
    code, _out, err = _plan(capsys, str(f))
    assert code == 2 and "workload.lora_dtype" in err and "lora only" in err and len(err.splitlines()) == 1


def test_vpp_flag_alone_runs_the_interleaved_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    """--vpp 2 without --schedule: the default schedule follows vpp (it used to conflict with a derived 1f1b)."""
    code, out, err = _plan(capsys, "--tp", "8", "--pp", "4", "--vpp", "2", "--zero", "1", "--recompute", "full",
                           "--micro-batch", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["strategy"]["schedule"] == "interleaved"


def test_documented_values_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    """--etp 0 is the framework's expert tensor parallelism (as --help says); a kernel that agrees with
    --(no-)flash-attention is no conflict."""
    for args in (["--model", "mixtral-8x7b", "--num-chips", "64", "--ep", "8", "--etp", "0"],
                 ["--region", "mylab", "--grid-g-per-kwh", "300"],  # beside an intensity a region is a label
                 ["--no-flash-attention", "--attention-kernel", "sdpa-math"],
                 ["--flash-attention", "--attention-kernel", "cudnn"]):
        code, _, err = _plan(capsys, *args)
        assert code == 0, err
