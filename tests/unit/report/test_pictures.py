"""Structure of the search plot and the offload heatmap (issue 26 item 7): panels, one shared colour scale,
labelled front points, every group in the HTML. Structure, not pixels."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from greentrain.offload.config import offload_framework
from greentrain.offload.grid import offload_grid
from greentrain.parallel.strategy import Strategy
from greentrain.report import html_plots
from greentrain.report.html_analyses import offload_heatmap_section
from greentrain.report.offload import heatmap_figure, write_heatmap
from greentrain.report.search import plot_search, search_figure, short_label
from greentrain.results.analyses import OffloadHeatmapResult
from greentrain.search.engine import Candidate, SearchResult


def _candidate(strategy: Strategy, region: str, time_s: float, cost: float, co2: float) -> Candidate:
    return Candidate(strategy=strategy, chip="h100-sxm", num_chips=8, region=region, step_time_s=1.0,
                     run_time_s=time_s, cost_usd=cost, emissions_kg_co2e=co2, energy_j=1e9, memory_bytes=1e10,
                     mfu=0.5)


def _search_result() -> SearchResult:
    rng = np.random.default_rng(1)
    points = np.column_stack([rng.uniform(1e4, 1e6, 5000), rng.uniform(1e2, 1e4, 5000), rng.uniform(1, 100, 5000)])
    s = Strategy(dp=8, tp=1, pp=1, zero=3, micro_batch_size=4)
    front = (_candidate(s, "us-west-2", 5e3, 200.0, 9.0), _candidate(s, "eu-north-1", 8e3, 150.0, 2.0))
    return SearchResult(objective="time", num_candidates=6000, num_feasible=5002, search_time_s=0.1, ranked=front,
                        pareto=front, points=np.vstack([points, [[5e3, 200.0, 9.0], [8e3, 150.0, 2.0]]]))


def test_search_plot_has_two_panels_and_labelled_front(tmp_path):
    fig = search_figure(_search_result())
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 2 and len(fig.axes) == 4  # time x cost, cost x CO2e, each with its colourbar
    for ax in panels:
        labels = [t.get_text() for t in ax.texts]
        assert any("eu-north-1" in t and "dp8" in t and "z3" in t and "mb4" in t for t in labels), labels
        assert len(labels) == 2  # one per front point
        assert "(" in ax.get_xlabel() and "(" in ax.get_ylabel()  # units
    assert panels[0].get_xscale() == "log" and panels[0].get_yscale() == "log"  # values span two decades
    assert plot_search(_search_result(), tmp_path / "s.png").stat().st_size > 0


def test_short_label_drops_defaults():
    s = Strategy(dp=2, tp=4, pp=1, zero=1, micro_batch_size=2)
    assert short_label(_candidate(s, "us-east-1", 1, 1, 1)) == "dp2 tp4 pp1 z1 mb2 / h100-sxm / us-east-1"


def _cells():
    return offload_grid(["llama3.2-1b", "llama3-8b"], ["h100-sxm"], [4096, 8192, 16384], [16.0, 48.0, 80.0],
                        [32.0, 256.0], offload_framework("pytorch", "mixed"))


def test_heatmap_is_a_grid_with_one_colourbar(tmp_path):
    cells = _cells()
    fig = heatmap_figure(cells, "tokens_per_s", "pytorch")
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(bars) == 1 and len(panels) == 2 * 3  # rows: models, columns: sequence lengths
    assert {ax.images[0].get_clim() for ax in panels} == {panels[0].images[0].get_clim()}  # one scale
    w, h = fig.get_size_inches()
    assert w <= 15.0 and h <= 9.5
    texts = [t.get_text() for ax in panels for t in ax.texts]
    # thousands as "6.39k", below 1,000 plain (the pytorch profile's 8B cells since its host side is priced)
    assert len(texts) == sum(c.fits for c in cells) and all(t.endswith("k") or float(t) < 1e3 for t in texts)
    assert any(t.endswith("k") for t in texts)
    assert write_heatmap(cells, "tokens_per_s", tmp_path / "h.png", "pytorch").stat().st_size > 0


def test_heatmap_html_draws_every_group():
    cells = _cells()
    h = OffloadHeatmapResult(metric="tokens_per_s", framework="pytorch", cells=tuple(c.to_dict() for c in cells))
    html = offload_heatmap_section(h, "test")
    assert html.count("<svg") == 1 and "All 6 groups are drawn" in html
    for model in ("llama3.2-1b", "llama3-8b"):
        for seq in ("4,096", "8,192", "16,384"):
            assert f"{model}, h100-sxm, seq {seq}" in html
    assert len(re.findall(r'id="QuadMesh_\d+"', html)) == 6


def test_html_heatmaps_share_one_colourbar():
    svg = html_plots.heatmaps([(f"p{i}", [1.0, 2.0], [1.0], [[float(i), float("nan")]]) for i in range(4)],
                              ("x (GiB)", "y (GiB)", "tokens/s"), "t", cols=2)
    assert svg.count("p0") == 1 and svg.count("p3") == 1
    assert len(re.findall(r'id="QuadMesh_\d+"', svg)) == 4  # one mesh per panel
    assert svg.count("tokens/s") == 1  # one colourbar
