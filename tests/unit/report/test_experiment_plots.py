"""The experiment report's plots (issue 26): every label inside the figure and clear of the others, a legend
entry only for what is drawn, every bar's value written (a 0 % bar included), one marker per re-pricing
region. Structure and positions, not pixels."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from greentrain.experiment.report import build_report
from greentrain.report import experiment_plots as ep


@pytest.fixture(scope="module")
def report(result_files: dict[str, Path]):
    return build_report(result_files["experiment"].parent, ["eastus", "europe-west9"])


def _capture(monkeypatch: pytest.MonkeyPatch) -> list:
    figs: list = []
    monkeypatch.setattr(ep, "save_figure", lambda fig, path: figs.append(fig) or Path(path))
    return figs


def _inside_and_apart(fig) -> None:
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    ax = fig.axes[0]
    labels = [t.get_window_extent(r) for t in ax.texts]
    for b in labels:
        assert box.x0 <= b.x0 and b.x1 <= box.x1 and box.y0 <= b.y0 and b.y1 <= box.y1, (b, box)
    for i, a in enumerate(labels):
        assert not any(a.overlaps(b) for b in labels[i + 1:]), [t.get_text() for t in ax.texts]


def test_quality_and_cost_plots_label_every_variant_inside_the_figure(report, monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    ep.pareto_plot(report, tmp_path / "p.png")
    ep.cost_plot(report, tmp_path / "c.png")
    for fig in figs:
        assert sorted(t.get_text() for t in fig.axes[0].texts) == ["base", "lora"]
        _inside_and_apart(fig)
        assert "(g, " in fig.axes[0].get_xlabel()  # unit
    legend = [t.get_text() for t in figs[1].axes[0].get_legend().get_texts()]
    assert legend == ["re-priced in eastus", "re-priced in europe-west9", "as measured"]
    assert figs[1].axes[0].get_ylabel() == "cost (USD)"


def test_error_plot_writes_every_bar_and_names_what_was_not_predicted(report, monkeypatch, tmp_path):
    figs = _capture(monkeypatch)
    ep.error_plot(report, tmp_path / "e.png")
    ax = figs[0].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["training time (uncalibrated)"]  # the fixture predicts train_s only
    assert "not predicted: FLOP per step, training time (calibrated), energy" in ax.get_title()
    assert sorted(t.get_text() for t in ax.texts) == ["-20.0%", "-20.0%"]  # predicted 0.8 x measured
    _inside_and_apart(figs[0])


def test_write_plots_writes_three_pngs(report, tmp_path):
    paths = ep.write_plots(report, tmp_path / "plots")
    assert [p.name for p in paths] == ["pareto.png", "cost_vs_co2.png", "prediction_error.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
