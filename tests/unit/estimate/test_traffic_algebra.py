"""Hand-derived cases for each primitive rule of the layout algebra (seed-systems.md §1.4).

Every expected number is worked out in the comment beside it from the rule, not from the code.
"""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.traffic.algebra import DataDim, LayoutError, Mesh, ParallelAxis


def counts(mesh: Mesh) -> dict[str, float]:
    m = mesh.meter
    return {f"{metric}_{d}": m.get(metric, d) for metric in ("FLOP", "Tx", "Rx") for d in ("fwd", "bwd")}


@pytest.fixture
def ab() -> tuple[Mesh, ParallelAxis, ParallelAxis]:
    a, b = ParallelAxis("A", 2), ParallelAxis("B", 3)
    return Mesh([a, b]), a, b


def test_mul_counts_result_size_times_unused_degrees(ab):
    mesh, a, _ = ab
    x = DataDim("X", 4, a)
    y = DataDim("Y", 5)
    (mesh.data(x, y) * mesh.data(y))
    # dims X, Y (4*5); axis B (deg 3) is used by no dim: S = 4*5*3 = 60 FLOP fwd, 4S = 240 bwd, no traffic.
    assert counts(mesh) == {
        "FLOP_fwd": 60,
        "FLOP_bwd": 240,
        "Tx_fwd": 0,
        "Tx_bwd": 0,
        "Rx_fwd": 0,
        "Rx_bwd": 0,
    }


def test_reduce_local_dim_is_additions_only(ab):
    mesh, a, _ = ab
    x, y = DataDim("X", 4, a), DataDim("Y", 5)
    out = mesh.data(x, y).reduce(y)
    # I = |X| * deg(B, broadcast) = 4*3 = 12, J = 5, K = 1: FLOP 12*4 = 48, nothing sent.
    c = counts(mesh)
    assert (c["FLOP_fwd"], c["Tx_fwd"], c["Rx_fwd"], c["Tx_bwd"], c["Rx_bwd"]) == (48, 0, 0, 0, 0)
    assert out.dims == {x} and out.scatter_axes == frozenset()


def test_reduce_sharded_dim_sends_and_scatters(ab):
    mesh, a, b = ab
    x, z = DataDim("X", 6, a), DataDim("Z", 6, b)
    out = mesh.data(x, z).reduce(z)
    # I = 6 (no broadcast axes), J = 6, K = 3: FLOP 6*5 = 30; Tx = Rx = 6*2 = 12 fwd;
    # bwd Tx 6*[3>1] = 6, Rx 12.
    assert counts(mesh) == {
        "FLOP_fwd": 30,
        "FLOP_bwd": 0,
        "Tx_fwd": 12,
        "Tx_bwd": 6,
        "Rx_fwd": 12,
        "Rx_bwd": 12,
    }
    assert out.scatter_axes == {b}  # B is freed by the reduce: the sum is left reduce-scattered over it


def test_bcast_gathers_scattered_axes(ab):
    mesh, a, b = ab
    x = DataDim("X", 6, a)
    mesh.data(x, scatter=[b]).bcast()
    # I = 6, J = 1 (no broadcast axis), K = 3, β = 0: Tx 6*max(1, 0) = 6, Rx 6*1*(3-1) = 12; bwd 12 each.
    assert counts(mesh) == {
        "FLOP_fwd": 0,
        "FLOP_bwd": 12,
        "Tx_fwd": 6,
        "Tx_bwd": 12,
        "Rx_fwd": 12,
        "Rx_bwd": 12,
    }


def test_scatter_must_divide_the_local_size(ab):
    mesh, a, b = ab
    with pytest.raises(ConfigError, match="scatter degree 3"):
        mesh.data(DataDim("X", 4, a), scatter=[b])  # 2 local elements over 3 ranks


def test_bcast_with_broadcast_axis_multiplies_receives(ab):
    mesh, a, b = ab
    w = DataDim("W", 6)
    out = mesh.data(w, scatter=[b]).bcast()
    # I = 6, J = deg(A) = 2, K = 3: Tx 6, Rx 6*2*2 = 24; bwd FLOP = Tx = Rx = 24.
    assert counts(mesh) == {
        "FLOP_fwd": 0,
        "FLOP_bwd": 24,
        "Tx_fwd": 6,
        "Tx_bwd": 24,
        "Rx_fwd": 24,
        "Rx_bwd": 24,
    }
    assert out.bcast_axes == {a, b}


def test_bcast_rotation_boundary_frequency():
    pipe, exp = ParallelAxis("P", 4, rotational=True), ParallelAxis("E", 2)
    mesh = Mesh([pipe, exp])
    layer = DataDim("LAYER", 4, pipe, virtual_size=16)
    expert = DataDim("EXPERT", 2, exp)
    mesh.data(layer, expert).bcast(rotate=[layer, expert])
    # stay = (1 - 3/16) * (1/2) = 13/32, β = 19/32. I = 8, J = 1, K = 1:
    # Tx = 8*max(0, 19/32) = 4.75, Rx = 8*(1 + 19/32 - 1) = 4.75; bwd 4.75 each.
    assert counts(mesh) == pytest.approx(
        {"FLOP_fwd": 0, "FLOP_bwd": 4.75, "Tx_fwd": 4.75, "Tx_bwd": 4.75, "Rx_fwd": 4.75, "Rx_bwd": 4.75},
        rel=1e-15,
    )


def test_bcast_rotation_over_pipeline_only():
    pipe, exp = ParallelAxis("P", 4, rotational=True), ParallelAxis("E", 2)
    mesh = Mesh([pipe, exp])
    layer = DataDim("LAYER", 4, pipe, virtual_size=16)
    mesh.data(layer, DataDim("EXPERT", 2, exp)).bcast(rotate=[layer])
    # β = 3/16 (3 stage crossings over 16 layers): Tx = Rx = 8*3/16 = 1.5.
    assert counts(mesh)["Tx_fwd"] == pytest.approx(1.5) and counts(mesh)["Rx_fwd"] == pytest.approx(1.5)


def test_dot_autoreduces_local_then_sharded(ab):
    mesh, a, b = ab
    x, y, z = DataDim("X", 6, a), DataDim("Y", 5, autoreduce=True), DataDim("Z", 6, b, autoreduce=True)
    out = mesh.data(x, y, z) @ mesh.data(y, z)
    # mul: S = 6*5*6 = 180 -> FLOP 180 fwd, 720 bwd.
    # allreduce(Y) first (local): reduce I = 6*6 = 36, J = 5 -> 144 FLOP; bcast with K = 1 moves nothing.
    # allreduce(Z): reduce I = 6, J = 6, K = 3 -> 30 FLOP, Tx = Rx = 12 fwd, bwd Tx 6, Rx 12;
    #               bcast I = 6, J = 1, K = 3 -> Tx 6, Rx 12 fwd; bwd 12 FLOP, 12 Tx, 12 Rx.
    assert counts(mesh) == {
        "FLOP_fwd": 180 + 144 + 30,
        "FLOP_bwd": 720 + 12,
        "Tx_fwd": 12 + 6,
        "Tx_bwd": 6 + 12,
        "Rx_fwd": 12 + 12,
        "Rx_bwd": 12 + 12,
    }
    assert out.dims == {x} and not out.scatter_axes


def test_reduce_transpose_moves_a_dim_onto_the_freed_axis():
    t, s = ParallelAxis("T", 2), ParallelAxis("S", 2)
    mesh = Mesh([t, s])
    token, d = DataDim("TOKEN", 4, s), DataDim("D", 6, t, autoreduce=True)
    write_token = DataDim("WRITE_TOKEN", 4, t)
    out = mesh.data(token, d).reduce(d, transpose=(token, write_token))
    # I = 4, J = 6, K = 2: FLOP 20, Tx = Rx = 4 fwd, 4 bwd. TOKEN now lies on T; S is left scattered.
    assert counts(mesh) == {"FLOP_fwd": 20, "FLOP_bwd": 0, "Tx_fwd": 4, "Tx_bwd": 4, "Rx_fwd": 4, "Rx_bwd": 4}
    assert out.dims == {write_token} and out.scatter_axes == {s}


def test_scatter_transpose_is_free():
    e = ParallelAxis("E", 2)
    mesh = Mesh([e])
    expert, write_expert, w = DataDim("EXPERT", 2, e), DataDim("WRITE_EXPERT", 2), DataDim("W", 6)
    out = mesh.data(expert, w).scatter_transpose(expert, write_expert)
    assert out.dims == {write_expert, w} and out.scatter_axes == {e}
    assert all(v == 0 for v in counts(mesh).values())


def test_reduce_with_concatenates_then_reduces():
    ti = ParallelAxis("TI", 2)
    mesh = Mesh([ti])
    head, ffn, r = DataDim("H", 4, ti), DataDim("F", 6, ti), DataDim("R", 4)
    out = mesh.data(r, head).reduce_with(mesh.data(r, ffn), (head, ffn))
    # One reduce over H+F (10 units on TI): I = 4, J = 10, K = 2 -> FLOP 36, Tx = Rx = 4, bwd Tx 4, Rx 4.
    assert counts(mesh) == {"FLOP_fwd": 36, "FLOP_bwd": 0, "Tx_fwd": 4, "Tx_bwd": 4, "Rx_fwd": 4, "Rx_bwd": 4}
    assert out.scatter_axes == {ti}


def test_meter_scopes_multiply(ab):
    mesh, a, _ = ab
    x = DataDim("X", 4, a)
    with mesh.meter.scope(2), mesh.meter.scope(3):
        mesh.data(x) * mesh.data(x)  # S = 4*3 = 12, six times
    assert mesh.meter.get("FLOP", "fwd") == 72


def test_two_meshes_are_independent():
    a1, a2 = ParallelAxis("A", 2), ParallelAxis("A", 4)
    m1, m2 = Mesh([a1]), Mesh([a2])
    x1 = DataDim("X", 8, a1)
    m1.data(x1) * m1.data(x1)
    assert m1.meter.get("FLOP", "fwd") == 8 and m2.meter.get("FLOP", "fwd") == 0
    with pytest.raises(LayoutError):
        m2.data(x1)  # an axis of another mesh


def test_bad_layouts():
    a = ParallelAxis("A", 3)
    mesh = Mesh([a])
    with pytest.raises(ConfigError, match="divisible by the A degree 3"):
        DataDim("X", 4, a)
    with pytest.raises(ConfigError, match="scatter degree 3"):
        mesh.data(DataDim("Y", 4), scatter=[a])
    with pytest.raises(LayoutError):
        DataDim("L", 2, ParallelAxis("P", 3, rotational=True), virtual_size=6)
    with pytest.raises(ConfigError):
        DataDim("L", 3, ParallelAxis("P", 3, rotational=True), virtual_size=7)
    scattered = mesh.data(DataDim("Z", 6), scatter=[a])
    with pytest.raises(LayoutError, match="bcast it first"):
        scattered * scattered
    with pytest.raises(ConfigError):
        ParallelAxis("B", 0)
