"""Pipeline schedules as data: for each device, the ordered list of its (pass, micro-batch, chunk) ops.

A model of ``pp * vpp`` virtual stages; virtual stage ``v = chunk * pp + device`` (Megatron-LM's interleaved
assignment: device d holds chunks d, d + pp, d + 2 pp, ...). An op is ``(is_backward, micro_batch, chunk)``.

- GPipe (Huang et al. 2019): every forward, then every backward (last micro-batch first).
- 1F1B (PipeDream-Flush; Narayanan et al. 2021 §2.2, Fig. 4 top): device d runs min(pp - d - 1, m) warm-up
  forwards, then alternates one forward and one backward, then drains the remaining backwards.
- Interleaved 1F1B (Narayanan et al. 2021 §2.2, Fig. 4 bottom; Megatron-LM
  ``forward_backward_pipelining_with_interleaving``): micro-batches go through the chunks in groups of pp;
  warm-up (pp - d - 1) * 2 + (vpp - 1) * pp forwards, then 1F1B; backward chunks run in reverse order.
"""

from __future__ import annotations

from greentrain.config import require

Op = tuple[bool, int, int]  # (is_backward, micro_batch, chunk)


def gpipe(pp: int, m: int) -> list[list[Op]]:
    return [[(False, i, 0) for i in range(m)] + [(True, i, 0) for i in reversed(range(m))] for _ in range(pp)]


def one_f_one_b(pp: int, m: int) -> list[list[Op]]:
    out = []
    for d in range(pp):
        warm = min(pp - d - 1, m)
        ops: list[Op] = [(False, i, 0) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            ops += [(False, f, 0), (True, b, 0)]
            f, b = f + 1, b + 1
        ops += [(True, i, 0) for i in range(b, m)]
        out.append(ops)
    return out


def _interleaved_op(k: int, pp: int, vpp: int, backward: bool) -> Op:
    """The k-th forward (or backward) op of a device (Megatron-LM's get_model_chunk_id)."""
    group = k // (pp * vpp)
    chunk = (k // pp) % vpp
    if backward:
        chunk = vpp - 1 - chunk
    return (backward, group * pp + k % pp, chunk)


def interleaved(pp: int, vpp: int, m: int) -> list[list[Op]]:
    require(m % pp == 0, "num_micro_batches", m, f"the interleaved schedule needs a multiple of pp={pp}")
    total = m * vpp
    out = []
    for d in range(pp):
        warm = min((pp - d - 1) * 2 + (vpp - 1) * pp, total)
        ops = [_interleaved_op(k, pp, vpp, False) for k in range(warm)]
        f, b = warm, 0
        while f < total:
            ops += [_interleaved_op(f, pp, vpp, False), _interleaved_op(b, pp, vpp, True)]
            f, b = f + 1, b + 1
        ops += [_interleaved_op(k, pp, vpp, True) for k in range(b, total)]
        out.append(ops)
    return out


def build_schedule(name: str, pp: int, vpp: int, m: int) -> list[list[Op]]:
    """Ops per device for ``name`` in gpipe, 1f1b, interleaved."""
    require(pp >= 1 and vpp >= 1 and m >= 1, "schedule", (pp, vpp, m), "pp, vpp and micro-batches must be >= 1")
    if vpp > 1 or name == "interleaved":
        return interleaved(pp, vpp, m)
    if name == "gpipe":
        return gpipe(pp, m)
    return one_f_one_b(pp, m)
