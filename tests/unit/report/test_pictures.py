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
from greentrain.report import heatmap, html_plots
from greentrain.report.heatmap import value_text
from greentrain.report.html_analyses import offload_heatmap_section
from greentrain.report.offload import MAX_FIG_H_IN, MAX_FIG_W_IN, heatmap_figure, write_heatmap
from greentrain.report.search import plot_search, search_figure, short_label
from greentrain.results.analyses import OffloadHeatmapResult
from greentrain.search.engine import Candidate, SearchResult


def _candidate(strategy: Strategy, region: str, time_s: float, cost: float, co2: float) -> Candidate:
    return Candidate(strategy=strategy, chip="h100-sxm", num_chips=8, region=region, step_time_s=1.0,
                     run_time_s=time_s, cost_usd=cost, emissions_kg_co2e=co2, energy_j=1e9, memory_bytes=1e10,
                     mfu=0.5)


def _search_result(n: int = 5000, pareto: int = 2) -> SearchResult:
    rng = np.random.default_rng(1)
    t = 10 ** rng.uniform(4, 6, n)  # run time, cost and CO2e rise together, as in a real search
    points = np.column_stack([t, t / 50 * rng.uniform(1, 1.5, n), t / 1000 * rng.uniform(1, 1.5, n)])
    s = Strategy(dp=8, tp=1, pp=1, zero=3, micro_batch_size=4)
    # given slowest first: the plot numbers the front by run time whatever the order
    front = (_candidate(s, "eu-north-1", 8e3, 150.0, 2.0), _candidate(s, "us-west-2", 5e3, 200.0, 9.0))[:pareto]
    return SearchResult(objective="time", num_candidates=n + 1000, num_feasible=n + 2, search_time_s=0.1,
                        ranked=front, pareto=front,
                        points=np.vstack([points, [[8e3, 150.0, 2.0], [5e3, 200.0, 9.0]]]))


def _numbers(ax):
    """front point number -> its (x, y) in the panel."""
    return {t.get_text(): t.xy for t in ax.texts if t.get_gid() == "front-label"}


def test_search_plot_has_two_panels_and_a_numbered_front(tmp_path):
    fig = search_figure(_search_result())
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 2 and len(fig.axes) == 4  # time x cost, cost x CO2e, each with its colourbar
    days = 5e3 / 86400
    # the same number is the same candidate in both panels: 1 is the fastest (us-west-2)
    assert _numbers(panels[0]) == {"1": (pytest.approx(days), 200.0), "2": (pytest.approx(8e3 / 86400), 150.0)}
    assert _numbers(panels[1]) == {"1": (200.0, 9.0), "2": (150.0, 2.0)}
    listed = [t.get_text() for t in fig.legends[0].get_texts()]
    assert listed == ["1: dp8 tp1 pp1 z3 mb4 / h100-sxm / us-west-2", "2: dp8 tp1 pp1 z3 mb4 / h100-sxm / eu-north-1"]
    for ax in panels:
        assert "(" in ax.get_xlabel() and "(" in ax.get_ylabel()  # units
    assert panels[0].get_xscale() == "log" and panels[0].get_yscale() == "log"  # values span two decades
    assert "one point" not in fig.get_suptitle()
    assert plot_search(_search_result(), tmp_path / "s.png").stat().st_size > 0


def test_search_plot_zooms_on_the_front():
    """Issue 26: the whole cloud drawn to its far corner left the front a dot in a corner. The axes end near
    the candidates closest to the front; the grey cloud beyond them is counted in the legend."""
    fig = search_figure(_search_result(n=40_000))
    ax = fig.axes[0]
    assert ax.get_xlim()[1] < 0.1 * 1e6 / 86400 and ax.get_ylim()[1] < 0.1 * 3e4  # the cloud: 1e6 s, 3e4 $
    x0, x1 = ax.get_xlim()
    assert x0 < 5e3 / 86400 < x1  # the front inside
    grey = next(t.get_text() for t in ax.get_legend().get_texts() if t.get_text().startswith("other feasible"))
    assert "beyond the axes" in grey and int(grey.split("; ")[1].split()[0].replace(",", "")) > 10_000


def test_search_plot_explains_a_one_point_front():
    fig = search_figure(_search_result(pareto=1))
    assert "The front is one point" in fig.get_suptitle()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["1: dp8 tp1 pp1 z3 mb4 / h100-sxm / eu-north-1"]


def test_short_label_drops_defaults():
    s = Strategy(dp=2, tp=4, pp=1, zero=1, micro_batch_size=2)
    assert short_label(_candidate(s, "us-east-1", 1, 1, 1)) == "dp2 tp4 pp1 z1 mb2 / h100-sxm / us-east-1"


def _cells():
    return offload_grid(["llama3.2-1b", "llama3-8b"], ["h100-sxm"], [4096, 8192, 16384], [16.0, 48.0, 80.0],
                        [32.0, 256.0], offload_framework("pytorch", "mixed"))


def _panels(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_heatmap_is_a_grid_with_one_colourbar(tmp_path):
    cells = _cells()
    fig = heatmap_figure(cells, "tokens_per_s", "pytorch")
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    panels = _panels(fig)
    assert len(bars) == 1 and len(panels) == 2 * 3  # rows: models, columns: sequence lengths
    assert {ax.collections[0].get_clim() for ax in panels} == {panels[0].collections[0].get_clim()}  # one scale
    assert bars[0].get_ylabel() == "thousand tokens/s"
    w, h = fig.get_size_inches()
    assert w <= MAX_FIG_W_IN and h <= MAX_FIG_H_IN
    texts = [t.get_text() for ax in panels for t in ax.texts]
    assert len(texts) == sum(c.fits for c in cells)  # every fitting cell carries its value
    assert {float(t) for t in texts} == {float(value_text(c.tokens_per_s / 1e3)) for c in cells if c.fits}
    # column titles on the top row only, the row names on the left column only
    assert [ax.get_title() for ax in panels[:3]] == [f"sequence {s:,} tokens" for s in (4096, 8192, 16384)]
    assert all(ax.get_title() == "" for ax in panels[3:])
    assert [ax.get_ylabel().split("\n")[0] for ax in panels[::3]] == ["llama3.2-1b, h100-sxm", "llama3-8b, h100-sxm"]
    assert write_heatmap(cells, "tokens_per_s", tmp_path / "h.png", "pytorch").stat().st_size > 0


def test_the_seeds_ten_group_heatmap_stays_readable():
    """Issue 26: the 10-group sweep was one 5,040-px row with 4-pt cell text. Now a 2 x 5 grid within a laptop
    screen whose cell text is at least MIN_FONT_PT, in the PNG and in the HTML page."""
    cells = offload_grid(["llama3.2-1b", "llama3-8b"], ["h100-sxm"], [4096, 8192, 16384, 32768, 65536],
                         [16.0 + 8 * i for i in range(9)], [32.0, 64.0, 128.0, 256.0],
                         offload_framework("pytorch", "mixed"))
    fig = heatmap_figure(cells, "tokens_per_s", "pytorch")
    assert len(_panels(fig)) == 10 and fig.get_size_inches()[0] <= MAX_FIG_W_IN
    sizes = {t.get_fontsize() for ax in _panels(fig) for t in ax.texts}
    assert sizes and min(sizes) >= heatmap.MIN_FONT_PT
    grid = heatmap.grid_from_cells([c.to_dict() for c in cells], "tokens_per_s")
    assert heatmap.cell_font_pt(grid, html_plots.HEATMAP_W_IN, heatmap.panel_height_in(grid, 30.0)) is not None


def test_heatmap_cells_too_small_are_left_blank_and_say_so():
    cells = offload_grid(["llama3.2-1b"], ["h100-sxm"], [4096] * 1 + [8192, 16384, 32768, 65536, 131072],
                         [8.0 + 2 * i for i in range(37)], [64.0, 256.0], offload_framework("pytorch", "mixed"))
    fig = heatmap_figure(cells, "tokens_per_s", "pytorch")
    assert not any(ax.texts for ax in _panels(fig)) and "too small" in fig.get_suptitle()


def test_value_text_is_short_and_rounds_at_the_boundaries():
    assert [value_text(v) for v in (0.9996, 0.977, 6.388, 10.93, 99.96, 312.4, 0.0531)] == [
        "1.00", "0.98", "6.39", "10.9", "100", "312", "0.053"]


def test_heatmap_html_draws_every_group():
    cells = _cells()
    h = OffloadHeatmapResult(metric="tokens_per_s", framework="pytorch", cells=tuple(c.to_dict() for c in cells))
    html = offload_heatmap_section(h, "test")
    assert html.count("<svg") == 1 and "All 6 groups are drawn." in html
    assert '<figure class="plot wide">' in html
    for seq in ("4,096", "8,192", "16,384"):
        assert html.count(f"sequence {seq} tokens") == 1
    for model in ("llama3.2-1b", "llama3-8b"):
        assert f"{model}, h100-sxm" in html
    assert len(re.findall(r'id="QuadMesh_\d+"', html)) == 6
    assert re.search(r"<dt>highest tokens/s</dt><dd>15,\d{3} tokens/s \(llama3.2-1b, seq 16,384, "
                     r"device \d+ / host \d+ GiB", html)


def test_heatmap_html_folds_a_long_table_of_cells():
    cells = offload_grid(["llama3.2-1b"], ["h100-sxm"], [4096, 8192], [16.0, 32.0, 48.0, 64.0, 80.0],
                         [32.0, 64.0, 128.0, 256.0, 512.0], offload_framework("pytorch", "mixed"))
    h = OffloadHeatmapResult(metric="mfu", framework="pytorch", cells=tuple(c.to_dict() for c in cells))
    html = offload_heatmap_section(h, "test")
    assert "<details><summary>every cell (50 rows)</summary>" in html and "MFU (%)" in html


def test_html_search_draws_and_lists_the_whole_front(result_files):
    """The page's search plot showed only the top-k, so a front point outside it was never drawn: now the
    front is a line of P1, P2, ... (by run time) with its own table, and ties among the ranked share a label."""
    from greentrain.report.html_sections import search_section
    from greentrain.results.codec import load_result

    view = load_result(result_files["search"])
    html = search_section(view, "search.json")
    front = sorted(view.pareto, key=lambda c: c["run_time_s"])
    assert len(re.findall(r"<td>P\d+</td>", html)) == len(front) >= 1
    svg = html[html.index("<svg"):html.index("</svg>")]
    assert all(f"P{k}" in svg for k in range(1, len(front) + 1))
    assert "Pareto front (" in svg and "1e6" not in svg and "1e5" not in svg  # no offset text on the axes


def test_html_scatter_ties_share_one_label():
    svg = html_plots.scatter([1.0, 2.0, 2.0, 2.0], [10.0, 20.0, 20.0, 20.0], [1.0, 2.0, 3.0, 4.0], ("x", "y", "z"),
                             point_labels=["1", "2", "3", "4"])
    assert "2,3,4" in svg and ">1<" in svg.replace(" ", "")


def test_a_long_text_cell_wraps_in_a_numbers_column():
    from greentrain.report.html_parts import table

    html = table(("what", "value"), [("HFU", "62.3%"), ("expected error", "+/-3 % (80 % of 8 validated runs ...)")])
    assert '<td class="n">62.3%</td>' in html and '<td class="w">+/-3 % (80 %' in html


def test_seed001_sweep_ticks_are_the_swept_chip_counts():
    """The sweep's chip counts (960 x 2^k) sat between 2^n ticks with dp labels above the points; now each point
    is a tick labelled with its count and degree, and the figure has no loose annotations."""
    from greentrain.estimate.traffic.report import SweepPoint
    from greentrain.report.seed001 import sweep_figure

    points = [SweepPoint(dp=2 ** k, num_chips=960 * 2 ** k, tx_bytes_per_chip=1e18 / 2 ** k,
                         rx_bytes_per_chip=2e18 / 2 ** k) for k in range(8)]
    fig = sweep_figure(points)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"{960 * 2 ** k:,}\ndp={2 ** k}" for k in range(8)]
    assert list(ax.get_xticks()) == [960 * 2 ** k for k in range(8)] and not ax.texts
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and "bytes" in ax.get_ylabel()


def test_html_experiment_draws_quality_against_co2e(result_files):
    """An experiment without the planner's train_s prediction had no plot on the page: now quality against
    CO2e names every variant run and rings the Pareto set."""
    from greentrain.report.html_analyses import experiment_section
    from greentrain.results.codec import load_result

    e = load_result(result_files["experiment"])
    html = experiment_section(e, "results.json")
    svg = next(s for s in re.findall(r"<svg.*?</svg>", html, flags=re.S) if "against CO2e" in s)
    assert ">base<" in svg.replace(" ", "") and ">lora<" in svg.replace(" ", "")
    assert "Pareto set" in svg and "cost (USD)" in svg and "CO2e (g, operational + embodied)" in svg


def test_error_text_signs_and_rounds():
    assert [heatmap.error_text(e) for e in (0.046, -0.0004, 0.0004, -0.003, 0.123, -0.0996)] == [
        "+4.6%", "0.0%", "0.0%", "-0.3%", "+12%", "-10%"]


def test_a_narrow_heatmap_keeps_its_title_inside_the_figure():
    """A 2-panel grid is 6 inches wide: its one-line title was cut at both edges; now it wraps."""
    cells = offload_grid(["llama3-8b"], ["h100-sxm"], [4096, 8192], [24.0, 78.0], [60.0, 65.0, 70.0, 75.0],
                         offload_framework("ml_dataflow", "mixed"))
    fig = heatmap_figure(cells, "tokens_per_s", "ml_dataflow")
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and "\n" in fig.get_suptitle()


def test_html_validation_shows_scores_bars_and_every_run():
    """A validate result drew three counts ("rows: 8 entries"): now its scores, predicted against measured
    throughput per run, and every run's row (a run that did not fit says why)."""
    from greentrain.report.html_validation import validation_section
    from greentrain.results.calibration import ValidationResult

    rows = ({"run_id": "a", "model": "llama3-8b", "num_chips": 8, "strategy": "dp=8", "fits": True,
             "tokens_per_s_per_chip": 3000.0, "mfu": 0.5, "measured": {"status": "ok", "tokens_per_s_per_chip": 2900.0,
                                                                        "mfu": 0.48}},
            {"run_id": "b", "model": "llama3-70b", "num_chips": 8, "strategy": "dp=8", "fits": False,
             "reason": "memory", "measured": {"status": "oom"}})
    v = ValidationResult(settings={"runs": "r.csv"}, rows=rows,
                         summary={"num_runs": 2, "num_scored": 1, "throughput_error_mean": 0.0345})
    html = validation_section(v, "v.json")
    assert "<dt>throughput error, mean |e|</dt><dd>3.5 %</dd>" in html and html.count("<svg") == 1
    assert "<td>a</td>" in html and "+3.4 %" in html and "no: memory" in html and "oom" in html
    assert "error band held" not in html  # a file from before validate's band check
    held = ValidationResult(settings={"runs": "r.csv"}, rows=rows,
                            summary={"num_runs": 2, "error_band_held": 1, "error_band_scored": 1})
    assert "<dt>error band held</dt><dd>1 of 1 runs</dd>" in validation_section(held, "v.json")
