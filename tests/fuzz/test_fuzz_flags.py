"""Issue 24: every command's flags, fuzzed: plausible values, absurd ones (beyond greentrain.config.BOUNDS or
the flag's own rule) and garbage. 0 tracebacks, 0 hangs, 0 absurd values accepted (harness.check)."""

from __future__ import annotations

import pytest
from harness import check, profile, run
from hypothesis import given
from hypothesis import strategies as st

DEVICES = "devices:\n  - {name: gpu, count: 4, tflop_per_s: 100, ingress_gbit_per_s: 10, egress_gbit_per_s: 10}\n"
GARBAGE = ("", " ", "nan", "inf", "1e400", "x", "0x10", "1,2", "\u00e9", "9" * 400)  # never a valid value here
HUGE = ("1e9", "1e12", "1e30", "1e300")

SCENARIO = {  # plan, search and simulate step share these (cli/scenario_args.py)
    "--num-chips": (("8", "16"), ("0", "-1", "1e30", str(2**25))),
    "--chips-per-node": (("8", "4"), ("0", "1048576")),
    "--global-batch": (("64", "128"), ("0", "1e9")),
    "--seq-len": (("1024", "2048"), ("0", "1e9")),
    "--tokens": (("1e9", "1e11"), ("0", "1e40", "-1")),
    "--steps": (("10", "1000"), ("0", "1e11")),
    "--pue": (("1.1", "1.56"), ("0.5", *HUGE)),
    "--grid-g-per-kwh": (("50", "400"), ("-1", "1e4", *HUGE)),
    "--electricity-usd-per-kwh": (("0.1", "0.3"), ("-1", "1e3", *HUGE)),
    "--region": (("FRA", "us-east-1"), ("nowhere", "x" * 300)),
    "--chip": (("h100", "a100-80gb"), ("nochip", "x" * 300)),
    "--model": (("llama3.2-1b",), ("nomodel", "x" * 300, "x" * 5000, "a/" * 3000)),
    "--precision": (("bf16", "fp8"), ("fp64",)),
    # --fp8-recipe (issue 23) is valid only with --precision fp8, and mxfp8 only on Blackwell: a key of several
    # words sets the fixed flags before its last (argv_of never draws two keys that share a flag)
    "--precision=fp8 --fp8-recipe": (("tensorwise", "delayed", "rowwise"), ("mxfp8", "fp8", "Rowwise")),
    "--chip=b200 --precision=fp8 --fp8-recipe": (("mxfp8", "tensorwise"), ("blockwise",)),
    "--precision=bf16 --fp8-recipe": ((), ("tensorwise", "delayed", "rowwise", "mxfp8")),
}
STRATEGY = {"--tp": (("1", "2"), ("0", "1e12")), "--pp": (("1", "2"), ("0", "1e12")),
            "--dp": (("4", "8"), ("0", "1e12")), "--micro-batch": (("1", "2"), ("0", "1e12")),
            "--zero": (("0", "1"), ("4", "-1"))}

COMMANDS: dict[str, tuple[tuple[str, ...], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]] = {
    "plan": (("plan", "--model", "llama3.2-1b", "--num-chips", "8", "--json"), {**SCENARIO, **STRATEGY}),
    "search": (("search", "--model", "llama3.2-1b", "--num-chips", "8", "--json", "--top", "3"), {
        **SCENARIO, "--top": (("1", "5"), ("0", "-1")), "--max-tp": (("2", "8"), ("0",)),
        "--objective": (("time", "co2e"), ("speed",)), "--budget-usd": (("1e6",), ("0", "-5")),
        "--memory-headroom": (("0.1",), ("nan",))}),
    "simulate step": (("simulate", "step", "--model", "llama3.2-1b", "--num-chips", "8", "--tp", "1", "--pp", "2",
                       "--dp", "4", "--json"), {
        "--straggler": (("0=2", "1=1.5"), ("0=1e8", "0=0", "0=-1", "0=nan", "5=2", "x", "0=1e30")),
        "--link-slowdown": (("2", "10"), ("0", "-1", "1e5", *HUGE)),
        "--bucket-mb": (("25", "100"), ("-1",)), **SCENARIO}),
    "simulate swarm": (("simulate", "swarm", "--devices", "{devices}", "--model", "llama3.2-1b", "--json"), {
        "--rounds": (("1", "2"), ("0", "1e9", "-1")), "--batch-tokens": (("2048", "4096"), ("0", "1e10", *HUGE)),
        "--seq-len": (("1024",), ("0", "-1")), "--tp-depth": (("1", "2"), ("40", "-1")),
        "--min-tp-size": (("128", "256"), ("0",)), "--scheduler": (("greedy", "fastest"), ("foo",)),
        "--precision": (("bf16",), ("fp64",))}),
    "footprint": (("footprint", "--chip", "h100", "--num-chips", "8", "--region", "FRA", "--json"), {
        "--hours": (("2", "48"), ("-1", "1e9", *HUGE)), "--days": (("1", "30"), ("-1", "1e5", *HUGE)),
        "--pue": (("1.2",), ("0.9", *HUGE)), "--grid-g-per-kwh": (("50",), ("-1", *HUGE)),
        "--electricity-usd-per-kwh": (("0.2",), ("-1", *HUGE)), "--power-w": (("300",), ("-5", "1e6", *HUGE)),
        "--utilization": (("0.5",), ("2", "-1")), "--num-chips": (("8", "64"), ("0", "1e30")),
        "--chip": (("a100-80gb",), ("nochip",)), "--host-w-per-chip": (("100",), ("-1", "1e6", *HUGE)),
        "--lifetime-years": (("4",), ("0", "100", *HUGE)), "--price-usd-per-hour": (("2.5",), ("-1", "1e5", *HUGE)),
        "--hardware-usd-per-chip": (("30000",), ("-1", "1e9", "1e12")), "--region": (("us-east-1",), ("", "nowhere"))}),
    "offload plan": (("offload", "plan", "--model", "1", "--seq-len", "1024", "--device-gib", "80", "--host-gib",
                      "100", "--json"), {
        "--host-gib": (("64", "200"), ("0", "-1", "1e9", "1e6")), "--device-gib": (("24", "80"), ("0", "1e9")),
        "--model": (("1", "8"), ("nomodel",))}),
    "track": (("track", "--out", "{tmp}/track", "--", "true"), {
        "--cpu-tdp-w": ((), ("0", "-1", "1e5", *HUGE)), "--pue": ((), ("0.5", *HUGE)),
        "--grid-g-per-kwh": ((), ("-1", *HUGE)), "--interval-s": ((), ("0", "-1", "61", *HUGE))}),
    "emulate": (("emulate", "matmul"), {"--m": ((), ("0", "1e12", "200000")), "--k": ((), ("0", "-1", "1e12")),
                                        "--n": ((), ("0", "1e12"))}),
}
# x 8 commands (170 until session 22, when the suite reached its 6-minute budget; GREENTRAIN_FUZZ_EXAMPLES runs more)
EXAMPLES_PER_COMMAND = 120


# a given intensity makes the region only its label (footprint/regions.build_site): an unknown region name beside
# it is valid, so the two are never drawn together (test_seed_corpus.py checks the label of the pair)
TIED = {"--region": "--grid-g-per-kwh", "--grid-g-per-kwh": "--region"}


def flag_names(key: str) -> set[str]:
    """The flags a table key sets (``--precision=fp8 --fp8-recipe``: --precision and --fp8-recipe), and those
    it must not be drawn with (TIED)."""
    names = {word.split("=")[0] for word in key.split()}
    return names | {TIED[n] for n in names if n in TIED}


@st.composite
def argv_of(draw: st.DrawFn, command: str) -> tuple[list[str], bool]:
    """The command's base argv plus 1-3 flags, each with a plausible, absurd or garbage value; True when one is
    absurd or garbage (the case must be refused). A key of several words gives its fixed flags, then its last
    with the value; a key that shares a flag with one drawn before it is left out (argparse keeps the last)."""
    base, flags = COMMANDS[command]
    drawn = draw(st.lists(st.sampled_from(sorted(flags)), min_size=1, max_size=3, unique=True))
    chosen: list[str] = []
    for key in drawn:
        if not any(flag_names(key) & flag_names(k) for k in chosen):
            chosen.append(key)
    argv, absurd = list(base), False
    end = argv.index("--") if "--" in argv else len(argv)  # flags go before a command's own arguments
    for key in chosen:
        ok, bad = flags[key]
        kind = draw(st.sampled_from(("ok", "bad", "garbage")) if ok else st.sampled_from(("bad", "garbage")))
        value = draw(st.sampled_from(ok if kind == "ok" else bad if kind == "bad" else GARBAGE))
        absurd |= kind != "ok"
        *fixed, flag = key.split()
        argv[end:end] = [*fixed, f"{flag}={value}"]
        end += len(fixed) + 1
    return argv, absurd


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("fuzz-flags")
    (tmp / "devices.yaml").write_text(DEVICES, encoding="utf-8")
    return {"devices": str(tmp / "devices.yaml"), "tmp": str(tmp)}


def _fill(argv: list[str], files: dict[str, str]) -> list[str]:
    return [a.format(**files) if "{" in a and "}" in a and not a.startswith("--") else a for a in argv]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@profile(EXAMPLES_PER_COMMAND)
@given(data=st.data())
def test_fuzz_flags(command: str, files: dict[str, str], data: st.DataObject) -> None:
    argv, absurd = data.draw(argv_of(command), label="argv")
    check(run(_fill(argv, files)), absurd=absurd)
