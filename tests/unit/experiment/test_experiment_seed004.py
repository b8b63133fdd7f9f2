"""Seed 004's remaining figures: decoding options, storage and its cost, utilisation and mean power, token lengths
and truncation, the electricity bill per region, and the cheapest-is-not-greenest example with its cause.

Hand-made tables and a fake ``pynvml`` for the arithmetic (no torch); one real run of
examples/tiny-cheapest-not-greenest.yaml (slow) for what the worker records."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.experiment.cost import price, site_of, storage_cost_usd
from greentrain.experiment.data import length_stats
from greentrain.experiment.findings import cheapest_vs_greenest, truncation, why_not_greenest
from greentrain.experiment.job import parse_job
from greentrain.experiment.results import VariantResult

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tiny-cheapest-not-greenest.yaml"


@pytest.mark.parametrize(("given", "message"), [
    ({"eval": {"length_penalty": 2.0}}, "eval.length_penalty=2.0: scores beams only: set eval.num_beams > 1"),
    ({"eval": {"min_new_tokens": 17}}, "eval.min_new_tokens=17: must be <= eval.max_new_tokens (16)"),
    ({"eval": {"min_new_tokens": -1}}, "eval.min_new_tokens=-1: must be >= 0"),
    ({"task": "causal-lm", "model": {"arch": "llama"}, "eval": {"length_penalty": 1.0}},
     "eval.length_penalty=1.0: is a decoding option: task causal-lm generates nothing"),
    ({"site": {"storage_usd_per_gb_month": -0.1}},
     "site.storage_usd_per_gb_month=-0.1: must be in [0, 10] USD/GB-month"),
    ({"site": {"storage_months": 0}}, "site.storage_months=0: must be in (0, 1,200] months"),
    ({"model": {"save": "yes"}}, "model.save='yes': must be true or false"),
])
def test_bad_new_fields_are_one_line_naming_field_value_and_rule(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_job(given)
    assert str(e.value).startswith(message)


def test_bad_decoding_option_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from greentrain.cli.main import main

    path = tmp_path / "e.yaml"
    path.write_text("name: e\neval: {num_beams: 1, length_penalty: 0.6}\n")
    assert main(["experiment", "plan", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "eval.length_penalty=0.6" in err and "num_beams" in err


def test_new_keys_are_optional_so_older_files_keep_their_hash() -> None:
    job = parse_job({})
    assert "length_penalty" not in job.resolved["eval"] and "save" not in job.resolved["model"]
    assert "storage_usd_per_gb_month" not in job.resolved["site"]
    assert (job.eval.length_penalty, job.eval.min_new_tokens, job.model.save, job.site.storage_months) == \
        (1.0, 0, False, 1.0)
    beams = parse_job({"eval": {"num_beams": 4, "length_penalty": 2.0, "min_new_tokens": 5}}).eval
    assert (beams.length_penalty, beams.min_new_tokens) == (2.0, 5)


def test_storage_cost_and_the_electricity_bill_by_hand() -> None:
    assert storage_cost_usd(2.5e9, 0.0184, 12) == pytest.approx(2.5 * 0.0184 * 12)
    assert storage_cost_usd(1e9, None, 12) is None
    spec = parse_job({"site": {"region": "qatarcentral", "usd_per_hour": 3.6}}).site
    p = price(energy_j=3.6e6, wall_s=100.0, site=site_of(spec), usd_per_hour=3.6)
    assert p.cost_basis == "cloud" and p.cost_usd == pytest.approx(0.1)  # the hourly price bills the time
    assert p.electricity_usd_per_kwh == pytest.approx(0.036)  # the catalog's Qatar price, beside the cloud $
    assert p.electricity_cost_usd == pytest.approx(units.j_to_kwh(p.facility_energy_j) * 0.036)
    e = price(energy_j=3.6e6, wall_s=100.0, site=site_of(spec), usd_per_hour=None)
    assert e.cost_basis == "electricity" and e.cost_usd == pytest.approx(e.electricity_cost_usd)
    grid_only = price(energy_j=3.6e6, wall_s=1.0, site=site_of(parse_job({"site": {"grid_g_co2e_per_kwh": 100.0}})
                                                               .site), usd_per_hour=None)
    assert grid_only.electricity_cost_usd is None and grid_only.electricity_usd_per_kwh is None


def test_length_stats_by_hand() -> None:
    s = length_stats(list(range(1, 11)), 8)
    assert (s.count, s.truncated, s.longest_tokens, s.p50_tokens) == (10, 2, 10, 5.5)
    assert s.p95_tokens == pytest.approx(9.55) and s.truncated_fraction == 0.2
    assert length_stats([], 8).truncated_fraction == 0.0


def row(vid: str, **kw: Any) -> VariantResult:
    base: dict[str, Any] = {"variant_id": vid, "config_hash": "h", "status": "ok", "rouge1": 50.0, "pue": 1.2,
                            "wall_s": 100.0, "energy_j": 1e4, "mean_power_w": 100.0}
    return VariantResult(**{**base, **kw})


def test_why_cheapest_is_not_greenest_names_the_factors() -> None:
    # the same run billed by electricity in a cheap, dirty region and a dear, clean one
    dirty = row("qatar", cost_usd=0.036, emissions_kg_co2e=0.6, cost_basis="electricity",
                electricity_usd_per_kwh=0.036, grid_g_co2e_per_kwh=600.0)
    clean = row("sweden", cost_usd=0.092, emissions_kg_co2e=0.04, cost_basis="electricity",
                electricity_usd_per_kwh=0.092, grid_g_co2e_per_kwh=40.0)
    (f,) = cheapest_vs_greenest([dirty, clean])
    assert f.variants == ("qatar", "sweden")
    assert "Why: qatar costs 0.391x as much as sweden (electricity price 0.391x)" in f.text
    assert "emits 15x as much CO2e (grid intensity 15x)" in f.text
    # fast and hot on an hourly price: cheaper by its billed time, dirtier by its power
    fast = row("fast", cost_usd=0.6, emissions_kg_co2e=0.3, cost_basis="cloud", wall_s=60.0, mean_power_w=250.0,
               grid_g_co2e_per_kwh=300.0)
    slow = row("slow", cost_usd=1.0, emissions_kg_co2e=0.25, cost_basis="cloud", wall_s=100.0, mean_power_w=125.0,
               grid_g_co2e_per_kwh=300.0)
    text = why_not_greenest(fast, slow)
    assert text == ("fast costs 0.6x as much as slow (billed time 0.6x) and emits 1.2x as much CO2e "
                    "(mean power 2x, wall time 0.6x)")


def test_truncation_finding_groups_variants_sharing_their_data() -> None:
    lengths = {"max_source_tokens": 32, "max_target_tokens": 12, "source_tokens_p50": 29.0, "source_tokens_p95": 38.0,
               "source_tokens_longest": 38, "source_truncated_fraction": 0.266, "target_tokens_p50": 10.0,
               "target_tokens_p95": 10.0, "target_tokens_longest": 10, "target_truncated_fraction": 0.0}
    a, b = row("a", **lengths), row("b", **lengths)
    c = row("c", **{**lengths, "max_source_tokens": 64, "source_truncated_fraction": 0.0})
    found = truncation([a, b, c])
    assert [f.variants for f in found] == [("a", "b"), ("c",)]
    assert found[0].text.startswith("truncation (a, b): 26.6% of the sources are longer than 32 tokens (p50 29, "
                                    "p95 38, longest 38); 0.0% of the targets longer than 12")
    assert dict(found[1].numbers)["source_truncated_fraction"] == 0.0


def test_report_shows_utilisation_power_storage_and_regional_dollars(tmp_path: Path, make_folder: Any) -> None:
    from greentrain.experiment.report import build_report, emissions_rows
    from greentrain.experiment.results import read_result, write_result
    from greentrain.experiment.runner import variant_dir
    from greentrain.report.experiment import markdown, table_rows

    out = tmp_path / "hand"
    make_folder(out)
    path = variant_dir(out, "base") / "result.json"
    r = read_result(path)
    assert r is not None
    write_result(path, dataclasses.replace(r, cpu_utilization_percent=48.0, mean_power_w=36.0, storage_cost_usd=1e-4,
                                           output_bytes=5e5))
    rep = build_report(out, regions=["qatarcentral"])
    md = markdown(rep)
    assert "| util % | mean W |" in md and "| $ storage |" in md and "## Re-priced in other regions" in md
    base = next(row for row in table_rows(rep) if row[0] == "base")
    assert base[4:6] == ("cpu 48", "36") and base[11] == "0.0001"
    (x,) = [x for x in rep.repriced if x.variant_id == "base"]
    assert x.electricity_usd_per_kwh == pytest.approx(0.036)  # the region's price, not the site's
    assert x.electricity_cost_usd == pytest.approx(units.j_to_kwh(3.6e3 * 1.5) * 0.036)  # the site gives PUE 1.5
    train = next(e for e in emissions_rows(rep, "hand") if e["run_id"] == "base:train")
    assert train["cpu_utilization_percent"] == 48.0 and train["gpu_utilization_percent"] == ""
    assert train["cpu_power"] == pytest.approx(3.6e3 / 4 / 50.0)  # a quarter of the energy over 50 s of training
    from greentrain.report.html_analyses import experiment_section
    from greentrain.results.experiment import ExperimentResult

    html = experiment_section(ExperimentResult.from_dict(rep.to_dict()), "results.json")
    assert "<th class=\"n\">utilisation</th>" in html and ">CPU 48 %<" in html and ">36 W<" in html


@pytest.fixture(scope="module")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("rouge_score")
    from greentrain.cli.main import main

    out = tmp_path_factory.mktemp("where") / "out"
    assert main(["experiment", "run", str(EXAMPLE), "--out", str(out), "--isolation", "inline", "--no-plot"]) == 0
    return out


@pytest.mark.slow
def test_the_example_finds_the_cheapest_is_not_the_greenest_and_why(example_dir: Path) -> None:
    data = json.loads((example_dir / "results.json").read_text())
    (where,) = [f for f in data["findings"] if f["kind"] == "F10" and f["text"].startswith("where to run")]
    # the same measurement of one variant (the best within 1 ROUGE-1 point; which one depends on the run) is the
    # cheapest in Qatar and the greenest in Sweden, whatever the load did to its energy
    cheap, green = where["variants"]
    assert cheap.endswith("@qatarcentral") and green == cheap.replace("@qatarcentral", "@swedencentral")
    assert "cheapest is not greenest" in where["text"]
    assert "electricity price 0.39x" in where["text"] and "grid intensity 14.8x" in where["text"]
    (f1,) = [f for f in data["findings"] if f["kind"] == "F1"]
    assert f1["variants"][0] == f1["variants"][1]  # at one site billed by energy, $ and CO2e rank alike
    assert "## Re-priced in other regions" in (example_dir / "report.md").read_text()


def test_plan_counts_truncation_before_anything_trains(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from greentrain.cli.main import main

    path = tmp_path / "cut.yaml"
    path.write_text("name: cut\ndata: {max_source_tokens: 32}\naxes:\n  data.max_source_tokens: [64]\n")
    assert main(["experiment", "plan", str(path), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    base, wide = plan["variants"]
    # synthetic-news, seed 0, 1024 + 128 + 128 examples: 3-5 sentences of 5-9 words, p50 29 tokens with the EOS
    assert (base["source_tokens_p50"], base["source_tokens_longest"]) == (29.0, 38)
    assert base["source_truncated_fraction"] == pytest.approx(0.2828125) and wide["source_truncated_fraction"] == 0.0
    assert plan["truncation"][0].startswith("truncation (base): 28.3% of the sources are longer than 32 tokens")
    assert plan["truncation"][1].endswith("nothing is cut")


@pytest.mark.slow
def test_the_worker_records_utilisation_power_lengths_and_storage(example_dir: Path) -> None:
    from greentrain.experiment.plan import length_fields, plan_experiment
    from greentrain.experiment.spec import load_experiment

    planned = {r.variant_id: length_fields(r) for r in plan_experiment(load_experiment(EXAMPLE), lengths=True).rows}
    for v in json.loads((example_dir / "results.json").read_text())["variants"]:
        r = VariantResult.from_dict(v)
        assert planned[r.variant_id] == {k: getattr(r, k) for k in planned[r.variant_id]}  # plan = worker
        if r.device == "cpu":  # on a CUDA machine the GPU's NVML utilisation is recorded instead
            assert r.utilization_source == "cpu-time" and r.gpu_utilization_percent is None
        elif importlib.util.find_spec("pynvml") is not None:
            assert r.utilization_source == "nvml" and 0 <= (r.gpu_utilization_percent or 0.0) <= 100
        assert r.cpu_utilization_percent is not None and 0 < r.cpu_utilization_percent <= 100
        assert r.mean_power_w == pytest.approx(r.energy_j / r.wall_s)
        assert r.train_power_w == pytest.approx(r.train_energy_j / r.train_s)
        folder = example_dir / "variants" / r.variant_id
        model = sum(p.stat().st_size for p in (folder / "model").rglob("*") if p.is_file())
        assert r.model_bytes == model and (folder / "model" / "model.safetensors").is_file()
        assert model < r.output_bytes <= sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        assert r.storage_cost_usd == pytest.approx(r.output_bytes / 1e9 * 0.0184 * 12)
        assert r.electricity_cost_usd == pytest.approx(units.j_to_kwh(r.facility_energy_j)
                                                       * (r.electricity_usd_per_kwh or 0.0))
        assert r.cost_basis == "electricity" and r.cost_usd == pytest.approx(r.electricity_cost_usd)
        # every article of synthetic-news is 3-5 short sentences: none is cut at 48 tokens, nor a summary at 16
        assert r.source_truncated_fraction == 0.0 and r.target_truncated_fraction == 0.0
        assert (r.max_source_tokens, r.max_target_tokens) == (48, 16)
        assert r.source_tokens_p50 is not None and r.source_tokens_p50 <= (r.source_tokens_longest or 0) <= 48
        assert r.generated_tokens_mean is not None and 0 < r.generated_tokens_mean <= 16
    with (example_dir / "emissions.csv").open() as f:
        trains = [e for e in csv.DictReader(f) if e["run_id"].endswith(":train")]
    assert len(trains) == 2 and all(float(e["cpu_utilization_percent"]) > 0 and float(e["ram_power"]) > 0
                                    for e in trains)


@pytest.mark.slow
def test_min_new_tokens_and_length_penalty_reach_generate(make_experiment: Any) -> None:
    pytest.importorskip("transformers")
    import torch

    from greentrain.experiment.build import EOS_ID, build_model, build_tokenizer, generate
    from greentrain.experiment.data import synthetic_news

    def job(**decoding: Any) -> Any:
        data = make_experiment(eval={"num_beams": 2, "max_new_tokens": 8, **decoding})
        return parse_job({k: v for k, v in data.items() if k != "name"})

    pairs = synthetic_news(64, 0)
    tok = build_tokenizer(job(), pairs)
    model: Any = build_model(job(), len(tok))
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features)  # a head that ends at once:
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    with torch.no_grad():
        head.bias[EOS_ID], head.bias[5] = 10.0, 5.0  # EOS first, else token 5
    model.lm_head = head
    seen: list[dict[str, Any]] = []
    real = model.generate

    def spy(**kw: Any) -> Any:
        ids = real(**kw)
        new = [row[1:].tolist() for row in ids]  # after the decoder start token
        seen.append({**kw, "before_eos": [x.index(EOS_ID) if EOS_ID in x else len(x) for x in new]})
        return ids

    model.generate = spy
    generate(model, tok, pairs.sources[:4], job())
    generate(model, tok, pairs.sources[:4], job(length_penalty=0.5, min_new_tokens=6))
    free, held = seen
    assert free["before_eos"] == [0, 0, 0, 0]  # without a minimum the summaries end at once
    assert held["min_new_tokens"] == 6 and held["length_penalty"] == 0.5 and held["num_beams"] == 2
    assert held["before_eos"] == [6, 6, 6, 6]  # EOS held back for 6 new tokens


def test_a_causal_lm_truncation_finding_speaks_of_the_joined_sequence() -> None:
    r = row("lm", task="causal-lm", max_source_tokens=48, max_target_tokens=16, source_tokens_p50=40.0,
            source_tokens_p95=60.0, source_tokens_longest=70, source_truncated_fraction=0.1)
    (f,) = truncation([r])
    assert f.text == ("truncation (every variant): 10.0% of the sequences are longer than 64 tokens (p50 40, p95 60, "
                      "longest 70): cut before training")
