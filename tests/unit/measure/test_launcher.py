"""measure/launcher.py: local rank, node size and the per-node parent under torchrun, srun, mpirun and Hydra, so
that a node's CPU and RAM are metered once (local rank 0, over the launcher's per-node tree) and each rank's GPU
is its own, not GPU 0 for every rank."""

from __future__ import annotations

import os

import pytest

from greentrain.measure.launcher import local_gpu, node_place, slurm_tasks_on_node
from greentrain.measure.meters import RamEstimateMeter
from greentrain.measure.tracker import Tracker

SRUN = {"SLURM_JOB_ID": "7", "SLURM_LOCALID": "3", "SLURM_PROCID": "11", "SLURM_NTASKS": "16",
        "SLURM_STEP_NUM_TASKS": "16", "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "8(x2)"}


def test_srun_ranks_under_slurmstepd_share_one_node_meter() -> None:
    p = node_place(SRUN, parent_pid=4242, parent_name="slurmstepd")
    assert (p.launcher, p.rank, p.world_size, p.local_rank, p.local_world_size) == ("slurm", 11, 16, 3, 8)
    assert p.node_root_pid == 4242 and not p.meters_own_host


def test_a_rank_under_an_unknown_parent_meters_itself() -> None:
    """srun bash -c 'python train.py': the parent holds this rank alone, so each rank meters its own tree."""
    p = node_place(SRUN, parent_pid=4242, parent_name="bash")
    assert p.node_root_pid == 0 and p.meters_own_host


@pytest.mark.parametrize(("env", "parent", "launcher"), [
    ({"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_RANK": "5",
      "OMPI_COMM_WORLD_SIZE": "8", **SRUN}, "prted", "openmpi"),  # mpirun inside an sbatch allocation
    ({"MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4", "PMI_RANK": "5", "PMI_SIZE": "8"}, "hydra_pmi_proxy", "mpich"),
    ({"TORCHELASTIC_RUN_ID": "j", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "RANK": "5", "WORLD_SIZE": "8",
      **SRUN}, "python3", "torchrun"),  # torchrun started by srun, one task per node
])
def test_each_launcher_is_read_first_where_it_nests(env: dict[str, str], parent: str, launcher: str) -> None:
    p = node_place(env, parent_pid=99, parent_name=parent)
    assert (p.launcher, p.rank, p.world_size, p.local_rank, p.local_world_size, p.node_root_pid) == (
        launcher, 5, 8, 1, 4, 99)


def test_a_batch_script_process_is_one_process_not_rank_0_of_the_allocation() -> None:
    """sbatch --ntasks=8 running python directly: the allocation's SLURM_NTASKS, no srun step."""
    batch = {"SLURM_JOB_ID": "7", "SLURM_LOCALID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "8",
             "SLURM_NTASKS_PER_NODE": "8", "SLURM_TASKS_PER_NODE": "8", "SLURM_NODEID": "0"}
    p = node_place(batch, parent_pid=1, parent_name="slurm_script")
    assert (p.launcher, p.world_size, p.local_world_size) == ("", 1, 1) and p.meters_own_host


def test_no_launcher_is_one_process() -> None:
    p = node_place({}, parent_pid=1, parent_name="bash")
    assert (p.launcher, p.rank, p.world_size, p.local_world_size) == ("", 0, 1, 1) and p.meters_own_host


@pytest.mark.parametrize(("spec", "node", "tasks"), [("8(x2)", "1", 8), ("2(x3),1", "3", 1), ("4,3", "1", 3),
                                                     ("garbage", "0", 1), ("", "0", 1)])
def test_slurm_compressed_task_counts(spec: str, node: str, tasks: int) -> None:
    assert slurm_tasks_on_node({"SLURM_STEP_TASKS_PER_NODE": spec, "SLURM_NODEID": node}) == tasks
    assert slurm_tasks_on_node({"SLURM_NTASKS_PER_NODE": "6", "SLURM_TASKS_PER_NODE": "6"}) == 1  # the job's


def test_each_rank_meters_its_own_gpu() -> None:
    assert [local_gpu([0, 1, 2, 3], r) for r in range(4)] == [0, 1, 2, 3]
    assert local_gpu([5], 3) == 5  # one GPU bound per rank (srun --gpus-per-task, CUDA_VISIBLE_DEVICES)
    assert local_gpu([], 2) == 2  # every GPU visible: the local rank's


def test_tracker_under_srun_meters_the_node_host_once(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("TORCHELASTIC_RUN_ID", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"):
        monkeypatch.delenv(k, raising=False)
    for k, v in SRUN.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr("greentrain.measure.launcher._process_name", lambda pid: "slurmstepd")
    t = Tracker(None, print_summary=False, cpu_tdp_w=100.0)
    t.world_size = 16
    leader = [m for m in t._make_meters(0) if m.name != "gpu"]
    assert {m._root for m in leader if isinstance(m, RamEstimateMeter)} == {os.getppid()}
    assert [m.name for m in t._make_meters(3) if m.name != "gpu"] == []
