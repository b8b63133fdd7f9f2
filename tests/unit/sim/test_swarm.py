"""Seed 000's swarm: hand-computed round times, conservation, determinism, dropouts and backup tasks."""

from __future__ import annotations

import numpy as np
import pytest

from greentrain.errors import ConfigError, InfeasibleError
from greentrain.model.ops import model_ops
from greentrain.model.spec import TransformerSpec
from greentrain.sim.devices import Device
from greentrain.sim.run_swarm import SwarmWorkload, run_swarm, swarm_tasks
from greentrain.sim.swarm import SwarmOptions, simulate_swarm
from greentrain.sim.tasks import TaskSet, build_tasks, tile_matmul

TINY = TransformerSpec(name="tiny", num_layers=2, hidden_size=256, num_heads=4, ffn_hidden_size=1024,
                       vocab_size=1000)


def tasks(rows: list[tuple[float, float, float]]) -> TaskSet:
    a = np.asarray(rows, dtype=float)
    n = len(rows)
    return TaskSet(flop=a[:, 0], in_bytes=a[:, 1], out_bytes=a[:, 2], op_id=np.zeros(n, dtype=np.int32),
                   layer=np.zeros(n, dtype=np.int32), backward=np.zeros(n, dtype=bool), op_names=("op",),
                   model_flop=float(a[:, 0].sum()))


def dev(name: str, flop: float, ingress: float, egress: float, **kw: float) -> Device:
    return Device(name=name, flop_per_s=flop, ingress_bytes_per_s=ingress, egress_bytes_per_s=egress, **kw)


def test_one_device_round_time_is_the_sum_of_its_three_states() -> None:
    d = dev("a", 1e12, 1e9, 0.5e9, latency_s=0.01)
    ts = tasks([(2e12, 1e9, 1e9), (1e12, 2e9, 0.0)])
    (r,), _, _ = simulate_swarm([d], ts)
    # task 0: 1 s in + 0.01 + 2 s compute + 2 s out + 0.01 = 5.02; task 1: 2 + 0.01 + 1 + 0 + 0.01 = 3.02
    assert r.time_s == pytest.approx(8.04, rel=1e-12)
    (dr,) = r.devices
    assert (dr.ingress_s, dr.compute_s, dr.egress_s, dr.idle_s) == pytest.approx((3.02, 3.0, 2.02, 0.0))
    assert r.bytes_moved == 4e9 and r.flop == 3e12


def test_two_devices_greedy_by_hand() -> None:
    fast = dev("fast", 2.0, 1.0, 1.0)  # one task (2 FLOP, 1 B in, 1 B out): 1 + 1 + 1 = 3 s
    slow = dev("slow", 1.0, 1.0, 1.0)  # 1 + 2 + 1 = 4 s
    ts = tasks([(2.0, 1.0, 1.0)] * 3)
    (r,), _, _ = simulate_swarm([fast, slow], ts)
    # t=0: fast takes 0, slow takes 1; t=3 fast takes 2 -> ends 6; slow ends at 4.
    assert r.time_s == pytest.approx(6.0)
    assert [d.tasks_done for d in r.devices] == [2, 1]
    assert r.devices[1].idle_s == pytest.approx(2.0)
    assert r.utilization == pytest.approx(6.0 / 6.0 / 3.0)  # 6 FLOP in 6 s over a 3 FLOP/s swarm


def test_rounds_run_back_to_back() -> None:
    (r0, r1), _, _ = simulate_swarm([dev("a", 1.0, 1.0, 1.0)], tasks([(1.0, 1.0, 1.0)]), rounds=2)
    assert (r0.time_s, r1.start_s, r1.finish_s) == pytest.approx((3.0, 3.0, 6.0))


def test_fastest_scheduler_is_lpt() -> None:
    a, b = dev("a", 1.0, 1e30, 1e30), dev("b", 1.0, 1e30, 1e30)
    ts = tasks([(1.0, 0, 0), (1.0, 0, 0), (2.0, 0, 0)])
    (greedy,), _, _ = simulate_swarm([a, b], ts)
    (lpt,), _, _ = simulate_swarm([a, b], ts, options=SwarmOptions(scheduler="fastest"))
    assert greedy.time_s == pytest.approx(3.0) and lpt.time_s == pytest.approx(2.0)


def test_bandwidth_scheduler_keeps_work_off_a_slow_link() -> None:
    good = dev("good", 1.0, 1.0, 1.0)  # a task (1 FLOP, 1 B, 0 B): 2 s
    thin = dev("thin", 1.0, 0.01, 1.0)  # 100 s of ingress for the same task
    ts = tasks([(1.0, 1.0, 0.0)] * 2)
    (greedy,), _, _ = simulate_swarm([good, thin], ts)
    (bw,), _, _ = simulate_swarm([good, thin], ts, options=SwarmOptions(scheduler="bandwidth"))
    assert greedy.time_s == pytest.approx(101.0) and bw.time_s == pytest.approx(4.0)
    assert [d.tasks_done for d in bw.devices] == [2, 0]


def test_backup_tasks_beat_a_straggler() -> None:
    fast = dev("fast", 1.0, 1e30, 1e30)
    straggler = dev("straggler", 1.0, 1e30, 1e30, slowdown=100.0)
    ts = tasks([(1.0, 0, 0)] * 2)
    (plain,), _, _ = simulate_swarm([fast, straggler], ts)
    (backed,), _, _ = simulate_swarm([fast, straggler], ts, options=SwarmOptions(backup_tasks=True))
    assert plain.time_s == pytest.approx(100.0)
    assert backed.time_s == pytest.approx(2.0) and backed.backups == 1
    assert backed.devices[1].cancelled == 1 and backed.flop == 2.0


def test_tiles_halve_the_larger_dimension_down_to_min_tp_size() -> None:
    tiles = tile_matmul(m=8, k=512, n=2048, count=1, tp_depth=3, min_tp_size=256)
    assert sorted({(k, n) for _, _, k, n in tiles}) == [(512, 256)]  # n: 2048 -> 1024 -> 512 -> 256
    tiles = tile_matmul(m=8, k=512, n=512, count=1, tp_depth=5, min_tp_size=256)
    assert sorted((k, n) for _, _, k, n in tiles) == [(256, 256)] * 4  # stops at min_tp_size
    assert len(tile_matmul(m=1, k=100, n=100, count=1, tp_depth=4, min_tp_size=64)) == 1  # too small


def test_every_flop_of_the_model_is_computed_once_per_round() -> None:
    wl = SwarmWorkload(batch_tokens=512, seq_len=256, tp_depth=3, min_tp_size=64)
    ts = swarm_tasks(TINY, wl)
    fwd = model_ops(TINY, 2, 256, 2.0).forward_flop()
    assert ts.flop.sum() == pytest.approx(3 * fwd, rel=1e-12)
    devs = [dev(f"d{i}", 1e9 * (i + 1), 1e8, 1e8, failure_probability=0.05, rejoin_s=0.1) for i in range(5)]
    for sch in ("greedy", "fastest", "bandwidth"):
        res = run_swarm(devs, TINY, rounds=2, workload=wl, options=SwarmOptions(scheduler=sch, backup_tasks=True))
        for r in res.rounds:
            assert r.flop == pytest.approx(3 * fwd, rel=1e-12)
            assert sum(d.tasks_done for d in r.devices) == ts.num_tasks
        assert sum(r.requeued for r in res.rounds) > 0


def test_forward_and_backward_tile_bytes() -> None:
    ops = model_ops(TINY, 1, 8, 2.0)
    ts = build_tasks(ops, tp_depth=0, min_tp_size=1, bytes_per_elt=2.0)
    first = TINY.hidden_size * 3  # qkv: (8 x 256) @ (256 x 768)
    assert ts.op_names[0].endswith("attn.qkv") and not ts.backward[0]
    assert ts.flop[0] == 2 * 8 * 256 * first
    assert ts.in_bytes[0] == 2 * (8 * 256 + 256 * first) and ts.out_bytes[0] == 2 * 8 * first
    last = ts.num_tasks - 1  # the backward of layer 0's qkv closes the round
    assert ts.backward[last] and ts.op_id[last] == ts.op_id[0] and ts.layer[last] == 0
    assert ts.flop[last] == 2 * ts.flop[0]
    assert ts.in_bytes[last] == 2 * (8 * first + 256 * first + 8 * 256)


def test_a_seed_gives_the_same_run() -> None:
    devs = [dev(f"d{i}", 1e9, 1e8, 1e8, failure_probability=0.1, rejoin_s=0.5) for i in range(3)]
    wl = SwarmWorkload(batch_tokens=256, tp_depth=2, min_tp_size=64)
    a = run_swarm(devs, TINY, rounds=3, workload=wl, options=SwarmOptions(seed=7))
    b = run_swarm(devs, TINY, rounds=3, workload=wl, options=SwarmOptions(seed=7))
    c = run_swarm(devs, TINY, rounds=3, workload=wl, options=SwarmOptions(seed=8))
    assert a.round_times_s == b.round_times_s
    assert [r.requeued for r in a.rounds] == [r.requeued for r in b.rounds]
    assert a.round_times_s != c.round_times_s


def test_a_swarm_that_all_drops_out_is_infeasible() -> None:
    ts = tasks([(1.0, 0, 0)] * 200)
    with pytest.raises(InfeasibleError, match="every device dropped out"):
        simulate_swarm([dev("a", 1.0, 1.0, 1.0, failure_probability=0.5)], ts)


def test_a_model_that_cannot_be_tiled_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"min_tp_size=4096.*cannot be tiled"):
        swarm_tasks(TINY, SwarmWorkload(batch_tokens=64, tp_depth=2, min_tp_size=4096))


def test_unknown_scheduler_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="did you mean bandwidth"):
        SwarmOptions(scheduler="bandwith")


def test_bandwidth_scheduler_steals_back_work_after_a_dropout() -> None:
    # a drops out now and then; its queue is re-planned onto b, and when a rejoins it steals from b's queue
    a = dev("a", 1.0, 1e30, 1e30, failure_probability=0.3, rejoin_s=0.0)
    b = dev("b", 1.0, 1e30, 1e30)
    (r,), _, _ = simulate_swarm([a, b], tasks([(1.0, 0, 0)] * 40), options=SwarmOptions(scheduler="bandwidth"))
    assert r.requeued > 0 and r.flop == 40.0
    assert r.devices[0].tasks_done > 10 and r.time_s < 30.0  # b alone would need 40 s
