"""Scheduler identity in every run record: Slurm (job, array task, step, node list), Kubernetes (pod,
namespace, node) and torchrun (run id, ranks, restarts) read from the environment each sets, and written into
the start record of `greentrain track` (and so of every experiment variant's phases)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.measure.records import hardware_info, last_run, read_jsonl, scheduler_identity

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_JOB_NODELIST": "gpu[001-004]",
         "SLURM_ARRAY_JOB_ID": "4240", "SLURM_ARRAY_TASK_ID": "2", "SLURM_PROCID": "3", "SLURM_NTASKS": "32",
         "SLURM_JOB_PARTITION": "h100", "SLURM_JOB_NAME": "sweep"}
TORCHRUN = {"TORCHELASTIC_RUN_ID": "42", "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "GROUP_RANK": "1",
            "TORCHELASTIC_RESTART_COUNT": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def test_slurm_and_torchrun(tmp_path: Path) -> None:
    ids = scheduler_identity({**SLURM, **TORCHRUN, "HOSTNAME": "gpu001"}, tmp_path / "none")
    assert ids["slurm"] == {"job_id": "4242", "step_id": 0, "node_list": "gpu[001-004]", "array_job_id": "4240",
                            "array_task_id": 2, "proc_id": 3, "num_tasks": 32, "partition": "h100",
                            "job_name": "sweep"}
    assert ids["torchrun"] == {"run_id": "42", "rank": 5, "local_rank": 1, "world_size": 8, "group_rank": 1,
                               "restart_count": 0, "master_addr": "10.0.0.1", "master_port": 29500}
    assert "kubernetes" not in ids  # HOSTNAME alone is no pod
    assert scheduler_identity({"SLURM_JOB_ID": "7", "SLURM_NODELIST": "n1"}, tmp_path)["slurm"] == \
        {"job_id": "7", "node_list": "n1"}  # the older variable


def test_kubernetes_pod(tmp_path: Path) -> None:
    ns = tmp_path / "namespace"
    ns.write_text("training\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "HOSTNAME": "trainer-0"}
    assert scheduler_identity(env, ns) == {"kubernetes": {"pod": "trainer-0", "namespace": "training"}}
    downward = {**env, "POD_NAME": "job-abc", "POD_NAMESPACE": "ml", "NODE_NAME": "node-7"}
    assert scheduler_identity(downward, ns) == {"kubernetes": {"pod": "job-abc", "namespace": "ml", "node": "node-7"}}
    assert scheduler_identity(env, tmp_path / "absent") == {"kubernetes": {"pod": "trainer-0"}}


def test_nothing_outside_a_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SLURM_JOB_ID", "KUBERNETES_SERVICE_HOST", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    assert scheduler_identity() == {}
    assert "scheduler" not in hardware_info([])


def test_track_records_the_slurm_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    for k, v in SLURM.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "o"
    assert main(["track", "--no-hooks", "--out", str(out), "--", sys.executable, "-c", "pass"]) == 0
    capsys.readouterr()
    records = [r for p in sorted(out.glob("*.jsonl")) for r in last_run(read_jsonl(p))]
    starts = [r for r in records if r.get("type") == "start"]
    assert starts and all(r["scheduler"]["slurm"]["job_id"] == "4242" for r in starts)
    assert starts[0]["scheduler"]["slurm"]["node_list"] == "gpu[001-004]"
