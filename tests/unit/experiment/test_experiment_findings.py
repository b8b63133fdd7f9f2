"""Findings and the Pareto set on hand-made tables: exact numbers, noise thresholds, a brute-force check."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.experiment.cost import price
from greentrain.experiment.findings import all_findings, axis_deltas, cheapest_vs_greenest, pareto_set
from greentrain.experiment.results import VariantResult
from greentrain.footprint.site import Site


def row(vid: str, *, usd: float, g: float, rouge1: float = 50.0, train_s: float = 100.0, energy_j: float = 1e4,
        basis: str = "cloud", **kw: float) -> VariantResult:
    return VariantResult(variant_id=vid, config_hash="h", status="ok", cost_usd=usd, emissions_kg_co2e=g / 1e3,
                         rouge1=rouge1, train_s=train_s, energy_j=energy_j, cost_basis=basis,
                         peak_memory_bytes=kw.get("mem", 1e9), cpu_count=2, load_avg_1m=kw.get("load", 0.5))


def test_cheapest_is_not_greenest_with_exact_figures() -> None:
    # fast and hot: cheaper per billed hour, dirtier per joule (Zeus's energy-time trade-off)
    rows = [row("base", usd=1.589, g=27.25), row("fast-hot", usd=1.20, g=31.0), row("slow-cool", usd=2.10, g=20.5),
            row("bad", usd=0.10, g=1.0, rouge1=40.0)]  # cheapest and greenest, but 10 ROUGE points worse
    (f,) = cheapest_vs_greenest(rows)
    assert f.variants == ("fast-hot", "slow-cool")
    assert dict(f.numbers) == {"cheapest_cost_usd": 1.20, "cheapest_g_co2e": pytest.approx(31.0),
                               "greenest_cost_usd": 2.10, "greenest_g_co2e": pytest.approx(20.5)}
    assert "cheapest is not greenest" in f.text and "$1.2 and 31 g" in f.text


def test_cost_bases_are_never_mixed() -> None:
    rows = [row("a", usd=1.0, g=10.0), row("b", usd=0.01, g=12.0, basis="electricity")]
    found = cheapest_vs_greenest(rows)
    assert [f.variants for f in found] == [("a", "a"), ("b", "b")]


def test_axis_deltas_hide_changes_below_noise() -> None:
    base = row("base", usd=1, g=1, train_s=100.0, energy_j=1000.0, rouge1=50.0)
    small = row("small", usd=1, g=1, train_s=109.0, energy_j=1090.0, rouge1=50.9)
    big = row("big", usd=1, g=1, train_s=130.0, energy_j=900.0, rouge1=48.0, load=3.0)
    found = {f.variants[0]: f for f in axis_deltas([base, small, big])}
    assert found["small"].text == "small vs base: no change above noise" and found["small"].numbers == ()
    nums = dict(found["big"].numbers)
    assert nums["train_time_change"] == pytest.approx(0.30) and nums["energy_change"] == pytest.approx(-0.10)
    assert nums["rouge1_points"] == pytest.approx(-2.0)
    assert "unreliable" in found["big"].text  # load average 3 on 2 cores


def test_seed_run_cost_and_carbon_reproduce_by_hand() -> None:
    # the seed's BART-large run: 0.09157 kWh, 297.6 g/kWh, 259.66 s on a $22.032/h instance
    p = price(energy_j=0.091577 * 3.6e6, wall_s=259.66, site=Site.from_intensity(297.6, pue=1.0),
              usd_per_hour=22.032)
    assert p.cost_usd == pytest.approx(1.589, abs=5e-4)
    assert p.emissions_kg_co2e == pytest.approx(0.02725, rel=1e-3)
    assert p.cost_basis == "cloud"


def brute_force(rows: list[VariantResult]) -> set[str]:
    def dominates(a: VariantResult, b: VariantResult) -> bool:
        ka = (-(a.rouge1 or 0), a.emissions_kg_co2e or 0, a.cost_usd or 0)
        kb = (-(b.rouge1 or 0), b.emissions_kg_co2e or 0, b.cost_usd or 0)
        return all(x <= y for x, y in zip(ka, kb, strict=True)) and ka != kb

    return {b.variant_id for b in rows if not any(dominates(a, b) for a in rows)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=12,
                unique=True))
def test_pareto_set_equals_brute_force(points: list[tuple[int, int, int]]) -> None:
    rows = [row(f"v{i}", usd=float(c), g=float(g), rouge1=float(q)) for i, (q, g, c) in enumerate(points)]
    assert set(pareto_set(rows)) == brute_force(rows)


def test_findings_are_frozen_and_skip_variants_not_ok() -> None:
    rows = [row("base", usd=1.0, g=10.0), dataclasses.replace(row("x", usd=0.1, g=0.1), status="failed")]
    found = all_findings(rows, attempts_energy_j=3600.0, num_attempts=1)
    assert all(dataclasses.is_dataclass(f) for f in found)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found[0].text = "x"  # type: ignore[misc]
    assert not any("x" in f.variants for f in found)
    f7 = next(f for f in found if f.kind == "F7")
    assert dict(f7.numbers)["wasted_energy_j"] == 3600.0 and "1 Wh" in f7.text


def test_with_repeats_deltas_are_shown_beyond_two_standard_deviations() -> None:
    def runs(vid: str, times: list[float], rouges: list[float]) -> list[VariantResult]:
        return [row(f"{vid}@seed{k}", usd=1, g=1, train_s=t, rouge1=q) for k, (t, q) in enumerate(zip(times, rouges,
                                                                                                      strict=True))]

    rows = [*runs("base", [100, 102, 98], [50.0, 52.0, 48.0]),  # sd 2 and 2
            *runs("slow", [120, 121, 119], [51.0, 53.0, 49.0]),  # time +20 % beyond 2 sd; ROUGE +1 within 2 sd
            *runs("same", [101, 99, 100], [50.0, 50.5, 49.5])]
    found = {f.variants[0]: f for f in axis_deltas(rows)}
    assert dict(found["slow"].numbers) == {"train_s_change": pytest.approx(0.20)}
    assert "over 3 and 3 seeds" in found["slow"].text
    assert found["same"].numbers == () and "no change beyond 2 sd" in found["same"].text


def lm_row(vid: str, *, usd: float, g: float, ppl: float, train_s: float = 100.0) -> VariantResult:
    return dataclasses.replace(row(vid, usd=usd, g=g, train_s=train_s), task="causal-lm", rouge1=None,
                               perplexity=ppl)


def test_causal_lm_findings_rank_perplexity_lower_is_better() -> None:
    rows = [lm_row("base", usd=1.0, g=10.0, ppl=5.00), lm_row("close", usd=0.5, g=12.0, ppl=5.08),  # +1.6 %
            lm_row("cool", usd=2.0, g=6.0, ppl=5.05), lm_row("cheap-bad", usd=0.1, g=1.0, ppl=6.0)]  # +20 %
    (f1,) = cheapest_vs_greenest(rows)  # within 2 % of the best perplexity (5.00): base, close, cool
    assert f1.variants == ("close", "cool") and "perplexity within 2% of the best, 5" in f1.text
    found = {f.variants[0]: f for f in axis_deltas(rows)}
    assert dict(found["cheap-bad"].numbers)["perplexity_change"] == pytest.approx(0.20)
    assert "perplexity" not in found["close"].text  # +1.6 % is below the 2 % noise
    f2 = [f for f in all_findings(rows) if f.kind == "F2"]
    assert [(f.variants, f.numbers) for f in f2[1:]] == [(("base",), (("perplexity", 5.0),))]  # no "per g"
    assert set(pareto_set(rows)) == {"base", "close", "cool", "cheap-bad"}
    assert set(pareto_set([*rows, lm_row("worse", usd=1.0, g=10.0, ppl=5.5)])) == {"base", "close", "cool",
                                                                                    "cheap-bad"}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=12,
                unique=True))
def test_perplexity_pareto_set_equals_brute_force(points: list[tuple[int, int, int]]) -> None:
    rows = [lm_row(f"v{i}", usd=float(c), g=float(g), ppl=float(p)) for i, (p, g, c) in enumerate(points)]
    flipped = [dataclasses.replace(r, rouge1=-(r.perplexity or 0.0)) for r in rows]  # brute force maximises ROUGE-1
    assert set(pareto_set(rows)) == brute_force(flipped)


def test_repeat_summaries_give_mean_and_sd_over_the_seeds() -> None:
    from greentrain.experiment.findings import repeat_summaries

    rows = [row("base@seed0", usd=1.0, g=10.0, train_s=100.0, rouge1=50.0),
            row("base@seed1", usd=3.0, g=14.0, train_s=110.0, rouge1=52.0),
            row("fast@seed0", usd=0.5, g=5.0, train_s=50.0), row("alone", usd=1.0, g=1.0)]
    (s,) = repeat_summaries(rows)  # fast has one run: no spread; alone is no repeat
    assert s.variant_id == "base" and s.runs == 2
    assert s.mean("cost_usd") == 2.0 and s.sd("cost_usd") == pytest.approx(2 ** 0.5)
    assert s.mean("emissions_kg_co2e") == pytest.approx(0.012) and s.mean("rouge1") == 51.0
    assert s.sd("train_s") == pytest.approx(50 ** 0.5)
