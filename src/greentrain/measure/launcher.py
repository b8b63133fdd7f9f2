"""Where this process sits on its node, by the launcher that started it: torchrun, Open MPI's mpirun, MPICH or
Intel MPI's Hydra, or Slurm's srun. The Tracker meters one GPU per local rank, and the node's CPU and RAM
once, from local rank 0, over the process tree of the per-node parent every local rank hangs under (torchrun's
elastic agent, Slurm's slurmstepd, Open MPI's orted/prted, Hydra's hydra_pmi_proxy); without one it knows,
every rank meters its own process tree, as a single process does.

Launcher variables (each launcher's documentation): torchrun LOCAL_RANK, LOCAL_WORLD_SIZE, RANK, WORLD_SIZE
(torch.distributed.elastic); Open MPI OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE, _RANK, _SIZE (mpirun(1));
MPICH/Intel MPI MPI_LOCALRANKID, MPI_LOCALNRANKS, PMI_RANK, PMI_SIZE (Hydra); Slurm SLURM_LOCALID,
SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_NODEID and SLURM_STEP_TASKS_PER_NODE such as "4(x2),3": the step's, set
by srun(1) for its tasks. A batch script's own process (sbatch --ntasks=8 python train.py) has SLURM_PROCID 0 and
SLURM_NTASKS 8 but no step variables: it is one process, not rank 0 of 8.
torchrun is looked at first (it is often started by srun: one task per node), then the MPI launchers (an
mpirun inside an sbatch allocation inherits the batch step's Slurm variables), then Slurm.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# per launcher: (variable that says it started us, local rank, local size, global rank, world size, the process
# names of its per-node parent; () accepts any parent: torchrun's agent is a python process)
_LAUNCHERS: tuple[tuple[str, str, str, str, str, str, tuple[str, ...]], ...] = (
    ("torchrun", "TORCHELASTIC_RUN_ID", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", ()),
    ("openmpi", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ("orted", "prted", "prterun", "mpirun", "mpiexec")),
    ("mpich", "MPI_LOCALRANKID", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_RANK", "PMI_SIZE",
     ("hydra_pmi_proxy", "mpiexec.hydra", "mpiexec", "mpirun")),
    ("slurm", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", ("slurmstepd",)),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePlace:
    launcher: str  # torchrun, openmpi, mpich, slurm; "" when none started this process
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_root_pid: int  # the per-node parent of every local rank; 0: none known (each rank meters itself)

    @property
    def meters_own_host(self) -> bool:
        """This rank meters its own process tree's CPU and RAM: no per-node parent to meter them once over (else
        local rank 0 meters the node's over node_root_pid's tree and the other local ranks none)."""
        return self.local_world_size <= 1 or self.node_root_pid <= 0


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(env.get(name, "") or default)
    except ValueError:
        return default


def slurm_tasks_on_node(env: Mapping[str, str]) -> int:
    """Tasks of this srun step on this node: this node's entry of the compressed SLURM_STEP_TASKS_PER_NODE list
    ("2(x3),1": 2, 2, 2, 1) at SLURM_NODEID; 1 when unknown. (The allocation's SLURM_NTASKS_PER_NODE and
    SLURM_TASKS_PER_NODE describe the job, not the step.)"""
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or ""
    counts: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            return 1
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    node = _int(env, "SLURM_NODEID", 0)
    return counts[node] if 0 <= node < len(counts) else 1


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text("utf-8").strip()
    except OSError:
        return ""


def node_place(env: Mapping[str, str] | None = None, parent_pid: int | None = None,
               parent_name: str | None = None) -> NodePlace:
    """This process's place on its node, from the first launcher whose variable is set (module docstring)."""
    env = os.environ if env is None else env
    ppid = os.getppid() if parent_pid is None else parent_pid
    for name, marker, local, local_size, rank, size, parents in _LAUNCHERS:
        if not env.get(marker):
            continue
        n_local = slurm_tasks_on_node(env) if name == "slurm" else _int(env, local_size, 1)
        parent = _process_name(ppid) if parent_name is None else parent_name
        known = not parents or parent in parents
        return NodePlace(launcher=name, rank=_int(env, rank, 0), world_size=max(1, _int(env, size, 1)),
                         local_rank=_int(env, local, 0), local_world_size=max(1, n_local),
                         node_root_pid=ppid if known else 0)
    return NodePlace(launcher="", rank=_int(env, "RANK", 0), world_size=max(1, _int(env, "WORLD_SIZE", 1)),
                     local_rank=_int(env, "LOCAL_RANK", 0), local_world_size=1, node_root_pid=0)


def local_gpu(visible: list[int], local_rank: int) -> int:
    """The NVML index of this rank's GPU: the local rank's visible device when it sees several, its only one
    when the launcher bound one GPU per rank (CUDA_VISIBLE_DEVICES, srun --gpus-per-task), else the local rank."""
    if len(visible) == 1:
        return visible[0]
    return visible[local_rank] if local_rank < len(visible) else local_rank
