"""The offload time and memory model, over numpy arrays of candidate plans (design/offload.md section 4.3).

A candidate is a few counts: resident layers r, prefetch depth k, and how the L x n (layer, chunk) activation
slots of a round split between the device and the host levels (input, attention, full). Home slots are spread
evenly over the layers, so each layer of a round costs (section 4.3 step 4, beta per direction):
    forward  = max(n f,          weights_in / beta,                  acts_out / beta)
    backward = max(n b + recompute, (weights_in + acts_in + grads_in) / beta, grads_out / beta)
with weights moving only for the L - r streamed layers, plus one weight fill W / beta per pass that nothing
hides, plus the ends (embedding, head, loss). The optimizer step comes once per step (rounds of it).
A framework with ``lookahead`` (pytorch) times the round as a bounded-buffer pipeline instead (offload/pipeline.py:
the ring and the double buffers let a link run ahead of the compute), and the host AdamW from the gradients'
arrival times; memory, busy times and the bound stay as above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from greentrain.offload.costs import ChunkCosts
from greentrain.offload.host import HostCosts
from greentrain.offload.pipeline import RoundLayers, round_times

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """What does not vary between candidates: the chunk costs, the link, the optimizer place and the caps."""

    cc: ChunkCosts
    beta_bytes_per_s: float  # pinned host link per direction, this chip's share
    optimizer_on: str
    host: HostCosts  # the host side of a host optimizer (offload/host.py)
    reserved_bytes: float
    loss_chunk_tokens: int
    ends_host_copy: bool
    grads_round_trip: bool
    grad_buffers: int
    layer_major: bool  # every chunk of a round runs a layer before the next: its weights move once per round
    min_device_slots: int = 0  # ml_dataflow keeps at least two activation slots on the device (dataflow.py)
    lookahead: bool = False  # rounds as a bounded-buffer pipeline (offload/pipeline.py), not layer by layer
    rounds_per_step: int = 0  # fixed micro-batches per optimizer step; 0: the batch rule (rounds_for)
    grads_stay_on_device: bool = False  # a host optimizer whose gradients stay on the device (torchao accumulating)

    @property
    def host_serial(self) -> bool:
        """Gradients copied synchronously on the host in the backward (the executor's host side)."""
        return self.optimizer_on == "host" and not self.host.grads_on_link

    def grad_copy_s(self, params: float) -> float:
        """Seconds the compute stream waits for the host copies of ``params`` gradients in one round."""
        return params * self.host.grad_copy_s_per_param if self.host_serial else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluated:
    """Arrays over candidates: host memory (the tie-break) and the step."""

    host_bytes: FloatArray
    round_s: FloatArray
    optimizer_s: FloatArray
    compute_s: FloatArray  # per round: forward + backward + recompute + ends
    h2d_s: FloatArray  # per round, link busy time host -> device
    d2h_s: FloatArray
    exposed_s: FloatArray  # per round, time the compute waits on the link (fills included)
    host_s: FloatArray  # per round, time the compute waits for synchronous host gradient copies (in exposed_s)
    recompute_s: FloatArray
    recompute_flop: FloatArray


def device_parts(st: Setting, r: FloatArray, k: FloatArray, dev_slots: FloatArray,
                 levels: tuple[FloatArray, FloatArray, FloatArray] | None = None) -> dict[str, FloatArray]:
    """Device bytes by category (section 4.3 step 1). ``levels``: the home slots (input, attention, full) of a
    chosen plan, whose backward working set is the largest of its levels'; None: a whole recomputed layer, the
    largest (the search's bound, so a plan fits its cap whatever levels it takes)."""
    cc = st.cc
    p, w, g, o = cc.layer_params, cc.weight_bytes_per_param, cc.grad_bytes_per_param, cc.optimizer_bytes_per_param
    on_device_opt = st.optimizer_on == "device-streamed"
    streamed = r < cc.num_layers
    loaded = np.minimum(k + 1, cc.num_layers - r) * p * w  # the ring: never more buffers than streamed layers
    if on_device_opt:  # gradients accumulate on the device; the optimizer states of what stays there too
        ends_state = cc.end_params * (w + g + o)
        resident = r * p * (w + g + o)
        ring = np.where(streamed, loaded + np.minimum(st.grad_buffers, k + 1) * p * g, 0.0)
    else:  # each gradient leaves in its post-accumulate hook: one table's and grad_buffers layers' at a time;
        # the first backward layer's gradients fill while the device activations are all live, the next ones
        # only once that layer's have been freed (the accounted executor: tests/unit/offload)
        ends_state = cc.end_params * w + cc.table_params * g
        resident = r * p * w
        more = (st.grad_buffers - 1) * p * g
        ring = loaded + p * g + np.where(dev_slots >= 1, np.maximum(0.0, more - cc.saved_bytes["device"]), more)
        if st.host_serial:  # the executor's hook copies each gradient at once and drops it: one tensor's at a time
            ring = loaded + cc.largest_tensor_params * g
        # every activation on the device: the executor peaks at the start of the backward (the head's backward,
        # every slot live), when the ring holds only the streamed layers it prefetches ahead of the resident
        # ones (k - r of them) and one gradient buffer (tests/unit/offload/test_offload_budget.py,
        # benchmarks/bench_offload.py peaks)
        every = dev_slots >= cc.num_layers * cc.chunks_per_round
        ahead = np.clip(k - r, 0, cc.num_layers - r) * p * w
        ring = np.where(every & streamed, ahead + p * g, ring)
        if st.grads_stay_on_device:  # torchao accumulating: every gradient stays until the step, none streams
            resident = resident + (cc.num_layers * p + cc.end_params - cc.table_params) * g
            ring = loaded + 0.0 * ring
    activations = np.maximum(dev_slots, st.min_device_slots) * cc.saved_bytes["device"]
    if cc.sticky:  # ml_dataflow: its program's own fixed buffers replace reserve, ends and workspace
        zeros = np.zeros_like(r, dtype=np.float64)
        sticky = {name: zeros + b for name, b in cc.sticky}
        return {"reserved": sticky["reserved"], "ends": sticky["ends"], "resident_layers": resident,
                "prefetch_ring": ring, "workspace": sticky["workspace"], "activations": activations}
    head = st.loss_chunk_tokens * cc.head_logit_bytes_per_token
    # a layer recomputed in backward rebuilds its activations: one device slot of working set, unless device
    # slots exist: they belong to the last layers, whose backward runs first and frees them before any recompute
    sb = cc.saved_bytes
    grads = sb.get("activation_grads", 0.0)  # the layer in backward's activation gradients (executor frameworks)
    need = sb["device"] + grads + 0.0 * r
    if levels is not None and "working_full" in sb:
        n_in, n_att, n_full = levels
        need = np.where(n_in > 0, need, np.where(n_att > 0, sb["working_attention"],
                                                 np.where(n_full > 0, sb["working_full"], need)))
    working = np.where(dev_slots == 0, need, grads)
    zeros = np.zeros_like(r, dtype=np.float64)
    return {
        "reserved": zeros + st.reserved_bytes,
        "ends": zeros + ends_state,
        "resident_layers": resident,
        "prefetch_ring": ring,
        "workspace": np.maximum(head, working) + cc.context_bytes,
        "activations": activations,
    }


def host_parts(st: Setting, r: FloatArray, n_in: FloatArray, n_att: FloatArray,
               n_full: FloatArray) -> dict[str, FloatArray]:
    """Host bytes by category (section 4.3 step 2)."""
    cc = st.cc
    per_layer = cc.layer_state_bytes
    # the host is every layer's home: it keeps the whole state, resident layers included (design 4.3 step 2)
    state = cc.num_layers * per_layer + 0.0 * r
    if st.optimizer_on == "device-streamed":
        ends = cc.end_params * cc.weight_bytes_per_param if st.ends_host_copy else 0.0
    else:  # the host AdamW also owns the ends' master copy, gradient and states
        ends = cc.end_params * (cc.weight_bytes_per_param + cc.grad_bytes_per_param + cc.optimizer_bytes_per_param)
    sb = cc.saved_bytes
    if cc.host_sticky:  # ml_dataflow: its program's own host buffers (offload/dataflow.py)
        sticky = dict(cc.host_sticky)
        return {"layer_state": state, "ends": np.zeros_like(state) + sticky["ends"],
                "transitions": np.zeros_like(state) + sticky["transitions"],
                "activations": n_in * sb["input"] + n_att * sb["attention"] + n_full * sb["full"]}
    return {"layer_state": state, "ends": np.zeros_like(state) + ends,
            "activations": n_in * sb["input"] + n_att * sb["attention"] + n_full * sb["full"]}


def offloaded_optimizer_s(st: Setting, r: FloatArray, backward_s: FloatArray, first_layer_s: FloatArray) -> FloatArray:
    """The optimizer phase of an offloaded step (not the estimator's step_terms.optimizer_s: a device-resident
    step). Section 4.3 step 5. Device-streamed: every streamed layer max(Adam, states in, states out), resident
    layers and the ends Adam only. Host: the CPU AdamW updates each layer as its gradients reach the host, from
    the end of the first layer's backward on (the head's from the turnaround); what is left when the backward
    ends is exposed, and never less than the last layer's and the embedding's updates, whose gradients come
    last (offload/simulate.py runs this schedule); then the resident weights and the ends go back up."""
    cc, beta = st.cc, st.beta_bytes_per_s
    p, w, g, o = cc.layer_params, cc.weight_bytes_per_param, cc.grad_bytes_per_param, cc.optimizer_bytes_per_param
    adam = p * cc.adam_device_s_per_param
    if st.optimizer_on == "device-streamed":
        streamed = np.maximum(adam, np.maximum(p * (w + g + o) / beta, p * (w + o) / beta))
        return (cc.num_layers - r) * streamed + r * adam + cc.end_params * cc.adam_device_s_per_param
    params = cc.num_layers * p + cc.end_params
    upload = (r * p + cc.end_params) * w / beta
    if not st.host.overlapped:  # the executor: clipping and AdamW after the last backward, then the upload
        return params * st.host.optimizer_s_per_param + upload
    cpu = params / st.host.adam_params_per_s
    tail = (p + cc.table_params) / st.host.adam_params_per_s  # layer 0 and the embedding table, the last gradients
    return np.maximum(cpu - (backward_s - first_layer_s), tail) + upload


def _round_s(*, fill_s: FloatArray, fwd_s: FloatArray, acts_s: FloatArray, cf: float, cb: FloatArray,
             ends_s: float, first_in_s: FloatArray, first_bwd_s: FloatArray, rest_bwd_s: FloatArray,
             drain_s: FloatArray, fwd_d2h_s: FloatArray) -> FloatArray:
    """One round, every layer at max(compute, transfers each way), with what the buffers overlap at the pass
    boundaries (offload/simulate.py runs the same schedule on the event engine):
    - the forward's first layer waits for its weights (``fill_s``); a link-bound forward ends with its link
      (the engine's double-buffered activations let its compute end two layers' excess earlier; ml_dataflow's
      link-congested July build, 33,748 tokens/s, shows no such gain, so the planner leaves it out);
    - at the turnaround the ends run while the link finishes the forward's activations (``tail``) and brings
      the backward's first layer in: the backward starts after the longer of the two;
    - gradients are double-buffered too: a link-bound backward's last ``drain_s`` leaves during the next
      round's forward, as far as that forward leaves its device-to-host link idle (a FIFO copy engine)."""
    tail = acts_s + np.maximum(0.0, acts_s - cf)
    wait = np.maximum(ends_s, tail + first_in_s)
    # the next round's device-to-host link is free until its first gradients, but for its activations, which
    # queue behind the drain: then its third layer waits for the first one's (double buffering)
    idle = np.where(acts_s > 0, fill_s + 2.0 * cf, fill_s + fwd_s + wait + cb - fwd_d2h_s)
    return fill_s + fwd_s + wait + first_bwd_s + rest_bwd_s - np.minimum(drain_s, idle)


def _pipelined(st: Setting, r: FloatArray, k: FloatArray, t: dict[str, FloatArray]) -> tuple[FloatArray, FloatArray]:
    """(round, optimizer) seconds of the bounded-buffer pipeline (offload/pipeline.py): every round at the steady
    period (the first, from idle links, is shorter by at most a gradient drain: within 0.1 % on the cross-check),
    then the host AdamW from the last compute on, as the gradients arrive, and the upload (as
    ``offloaded_optimizer_s``)."""
    cc, beta = st.cc, st.beta_bytes_per_s
    host = st.optimizer_on == "host"
    rate = st.host.adam_params_per_s
    cpu = ((cc.end_params - cc.table_params) / rate, cc.layer_params / rate, cc.table_params / rate)
    lay = RoundLayers(num_layers=cc.num_layers, streamed=cc.num_layers - r, ring=int(np.max(k)) + 1,
                      grad_buffers=st.grad_buffers, fwd_s=t["cf"], bwd_s=t["cb"], load_fwd_s=t["h2d_f"],
                      out_fwd_s=t["acts"], load_bwd_s=(t["h2d_b"], t["acts"]), grad_s=(t["d2h_b"], t["g_res"]),
                      ends_s=cc.chunks_per_round * (cc.ends_fwd_s + cc.ends_bwd_s) + st.grad_copy_s(cc.end_params),
                      cpu_s=cpu if host and st.host.overlapped else None)
    rt = round_times(lay)
    if not host:
        return rt.period_s, 0.0 * rt.period_s
    if not st.host.overlapped:
        return rt.period_s, offloaded_optimizer_s(st, r, 0.0 * r, 0.0 * r)
    upload = (r * cc.layer_params + cc.end_params) * cc.weight_bytes_per_param / beta
    return rt.period_s, rt.cpu_s + upload


def evaluate(st: Setting, r: FloatArray, n_in: FloatArray, n_att: FloatArray, n_full: FloatArray, *,
             single: FloatArray | bool = False, k: FloatArray | float = 1.0) -> Evaluated:
    """Host memory and time of every candidate (arrays broadcast together); device memory: device_parts.
    ``single``: one weight and one gradient block (ml_dataflow when no more fit): a layer's weights load only
    once the previous layer has run, and its gradients leave while the next layer's weights come in."""
    cc, beta = st.cc, st.beta_bytes_per_s
    L, n = cc.num_layers, cc.chunks_per_round
    p, w, g = cc.layer_params, cc.weight_bytes_per_param, cc.grad_bytes_per_param
    sb, rs, rf = cc.saved_bytes, cc.recompute_s, cc.recompute_flop
    acts = (n_in * sb["input"] + n_att * sb["attention"] + n_full * sb["full"]) / L  # per layer, each way
    rec = n_in * rs["input"] + n_att * rs["attention"] + n_full * rs["full"]
    rec_flop = n_in * rf["input"] + n_att * rf["attention"] + n_full * rf["full"]
    host_copy = st.grad_copy_s(n * p)  # a layer's synchronous host gradient copies block its backward
    cf, cb = n * cc.fwd_s, n * cc.bwd_s + rec / L + host_copy
    wt, gt = (p * w, p * g) if st.layer_major else (n * p * w, n * p * g)  # per round
    g_out = 0.0 if st.host_serial else gt  # gradients over the link
    g_in = gt if st.grads_round_trip else 0.0
    streamed = L - r
    # streamed layers
    h2d_f, d2h_f = wt / beta, acts / beta
    h2d_b, d2h_b = (wt + acts + g_in) / beta, g_out / beta
    fwd_st = np.where(single, np.maximum(cf + h2d_f, d2h_f), np.maximum(cf, np.maximum(h2d_f, d2h_f)))
    bwd_st = np.where(single, np.maximum(cb + np.maximum((wt + g_in) / beta, d2h_b), h2d_b),
                      np.maximum(cb, np.maximum(h2d_b, d2h_b)))
    # resident layers: only activations move, and under a host optimizer their gradients leave too (each in its
    # post-accumulate hook: the device keeps no gradient of a resident layer, device_parts)
    g_res = g_out if st.optimizer_on == "host" else 0.0
    fwd_res = np.maximum(cf, acts / beta)
    bwd_res = np.maximum(cb, np.maximum(acts / beta, g_res / beta))
    ends = n * (cc.ends_fwd_s + cc.ends_bwd_s) + st.grad_copy_s(cc.end_params)
    g_last = np.where(streamed > 0, d2h_b, g_res / beta)  # the backward's last layer (layer 0)
    round_s = _round_s(fill_s=np.where(streamed > 0, wt / beta, 0.0), fwd_s=streamed * fwd_st + r * fwd_res,
                       acts_s=acts / beta, cf=cf, cb=cb, ends_s=ends,
                       first_in_s=np.where(r > 0, acts, wt + acts + g_in) / beta,
                       first_bwd_s=np.where(r > 0, bwd_res, np.maximum(cb, d2h_b)),
                       rest_bwd_s=(streamed - (r == 0)) * bwd_st + (r - (r > 0)) * bwd_res,
                       drain_s=st.grad_buffers * np.maximum(0.0, g_last - cb), fwd_d2h_s=L * acts / beta)
    host_s = L * host_copy + st.grad_copy_s(cc.end_params)
    compute = L * (cf + cb) + ends - host_s
    h2d = streamed * (h2d_f + h2d_b) + r * acts / beta
    d2h = streamed * (d2h_f + d2h_b) + r * (acts + g_res) / beta
    round_s = np.maximum(round_s, np.maximum(h2d, d2h))  # a round never beats its busiest link
    first = np.where(r > 0, bwd_res, bwd_st)  # the backward starts with the last layers, resident ones first
    opt = offloaded_optimizer_s(st, r, streamed * bwd_st + r * bwd_res, first)
    if st.lookahead:
        times = {"cf": cf + 0.0 * r, "cb": cb + 0.0 * r, "h2d_f": h2d_f + 0.0 * r, "acts": acts / beta + 0.0 * r,
                 "h2d_b": h2d_b + 0.0 * r, "d2h_b": d2h_b + 0.0 * r, "g_res": g_res / beta + 0.0 * r}
        piped, piped_opt = _pipelined(st, r, np.asarray(k, dtype=np.float64), times)
        round_s = np.maximum(piped, np.maximum(h2d, d2h))
        opt = piped_opt if st.optimizer_on == "host" else opt
    host = sum(host_parts(st, r, n_in, n_att, n_full).values())
    zero = 0.0 * round_s
    return Evaluated(host_bytes=np.asarray(host, dtype=np.float64),
                     round_s=round_s, optimizer_s=opt, compute_s=compute + zero, h2d_s=h2d, d2h_s=d2h,
                     exposed_s=round_s - compute, host_s=host_s + zero, recompute_s=rec + zero,
                     recompute_flop=rec_flop + zero)


def rounds_for(round_s: FloatArray, opt_s: FloatArray, share: float, fixed: int = 0) -> FloatArray:
    """Rounds per step so the optimizer is at most ``share`` of the step (ml_dataflow's batch rule), or the
    ``fixed`` micro-batches per step a run takes."""
    if fixed:
        return np.full_like(np.asarray(round_s, dtype=np.float64), float(fixed))
    return np.maximum(1.0, np.ceil(opt_s / (share * round_s) - 1e-9))


def steady_tokens_per_s(st: Setting, ev: Evaluated, share: float) -> FloatArray:
    """Tokens/s with the optimizer amortised over the rounds of the batch rule taken as a real number: the
    optimizer adds min(its time, share x round) per round. A whole number of rounds gives within share/rounds
    of this; taking it continuous keeps the prediction monotonic in memory and bandwidth (a faster link can
    otherwise lower the rounds and so the amortisation). With ``rounds_per_step`` fixed, the step's own tokens/s:
    R rounds and one optimizer step."""
    if st.rounds_per_step:
        return st.cc.tokens_per_round / (ev.round_s + ev.optimizer_s / st.rounds_per_step)
    return st.cc.tokens_per_round / (ev.round_s + np.minimum(ev.optimizer_s, share * ev.round_s))
