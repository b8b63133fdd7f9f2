"""The round as a bounded-buffer pipeline (offload/pipeline.py) on hand-made rounds."""

from __future__ import annotations

import numpy as np

from greentrain.offload.pipeline import RoundLayers, round_times


def _round(ring: int, *, fwd: float = 1.0, load: float = 0.0, out: float = 0.0, streamed: int = 8) -> RoundLayers:
    a = np.array
    return RoundLayers(num_layers=8, streamed=a([float(streamed)]), ring=ring, grad_buffers=2, fwd_s=a([fwd]),
                       bwd_s=a([2 * fwd]), load_fwd_s=a([load]), out_fwd_s=a([out]),
                       load_bwd_s=(a([load + out]), a([out])), grad_s=(a([0.5 * load]), a([0.0])),
                       ends_s=0.5, cpu_s=None)


def test_compute_bound_round_is_its_compute() -> None:
    """Every layer resident: the turnaround waits for the last activations out and back in (0.5 s each) instead
    of the ends' 0.5 s; nothing else is exposed."""
    rt = round_times(_round(2, out=0.5, streamed=0))
    assert rt.period_s[0] == 8 * 3.0 + 1.0
    assert round_times(_round(2, out=0.0, load=0.5, streamed=8)).period_s[0] == 8 * 3.0 + 0.5 + 0.5


def test_a_deeper_ring_lets_the_link_run_ahead() -> None:
    """Resident layers first in backward: a deeper ring prefetches the streamed layers' inputs during their
    compute, so the period drops towards the busiest resource, never below it."""
    periods = [float(round_times(_round(ring, load=4.0, streamed=4)).period_s[0]) for ring in (2, 3, 4, 5)]
    assert periods == [45.5, 43.5, 41.5, 39.0]
    h2d = 4 * 4.0 + 4 * 4.0  # streamed layers' weights in, each pass
    assert periods[-1] >= max(h2d, 8 * 3.0 + 0.5)


def test_candidates_are_independent() -> None:
    """Arrays over candidates give each candidate's own times."""
    one = round_times(_round(3, load=2.5, streamed=4)).period_s[0]
    other = round_times(_round(3, load=0.5, streamed=8)).period_s[0]
    lay = _round(3, load=2.5, streamed=4)
    both = RoundLayers(**{**{f: getattr(lay, f) for f in lay.__slots__}, "streamed": np.array([4.0, 8.0]),
                          "load_fwd_s": np.array([2.5, 0.5]), "load_bwd_s": (np.array([2.5, 0.5]), np.array([0.0])),
                          "grad_s": (np.array([1.25, 0.25]), np.array([0.0]))})
    assert list(round_times(both).period_s) == [one, other]
