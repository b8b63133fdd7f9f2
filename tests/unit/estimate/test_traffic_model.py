"""The seed-001 transformer on the layout algebra against its closed form, and properties of its counts."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.traffic import (
    TrafficConfig,
    allowed_microbatch_sizes,
    closed_form_counts,
    count_traffic,
    traffic_report,
)


def _random_config(rng: random.Random) -> TrafficConfig:
    """A small random run over all six degrees and every switch (MQA / MHA / GQA, GLU, consecutive)."""
    dp, pp, sp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3]), rng.choice([1, 2])
    tp_int, tp_ext = rng.choice([1, 2, 4]), rng.choice([1, 2])
    e = rng.choice([1, 2, 4])
    ep = rng.choice([x for x in (1, 2, 4) if e % x == 0])
    heads = tp_int * rng.choice([2, 4])
    kind = rng.choice(["mqa", "mha", "gqa"])
    kv = {"mqa": 1, "mha": heads, "gqa": heads // 2}[kind]
    return TrafficConfig(
        num_layers=pp * rng.randint(1, 4),
        d_model=tp_ext * 8 * rng.randint(1, 4),
        d_ffn=tp_int * 8 * rng.randint(1, 4),
        num_heads=heads,
        d_head=rng.choice([4, 8]),
        num_kv_heads=kv,
        num_experts=e,
        batch_size=dp * rng.randint(1, 4),
        seq_len=e * math.lcm(sp, tp_ext) * rng.randint(1, 3),
        dataset_tokens=float(rng.randint(1, 1000)) * 1e3,
        glu=rng.random() < 0.5,
        consecutive_attn_and_ffn=rng.random() < 0.5,
        dp=dp,
        pp=pp,
        ep=ep,
        sp=sp,
        tp_int=tp_int,
        tp_ext=tp_ext,
        skip_efficiency_check=True,
    )


def test_closed_form_matches_algebra_on_random_configs():
    rng = random.Random(20240214)
    checked = 0
    while checked < 250:
        cfg = _random_config(rng)
        if cfg.num_batches == 0:
            continue
        try:
            algebra = count_traffic(cfg)
        except ConfigError:  # a weight shard that does not divide over DATA x SEQ: the seed asserts too
            continue
        closed = closed_form_counts(cfg)
        assert closed.as_tuple() == pytest.approx(algebra.as_tuple(), rel=1e-9, abs=1e-6), cfg
        checked += 1


def _gpt4_like(**kw: object) -> TrafficConfig:
    base = dict(
        num_experts=8,
        batch_size=8192,
        seq_len=8192,
        dataset_tokens=13e12,
        num_layers=120,
        d_model=15360,
        d_ffn=4 * 15360,
        num_heads=240,
        pp=15,
        dp=16,
        sp=1,
        ep=8,
        tp_int=8,
        tp_ext=1,
    )
    base.update(kw)
    return TrafficConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("kv", [1, 240, 24])
@pytest.mark.parametrize("glu", [False, True])
@pytest.mark.parametrize("consecutive", [False, True])
def test_no_traffic_when_every_degree_is_one(kv, glu, consecutive):
    cfg = _gpt4_like(
        dp=1,
        pp=1,
        ep=1,
        sp=1,
        tp_int=1,
        tp_ext=1,
        num_kv_heads=kv,
        glu=glu,
        consecutive_attn_and_ffn=consecutive,
        skip_efficiency_check=True,
        dataset_tokens=1e9,
    )
    c = count_traffic(cfg)
    assert c.tx_elements_fwd == c.tx_elements_bwd == c.rx_elements_fwd == c.rx_elements_bwd == 0
    assert c.flop_fwd > 0


LAYOUTS = [
    dict(dp=1, pp=1, ep=1, sp=1, tp_int=1, tp_ext=1),
    dict(dp=16, pp=15, ep=8, sp=1, tp_int=8, tp_ext=1),
    dict(dp=4, pp=5, ep=2, sp=2, tp_int=4, tp_ext=2),
    dict(dp=2, pp=3, ep=4, sp=4, tp_int=2, tp_ext=4),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_flop_does_not_depend_on_layout_for_mha(layout):
    """With MHA and no GLU every forward op is computed once: the layout moves data, not work."""
    ref = count_traffic(_gpt4_like(num_kv_heads=240, skip_efficiency_check=True, **LAYOUTS[0]))
    c = count_traffic(_gpt4_like(num_kv_heads=240, skip_efficiency_check=True, **layout))
    assert c.flop_fwd == pytest.approx(ref.flop_fwd, rel=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_mqa_forward_flop_grows_only_by_the_replicated_kv_projections(layout):
    """MQA computes K and V on every TENSOR_INT rank: 2(pti-1)(d*dh*T + dh*T*(d-1)) extra per sequence-layer."""
    ref = _gpt4_like(skip_efficiency_check=True, **LAYOUTS[0])
    cfg = _gpt4_like(skip_efficiency_check=True, **layout)
    d, dh, t = cfg.d_model, cfg.d_head, cfg.seq_len
    extra = 2 * (cfg.tp_int - 1) * (d * dh * t + dh * t * (d - 1)) * cfg.batch_size * cfg.num_layers
    extra *= cfg.num_batches
    assert count_traffic(cfg).flop_fwd == pytest.approx(count_traffic(ref).flop_fwd + extra, rel=1e-12)


def test_gqa_sits_between_mqa_and_mha():
    mqa, gqa, mha = (count_traffic(_gpt4_like(num_kv_heads=kv)) for kv in (1, 24, 240))
    assert mqa.flop_fwd < gqa.flop_fwd < mha.flop_fwd
    assert mqa.rx_elements_fwd < gqa.rx_elements_fwd < mha.rx_elements_fwd


def test_activation_checkpointing_adds_forward_to_backward():
    plain = traffic_report(_gpt4_like())
    ckpt = traffic_report(_gpt4_like(activation_checkpointing=True))
    assert ckpt.flop_bwd == plain.flop_bwd + plain.flop_fwd
    assert ckpt.net_elements_bwd == plain.net_elements_bwd + plain.net_elements_fwd
    assert ckpt.flop_fwd == plain.flop_fwd


def test_fwd_only_totals_are_the_forward_column():
    r = traffic_report(_gpt4_like(fwd_only=True), cluster_flop_per_s=156e12)
    assert r.flop_total == r.flop_fwd and r.runtime_s == pytest.approx(r.flop_fwd / (15360 * 156e12))


def test_allowed_microbatch_sizes_of_the_readme_example():
    # expert_l = 1024, pd = 16 -> 64 tokens per sample -> min 16; max floor(8192/60) = 136.
    assert allowed_microbatch_sizes(_gpt4_like()) == (16, 32, 64, 128)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(num_experts=1, ep=1), "b*expert_l = 8192*8192 = 67108864 > 8388608 = 4096*2048"),
        (dict(batch_size=512), "Pipeline bubble too large: 32 < 60"),
        (dict(sp=16), "Efficient microbatch size impossible: 256 > 136"),  # 1024 tokens / 128 per sample
        (dict(tp_int=16, d_ffn=8192), "Internal tensor parallelism too large: 16 > d_ffn/1024 = 8"),
        (dict(tp_ext=16), "External tensor parallelism too large: 16 > 15"),
    ],
)
def test_efficiency_violations_name_the_true_numbers(kw, message):
    with pytest.raises(InfeasibleError, match=message.replace("*", r"\*")):
        traffic_report(_gpt4_like(**kw))


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(seq_len=8190), "seq_len"),
        (dict(batch_size=8200), "batch_size"),
        (dict(num_layers=121, skip_efficiency_check=True), "num_layers"),
        (dict(ep=3, skip_efficiency_check=True), "num_experts"),
        (dict(d_model=15361, num_heads=240, tp_ext=2, skip_efficiency_check=True), "d_model"),
        (dict(tp_int=7, skip_efficiency_check=True), "d_ffn"),
        (dict(num_kv_heads=4, skip_efficiency_check=True), "num_kv_heads"),
        (dict(num_kv_heads=7), "num_kv_heads"),
        (dict(dp=0), "dp"),
        (dict(dataset_tokens=0.0), "dataset_size"),
    ],
)
def test_bad_shapes_are_config_errors(kw, field):
    with pytest.raises(ConfigError) as err:
        count_traffic(_gpt4_like(**kw))
    assert err.value.field == field


def test_two_models_in_one_process_do_not_share_state():
    a = count_traffic(_gpt4_like())
    count_traffic(_gpt4_like(dp=4, skip_efficiency_check=True))
    assert count_traffic(_gpt4_like()) == a
    assert dataclasses.asdict(a)["flop_fwd"] > 0


def test_a_weight_shard_that_does_not_divide_is_a_config_error():
    # MQA's K weights, (e/pe)*d*dh = 1*15361*64 local elements, cannot be split over DATA*SEQ*TENSOR_INT = 128.
    with pytest.raises(ConfigError, match="scatter degree 128") as err:
        count_traffic(_gpt4_like(d_model=15361, num_heads=240, skip_efficiency_check=True))
    assert err.value.field.startswith("layout (LAYER: 15/120")
