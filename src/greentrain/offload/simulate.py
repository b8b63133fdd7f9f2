"""Event-level cross-check of the offload planner (design/offload.md section 4.5, issue 14 goal P7).

The planner prices a round analytically: each layer costs ``max(compute, transfers each way)``, plus one exposed
weight fill per pass. Here the same plan runs as tasks on greentrain's discrete-event engine (sim/engine.py):
one compute ``Stream``, one host-to-device and one device-to-host ``Link`` at the planner's pinned bandwidth,
with the buffers a plan pays for in device memory as dependencies:
- weights: a ring of ``prefetch_depth + 1`` layer buffers; a streamed layer's load waits for the layer
  ``prefetch_depth + 1`` places earlier in the pass to finish (its buffer is free then). A framework without
  look-ahead (``OffloadFramework.lookahead``: ml_dataflow, whose link-congested July build shows no gain from
  a deeper ring) runs with at most two buffers: its link at most one layer ahead, as its planner prices it;
- forward activations: a layer's home activations leave after its forward; a layer does not start before the
  activations of the layer two places back have left (double buffering);
- backward inputs: weights, home activations (and, layer-major, the accumulated gradients) of a layer come back
  in one transfer through the same ring; the first ones load while the ends (head, loss) run;
- gradients: ``grad_buffers`` (two) layer buffers, a layer's leave while the next layer's backward runs;
- optimizer: host AdamW layer by layer as gradients reach the host (a CPU ``Stream``), then the resident weights
  and the ends go back up; or device AdamW with each streamed layer's states in and out through the ring.
The pytorch framework's planner runs the same dependencies as a recurrence (offload/pipeline.py).
Per-layer bytes and compute are the planner's (``offload/model.py`` ``Setting``): home activation slots spread
evenly over the layers, as the planner assumes; resident layers are the last ones (as the executor keeps them).
Rounds follow each other on the same resources, so one round's last transfers overlap the next one's start.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import Efficiency
from greentrain.offload.config import OffloadFramework, OffloadPolicy
from greentrain.offload.model import Setting
from greentrain.offload.plan import OffloadPlan, make_setting, scenario_hash
from greentrain.scenario import Scenario
from greentrain.sim.engine import Engine, Link, Stream

SIMULATED_ROUNDS = 6  # rounds run on the engine; the rest repeat the period of the last one


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulatedStep:
    """One optimizer step of a plan as the event engine ran it."""

    step_time_s: float
    rounds_s: float  # every round, back to back, until the last gradient is on the host
    optimizer_s: float  # from there to the end of the step
    compute_busy_s: float  # of the rounds simulated (at most SIMULATED_ROUNDS) and the optimizer
    h2d_busy_s: float
    d2h_busy_s: float
    link_bound_layers: int  # layers of a round whose transfers one way outlast their compute in a pass
    num_tasks: int
    num_events: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layer:
    """One layer over one round: seconds of compute and bytes each way, per pass."""

    streamed: bool
    fwd_s: float
    bwd_s: float  # + its recomputation
    fwd_in_bytes: float  # weights
    fwd_out_bytes: float  # home activations
    bwd_in_bytes: float  # weights, home activations, accumulated gradients
    bwd_out_bytes: float  # gradients


class _Dag:
    """Tasks with dependencies on engine resources: a task is submitted to its resource (FIFO) once every task
    it depends on has finished; it records its end time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.resource: list[Stream] = []
        self.amount: list[float] = []  # seconds on a Stream, bytes on a Link
        self.waiting: list[int] = []
        self.children: list[list[int]] = []
        self.end_s: list[float] = []

    def add(self, resource: Stream, amount: float, deps: tuple[int | None, ...] = ()) -> int:
        tid = len(self.amount)
        real = [d for d in deps if d is not None]
        self.resource.append(resource)
        self.amount.append(amount)
        self.waiting.append(len(real))
        self.children.append([])
        self.end_s.append(-1.0)
        for d in real:
            self.children[d].append(tid)
        return tid

    def run(self) -> float:
        for tid, n in enumerate(self.waiting):
            if n == 0:
                self._submit(tid)
        return self.engine.run()

    def _submit(self, tid: int) -> None:
        res = self.resource[tid]
        if self.amount[tid] == 0:  # nothing to move or compute: done at once, without queueing on the resource
            self.engine.after(0.0, self._done, tid)
        elif isinstance(res, Link):
            res.send(self.amount[tid], self._done, tid)
        else:
            res.submit(self.amount[tid], self._done, tid)

    def _done(self, tid: int) -> None:
        self.end_s[tid] = self.engine.now_s
        for c in self.children[tid]:
            self.waiting[c] -= 1
            if self.waiting[c] == 0:
                self._submit(c)


def _layers(st: Setting, plan: OffloadPlan) -> list[_Layer]:
    """The plan's layers in forward order, each carrying its even share of the round's home slots."""
    cc = st.cc
    L, n = cc.num_layers, cc.chunks_per_round
    s, sb, rs = plan.slots(), cc.saved_bytes, cc.recompute_s
    acts = sum(s[x] * sb[x] for x in ("input", "attention", "full")) / L
    rec = sum(s[x] * rs[x] for x in ("input", "attention", "full")) / L
    p, w, g = cc.layer_params, cc.weight_bytes_per_param, cc.grad_bytes_per_param
    wt, gt = (p * w, p * g) if st.layer_major else (n * p * w, n * p * g)
    host_adam = st.optimizer_on == "host" and not st.host_serial  # the executor copies gradients on the host,
    copy = st.grad_copy_s(n * p)  # synchronously, inside the backward
    out = []
    for i in range(L):
        streamed = i < L - plan.resident_layers
        g_in = gt if streamed and st.grads_round_trip else 0.0
        out.append(_Layer(streamed=streamed, fwd_s=n * cc.fwd_s, bwd_s=n * cc.bwd_s + rec + copy,
                          fwd_in_bytes=wt if streamed else 0.0, fwd_out_bytes=acts,
                          bwd_in_bytes=(wt if streamed else 0.0) + acts + g_in,
                          bwd_out_bytes=0.0 if st.host_serial else gt if streamed or host_adam else 0.0))
    return out


def _link_bound(ly: _Layer, beta: float) -> bool:
    return max(ly.fwd_in_bytes, ly.fwd_out_bytes) / beta > ly.fwd_s or \
        max(ly.bwd_in_bytes, ly.bwd_out_bytes) / beta > ly.bwd_s


@dataclass(slots=True)
class _Run:
    """The engine, its four resources and the task graph being built."""

    dag: _Dag
    compute: Stream
    h2d: Link
    d2h: Link
    cpu: Stream
    ring: int  # weight buffers: prefetch depth + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class _RoundTasks:
    turnaround: int  # the ends' compute between the passes
    last: int  # the last compute task
    grads: list[int]  # gradient transfers by layer


def _forward(run: _Run, layers: list[_Layer], after: int | None) -> tuple[list[int], list[int]]:
    """Forward tasks after task ``after``: (compute by layer, activation transfers out by layer)."""
    dag = run.dag
    fwd: list[int] = []
    outs: list[int] = []
    prev = after
    for i, ly in enumerate(layers):
        load = None
        if ly.streamed:  # streamed layers come first: the buffer of the load ``ring`` places back is free
            load = dag.add(run.h2d, ly.fwd_in_bytes, (fwd[i - run.ring] if i >= run.ring else after,))
        staged = outs[i - 2] if i >= 2 else None
        prev = dag.add(run.compute, ly.fwd_s, (prev, load, staged))
        fwd.append(prev)
        outs.append(dag.add(run.d2h, ly.fwd_out_bytes, (prev,)))
    return fwd, outs


def _round(run: _Run, st: Setting, layers: list[_Layer], after: int | None) -> _RoundTasks:
    """Tasks of one round (forward, ends, backward) starting after task ``after``."""
    dag, L = run.dag, len(layers)
    fwd, outs = _forward(run, layers, after)
    ends = dag.add(run.compute, st.cc.chunks_per_round * (st.cc.ends_fwd_s + st.cc.ends_bwd_s)
                   + st.grad_copy_s(st.cc.end_params), (fwd[-1],))
    bwd: dict[int, int] = {}
    grads: dict[int, int] = {}
    prev = ends
    load: int | None = None
    for q in range(L):
        i = L - 1 - q
        ly = layers[i]
        free = bwd[i + run.ring] if q >= run.ring else fwd[-1]  # prefetched during the ends
        # in backward order (an earlier layer's activations leave first, yet load after)
        load = dag.add(run.h2d, ly.bwd_in_bytes, (free, outs[i], load)) if ly.bwd_in_bytes > 0 else load
        drained = grads[i + st.grad_buffers] if q >= st.grad_buffers else None
        prev = dag.add(run.compute, ly.bwd_s, (prev, load, drained))
        bwd[i] = prev
        grads[i] = dag.add(run.d2h, ly.bwd_out_bytes, (prev,))
    return _RoundTasks(turnaround=ends, last=prev, grads=[grads[i] for i in range(L)])


def _optimizer(run: _Run, st: Setting, plan: OffloadPlan, rnd: _RoundTasks) -> None:
    """The optimizer step after the last round (section 4.3 step 5)."""
    dag, cc = run.dag, st.cc
    turn, last, grads = rnd.turnaround, rnd.last, rnd.grads
    p, w, g, o = cc.layer_params, cc.weight_bytes_per_param, cc.grad_bytes_per_param, cc.optimizer_bytes_per_param
    L, r = cc.num_layers, plan.resident_layers
    if st.optimizer_on == "host" and not st.host.overlapped:  # the executor: clip and AdamW after the backward
        cpu = dag.add(run.cpu, (L * p + cc.end_params) * st.host.optimizer_s_per_param, (last,))
        dag.add(run.h2d, (r * p + cc.end_params) * w, (cpu,))
        return
    if st.optimizer_on == "host":  # CPU AdamW: the head after the turnaround, each layer as its gradients
        rate = st.host.adam_params_per_s  # arrive, the embedding table after the last layer
        done = [dag.add(run.cpu, (cc.end_params - cc.table_params) / rate, (turn,))]
        done += [dag.add(run.cpu, p / rate, (grads[i],)) for i in reversed(range(L))]
        done.append(dag.add(run.cpu, cc.table_params / rate, (last,)))
        dag.add(run.h2d, (r * p + cc.end_params) * w, (*done,))
        return
    adam: dict[int, int] = {}
    prev = last
    for q in range(L):  # device AdamW: streamed layers' weights, gradients and states in, weights and states out
        i = L - 1 - q
        if i >= L - r:
            prev = dag.add(run.compute, p * cc.adam_device_s_per_param, (prev,))
        else:
            free = adam.get(i + run.ring, last)
            load = dag.add(run.h2d, p * (w + g + o), (free, grads[i]))
            prev = dag.add(run.compute, p * cc.adam_device_s_per_param, (prev, load))
            dag.add(run.d2h, p * (w + o), (prev,))
        adam[i] = prev
    dag.add(run.compute, cc.end_params * cc.adam_device_s_per_param, (prev,))


def _run(st: Setting, plan: OffloadPlan, layers: list[_Layer], rounds: int) -> tuple[_Run, Engine, float, float]:
    """``rounds`` rounds and the optimizer on a fresh engine: (resources, engine, step end, rounds end)."""
    eng = Engine()
    beta = st.beta_bytes_per_s
    ring = plan.prefetch_depth + 1 if st.lookahead else min(plan.prefetch_depth + 1, 2)  # no look-ahead: <= 2
    run = _Run(dag=_Dag(eng), compute=Stream(eng, "compute"), h2d=Link(eng, "h2d", beta), d2h=Link(eng, "d2h", beta),
               cpu=Stream(eng, "cpu"), ring=ring)
    rnd = _round(run, st, layers, None)
    for _ in range(rounds - 1):
        rnd = _round(run, st, layers, rnd.last)
    _optimizer(run, st, plan, rnd)
    step = run.dag.run()
    return run, eng, step, max(run.dag.end_s[t] for t in (rnd.last, *rnd.grads))  # the last gradient has left


def simulate_plan(sc: Scenario, plan: OffloadPlan, profile: OffloadFramework, policy: OffloadPolicy | None = None,
                  *, eff: Efficiency | None = None) -> SimulatedStep:
    """Run ``plan`` (made by ``plan_offload(sc, caps, policy, profile, eff=eff)``) on the event engine. Rounds
    are alike: past SIMULATED_ROUNDS, the step is the last simulated one plus the others at the period the
    engine shows between the last two (step(R) - step(R - 1)); busy times are those of the rounds simulated."""
    if plan.scenario_hash != scenario_hash(sc, sc.strategy.micro_batch_size if sc.strategy else 1):
        raise ConfigError("plan", plan.model, f"was made for another model or sequence length (scenario: "
                          f"{sc.model.name}, seq_len {sc.workload.seq_len})")
    if plan.framework != profile.name:
        raise ConfigError("plan.framework", plan.framework, f"must be the framework's ({profile.name})")
    st = make_setting(sc, profile, policy or OffloadPolicy(), eff)
    layers = _layers(st, plan)
    rounds = min(plan.num_rounds, SIMULATED_ROUNDS)
    run, eng, step, rounds_s = _run(st, plan, layers, rounds)
    if plan.num_rounds > rounds:
        period = step - _run(st, plan, layers, rounds - 1)[2]
        step += (plan.num_rounds - rounds) * period
        rounds_s += (plan.num_rounds - rounds) * period
    return SimulatedStep(step_time_s=step, rounds_s=rounds_s, optimizer_s=step - rounds_s,
                         compute_busy_s=run.compute.busy_s, h2d_busy_s=run.h2d.busy_s, d2h_busy_s=run.d2h.busy_s,
                         link_bound_layers=sum(_link_bound(ly, st.beta_bytes_per_s) for ly in layers),
                         num_tasks=len(run.dag.amount), num_events=eng.num_events)
