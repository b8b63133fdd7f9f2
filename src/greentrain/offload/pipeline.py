"""A round as a bounded-buffer pipeline, over numpy arrays of candidate plans (issue 14 goal P7).

The event cross-check (offload/simulate.py) runs a round on three FIFO resources, a compute stream and one link
each way, with the buffers a plan pays for as dependencies. Each task starts when its resource is free and the
tasks it depends on have ended (max-plus algebra; Baccelli, Cohen, Olsder and Quadrat, "Synchronization and
Linearity", 1992, ch. 2; the blocking tandem line of Dallery and Gershwin 1992):
    load_i    = max(h2d free, compute_{i-R})          + in_i    (a ring of R = prefetch depth + 1 buffers)
    compute_i = max(compute_{i-1}, load_i, out_{i-2}) + c_i     (forward activations double-buffered)
    out_i     = max(d2h free, compute_i)              + out_i
and in backward order the same with the gradients' ``grad_buffers`` buffers (compute_q waits for grad_{q-2}),
the backward inputs behind the forward's activation of the same layer. A link may so run up to R layers ahead
of the compute, which ``max(compute, transfers)`` per layer (model.py ``_round_s``) leaves out. The loop runs
over layers with arrays over candidates: O(L) numpy operations per pass, whatever the number of candidates.
Two rounds run back to back; the second gives the steady period (the first starts with idle links).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundLayers:
    """Seconds on each resource of one layer over one round, per candidate; streamed layers come first in
    forward order (the resident ones last, as the executor keeps them)."""

    num_layers: int
    streamed: FloatArray  # streamed layers (L - r)
    ring: int  # weight buffers: prefetch depth + 1
    grad_buffers: int
    fwd_s: FloatArray
    bwd_s: FloatArray  # with recomputation
    load_fwd_s: FloatArray  # a streamed layer's weights in
    out_fwd_s: FloatArray  # its home activations out (every layer)
    load_bwd_s: tuple[FloatArray, FloatArray]  # (streamed, resident): weights, activations, gradients in
    grad_s: tuple[FloatArray, FloatArray]  # (streamed, resident): gradients out
    ends_s: float  # embedding, head and loss between the passes
    cpu_s: tuple[float, float, float] | None  # host AdamW: head, one layer, the table (None: device optimizer)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundTimes:
    """Per candidate: the steady period of a round, the first round (from idle links) and, after the last
    round's last compute, when its last gradient has left and when the host AdamW has updated everything."""

    period_s: FloatArray
    first_s: FloatArray
    drain_s: FloatArray
    cpu_s: FloatArray


@dataclass(slots=True)
class _State:
    compute: FloatArray  # last compute's end
    h2d: FloatArray
    d2h: FloatArray
    cpu: FloatArray


def _forward(lay: RoundLayers, s: _State) -> tuple[FloatArray, FloatArray]:
    """One forward pass from state ``s`` (updated); returns the last two activation transfers' ends. A resident
    layer's load is of 0 s: it moves no link past the ring's free time, which every later task waits for."""
    hist = [s.compute] * lay.ring  # compute ends, R back: the ring buffer a load reuses
    out1 = out2 = np.zeros_like(s.compute)  # out_{i-1}, out_{i-2}
    some_none = not bool(np.all(lay.out_fwd_s > 0))  # no activation to move: nothing to wait for (engine)
    for i in range(lay.num_layers):
        s.h2d = np.maximum(s.h2d, hist[-lay.ring]) + lay.load_fwd_s * (i < lay.streamed)
        c = np.maximum(np.maximum(s.compute, out2), s.h2d) + lay.fwd_s
        s.d2h = np.maximum(s.d2h, c) + lay.out_fwd_s
        s.compute = c
        hist.append(c)
        out1, out2 = (np.where(lay.out_fwd_s > 0, s.d2h, c) if some_none else s.d2h), out1
    return out1, out2


def _backward(lay: RoundLayers, s: _State, outs: tuple[FloatArray, FloatArray]) -> FloatArray:
    """The ends and one backward pass after a forward (``s`` updated); returns the last gradient's end."""
    L, gb = lay.num_layers, lay.grad_buffers
    fwd_end = s.compute
    s.compute = fwd_end + lay.ends_s
    hist = [fwd_end] * lay.ring
    grads = [np.zeros_like(fwd_end)] * gb
    resident = L - lay.streamed
    cpu = lay.cpu_s
    if cpu is not None:
        s.cpu = np.maximum(s.cpu, s.compute) + cpu[0]  # the head's update after the turnaround
    for q in range(L):
        st = q >= resident  # backward order: resident layers first
        ready = np.maximum(hist[-lay.ring], s.h2d)
        if q < 2:  # the forward's last two activations may still be leaving; earlier ones have left
            ready = np.maximum(ready, outs[q])
        # no bytes in (every activation on the device, a resident layer): 0 s, and ``ready`` is past already
        s.h2d = ready + np.where(st, lay.load_bwd_s[0], lay.load_bwd_s[1])
        c = np.maximum(np.maximum(s.compute, s.h2d), grads[-gb]) + lay.bwd_s
        s.d2h = np.maximum(s.d2h, c) + np.where(st, lay.grad_s[0], lay.grad_s[1])
        s.compute = c
        hist.append(c)
        grads.append(s.d2h)
        if cpu is not None:
            s.cpu = np.maximum(s.cpu, s.d2h) + cpu[1]
    if cpu is not None:
        s.cpu = np.maximum(s.cpu, s.compute) + cpu[2]  # the embedding table's gradient comes last
    return s.d2h


def round_times(lay: RoundLayers) -> RoundTimes:
    """Two rounds from idle resources: the first one's length and the steady period between them."""
    zero = np.zeros_like(lay.fwd_s + lay.bwd_s + lay.streamed)
    s = _State(compute=zero, h2d=zero, d2h=zero, cpu=zero)
    _backward(lay, s, _forward(lay, s))
    first = s.compute
    s.cpu = first
    last = _backward(lay, s, _forward(lay, s))
    return RoundTimes(period_s=s.compute - first, first_s=first, drain_s=last - s.compute,
                      cpu_s=s.cpu - s.compute)
