"""Multi-node variants (``runtime.nodes: N`` x ``runtime.devices: D``): one torchrun agent per node, met at a c10d
rendezvous on node 0.

The scheduler (``--executor ray``: a STRICT_SPREAD placement group, one bundle per node; ``--executor slurm``: a job
of N nodes, one task per node) starts one task per node and gives each a ``Rendezvous``: the number of nodes, its
node rank, node 0's ``host:port`` and a run id shared by the nodes of this launch. Node 0's task runs the variant as
a local run does (claim, earlier attempts moved aside, ``variant.json`` written, then the worker) with the
rendezvous in its environment, so the worker becomes ``torchrun --nnodes N --rdzv-backend c10d --rdzv-endpoint
HOST:PORT --rdzv-id RUN --rdzv-conf is_host=false``. Node 0's task itself hosts the c10d store (``hosted_store``)
from its start until every other node's agent has exited, not node 0's agent: every node's agent connects at once,
however long node 0 takes to claim the variant, and no agent loses the store in torchrun's exit barrier when node
0's agent exits first. Every other node's task starts the same torchrun at once (``run_agent``), over the same
``variant.json`` (the output folder is on a file system every node sees); its agent waits at the rendezvous until
node 0's joins, and node 0 writes ``variant.json`` before its agent starts, so no rank reads an old one. No
``--node-rank``: under c10d the rendezvous numbers the nodes (torchrun ignores the option with a warning), so global
rank 0 may sit on any node. The ranks train data parallel as on one node (gloo or NCCL); rank 0 gathers every rank's
records and writes ``result.json``; each node's local rank 0 meters its node's CPU and RAM (measure/launcher.py:
under its node's torchrun agent).

Node 0's task writes ``DIR/nodes/<run>.done`` when it returns, saying whether it launched torchrun: if not (the
variant was already done, or the budget spent) the other nodes' agents, still waiting at the rendezvous, are
stopped at once; if it did, any agent still running ``NODE_GRACE_S`` later is. No node waits out the rendezvous
timeout.

torchrun's options: https://pytorch.org/docs/stable/elastic/run.html (c10d backend, ``--rdzv-conf is_host``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain.experiment.spec import safe_name

PARENT_ENV = "GREENTRAIN_EXPERIMENT_RUNNER_PID"  # the parent a worker dies with: the runner, or torchrun's agent
NNODES_ENV = "GREENTRAIN_NNODES"
NODE_RANK_ENV = "GREENTRAIN_NODE_RANK"
ENDPOINT_ENV = "GREENTRAIN_RDZV_ENDPOINT"
RUN_ID_ENV = "GREENTRAIN_RDZV_ID"
NODES_DIR = "nodes"
NODE_GRACE_S = 120.0  # a node's agent may outlive node 0's task this long (its last rank's records, the barrier)
NODE_POLL_S = 1.0  # how often a node's agent looks for node 0's done file
# Slurm: the rendezvous port from the job id, below Linux's ephemeral range (32768-60999) so no client socket of
# the node holds it; two jobs on the same first node share a port only when their ids differ by a multiple of
# 10,000 (the second then fails to host the store and is resubmitted, --max-retries).
SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 10000


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendezvous:
    """Where the torchrun agents of one launch of a multi-node variant meet."""

    nnodes: int
    node_rank: int
    endpoint: str  # node 0's host:port (node 0's task hosts the c10d store there)
    run_id: str  # the same on every node of this launch, another for the next launch

    def env(self) -> tuple[tuple[str, str], ...]:
        """The environment that tells a worker (ranks.launch) it is one node of this launch."""
        return ((NNODES_ENV, str(self.nnodes)), (NODE_RANK_ENV, str(self.node_rank)),
                (ENDPOINT_ENV, self.endpoint), (RUN_ID_ENV, self.run_id))

    def torchrun_args(self) -> list[str]:
        """torchrun's multi-node options for this node (the module's text: no ``--node-rank`` under c10d; the
        store hosted by node 0's task, so no agent hosts it)."""
        return ["--nnodes", str(self.nnodes), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", self.endpoint, "--rdzv-id", self.run_id,
                "--rdzv-conf", "is_host=false"]


def rendezvous_from_env(environ: Mapping[str, str] | None = None) -> Rendezvous | None:
    """The launch this process's node belongs to (``Rendezvous.env``), or None outside a multi-node launch."""
    env = os.environ if environ is None else environ
    if not env.get(NNODES_ENV):
        return None
    return Rendezvous(nnodes=int(env[NNODES_ENV]), node_rank=int(env.get(NODE_RANK_ENV, "0")),
                      endpoint=env.get(ENDPOINT_ENV, ""), run_id=env.get(RUN_ID_ENV, ""))


def slurm_rendezvous(environ: Mapping[str, str], hostnames: Sequence[str]) -> Rendezvous:
    """The rendezvous of a Slurm task of a multi-node job (one task per node): ``SLURM_JOB_NUM_NODES`` nodes,
    this one ``SLURM_NODEID``, node 0 the first host of ``SLURM_JOB_NODELIST`` (``hostnames``, expanded as
    ``scontrol show hostnames`` does), the port and run id from the job id (``SLURM_JOB_ID``: every task of the
    job, another for a resubmitted job)."""
    job_id = environ.get("SLURM_JOB_ID", "")
    if not job_id.isdigit() or not hostnames:
        raise RuntimeError(f"not a Slurm job task (SLURM_JOB_ID={job_id!r}, {len(hostnames)} host(s))")
    port = SLURM_PORT_BASE + int(job_id) % SLURM_PORT_SPAN
    nodes = int(environ.get("SLURM_JOB_NUM_NODES", "") or len(hostnames))
    return Rendezvous(nnodes=nodes, node_rank=int(environ.get("SLURM_NODEID", "0")),
                      endpoint=f"{hostnames[0]}:{port}", run_id=f"slurm-{job_id}")


def torchrun_command(spec_path: Path, devices: int, rendezvous: Rendezvous | None = None,
                     python: str | None = None) -> list[str]:
    """torchrun over the worker module for one variant: ``devices`` processes on this node, alone
    (``--standalone``: a rendezvous on a free local port) or as one node of ``rendezvous``."""
    where = ["--standalone"] if rendezvous is None else rendezvous.torchrun_args()
    return [python or sys.executable, "-m", "torch.distributed.run", *where, "--nproc-per-node", str(devices),
            "-m", "greentrain.experiment.worker", str(spec_path)]


def _store(rendezvous: Rendezvous, host: bool, timeout_s: float) -> Any:
    """The c10d store of the launch, as its server (node 0's task) or a client; torch's own c10d backend creates it
    the same way (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py, ``_create_tcp_store``@v2.13.0)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    name, port = rendezvous.endpoint.rsplit(":", 1)
    return TCPStore(name, int(port), is_master=host, multi_tenant=True, wait_for_workers=False,
                    timeout=timedelta(seconds=timeout_s))


def _exited_key(run_id: str, node_rank: int) -> str:
    return f"greentrain/{run_id}/exited/{node_rank}"


@contextlib.contextmanager
def hosted_store(rendezvous: Rendezvous, grace_s: float | None = None) -> Iterator[None]:
    """Node 0's task: the rendezvous store (a TCPStore server on the endpoint's port) while the variant runs, and
    after it until every other node's agent has exited (each says so in the store; at most the grace and a
    minute): an agent in torchrun's exit barrier never loses its store."""
    store = _store(rendezvous, True, 600.0)
    try:
        yield
    finally:
        from datetime import timedelta

        keys = [_exited_key(rendezvous.run_id, k) for k in range(1, rendezvous.nnodes)]
        wait_s = (NODE_GRACE_S if grace_s is None else grace_s) + 60.0
        with contextlib.suppress(Exception):  # an agent lost with its node: its key never comes
            store.wait(keys, timedelta(seconds=wait_s))
        del store


def done_path(out: Path, run_id: str) -> Path:
    """The file node 0's task writes when it returns (the module's text)."""
    return out / NODES_DIR / f"{safe_name(run_id)}.done"


def mark_done(out: Path, run_id: str, launched: bool) -> None:
    """Node 0's task returned; ``launched``: its torchrun ran (the other agents get their grace), else it never
    started one (the variant was done, or its budget spent): the other agents wait for nothing."""
    path = done_path(out, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("launched\n" if launched else "not launched\n", encoding="utf-8")


def _grace_s(done: Path, grace_s: float) -> float | None:
    """How long an agent may still run once node 0's task is done; None while it is not."""
    try:
        text = done.read_text(encoding="utf-8")
    except OSError:
        return None
    return grace_s if text.startswith("launched") else 0.0


def _die_with_task() -> None:
    """In the agent's child before exec: SIGKILL when the task that started it dies (Linux PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


def run_agent(out: Path, spec_path: Path, devices: int, threads: int, rendezvous: Rendezvous,
              env_extra: Sequence[tuple[str, str]] = (), grace_s: float = NODE_GRACE_S,
              poll_s: float = NODE_POLL_S) -> int:
    """Node ``rendezvous.node_rank`` (> 0) of a launch: torchrun's agent over ``spec_path`` (``devices`` ranks of
    ``threads`` torch threads each) until it exits, or is stopped ``grace_s`` after node 0's task returned
    (module's text); torchrun's exit status, negative when stopped."""
    env = {**os.environ, **dict(env_extra), **dict(rendezvous.env()), "OMP_NUM_THREADS": str(threads)}
    env.pop(PARENT_ENV, None)  # each rank dies with its parent: torchrun's agent
    done = done_path(out, rendezvous.run_id)
    proc = subprocess.Popen(torchrun_command(spec_path, devices, rendezvous), env=env,
                            stdout=subprocess.DEVNULL, preexec_fn=_die_with_task)
    deadline: float | None = None
    try:
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return proc.wait(timeout=poll_s)
            left = _grace_s(done, grace_s) if deadline is None else None
            if left == 0.0:  # node 0 never launched: this agent started no rank, nothing to close
                return -1  # killed below
            if left is not None:
                deadline = time.monotonic() + left
            if deadline is not None and time.monotonic() >= deadline:
                proc.terminate()  # its ranks get torchrun's SIGTERM (their records flushed)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                return -1
    finally:
        if proc.poll() is None:  # the task is being stopped (Ray cancel, Slurm's SIGTERM)
            proc.kill()
            proc.wait()
        with contextlib.suppress(Exception):  # node 0's store may be gone (its task stopped)
            _store(rendezvous, False, 30.0).set(_exited_key(rendezvous.run_id, rendezvous.node_rank), "1")
