"""One question, one answer or the reason beside each number: `offload plan` prints what `plan` answers for the
same model, chip, sequence and step and why its own figure differs; JSON keys mean one thing; track says n/a
rather than a measured-looking 0 tokens/s."""

from __future__ import annotations

import json

import pytest

from greentrain.cli.main import main

OFFLOAD = ["offload", "plan", "--model", "1", "--seq-len", "8192", "--device-gib", "80", "--host-gib", "500",
           "--json"]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.slow  # two planner runs each (5.7 s at load 7 on 2 cores)
@pytest.mark.parametrize("framework, reason", [("pytorch", "eager PyTorch kernels"),
                                               ("ml_dataflow", "chunks of 16,384 tokens")])
def test_offload_plan_states_plans_answer_and_the_reasons(framework: str, reason: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    off = _json([*OFFLOAD, "--framework", framework], capsys)
    cmp = off["compared_with_plan"]
    assert isinstance(cmp, dict) and cmp["tokens_per_s"] == off["tokens_per_s"]
    batch = int(off["tokens_per_step"]) // 8192  # type: ignore[call-overload]
    plan = _json(["plan", "--model", "llama3.2-1b", "--num-chips", "1", "--seq-len", "8192", "--global-batch",
                  str(batch), "--json"], capsys)
    assert cmp["plan_tokens_per_s"] == pytest.approx(plan["tokens_per_s"], rel=1e-9)  # the same answer as `plan`
    reasons = " ".join(cmp["reasons"])
    assert f"framework '{framework}'" in reasons and "placement: optimizer on the" in reasons and reason in reasons


def test_plan_memory_is_a_breakdown_search_memory_is_a_total(capsys: pytest.CaptureFixture[str]) -> None:
    plan = _json(["plan", "--model", "llama3.2-1b", "--num-chips", "8", "--json"], capsys)
    assert isinstance(plan["memory_bytes_per_device"], dict) and "total" in plan["memory_bytes_per_device"]
    search = _json(["search", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len",
                    "2048", "--tokens", "1e9", "--max-micro-batch", "2", "--top", "2", "--json"], capsys)
    row = search["ranked"][0]  # type: ignore[index]
    assert isinstance(row["total_memory_bytes_per_device"], float) and "memory_bytes_per_device" not in row


def test_track_says_na_without_tokens() -> None:
    import dataclasses

    from greentrain.measure.outputs import summary_rows
    from greentrain.measure.summary import summarize

    m = summarize([{"type": "start", "t0_unix": 0.0}, {"type": "step", "t_s": 0.1, "step": 0, "step_time_s": 0.1},
                   {"type": "step", "t_s": 0.2, "step": 1, "step_time_s": 0.1}, {"type": "end", "t_s": 0.2}], None)
    assert m.tokens == 0 and dict(summary_rows(m))["tokens/s"].startswith("n/a")
    with_tokens = dataclasses.replace(m, tokens=64.0, tokens_per_s=320.0)
    assert dict(summary_rows(with_tokens))["tokens/s"] == "320.0"
