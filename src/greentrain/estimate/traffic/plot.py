"""Plot of one chip's network traffic against the number of chips (a data-parallel sweep), with matplotlib."""

from __future__ import annotations

from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.estimate.traffic.report import SweepPoint
from greentrain.plotting import check_plot_path, pyplot, save_figure


def plot_sweep(points: list[SweepPoint], path: str | Path, title: str = "") -> Path:
    """Tx and Rx bytes per chip over the whole run against chips, log-log; written to ``path``."""
    if not points:
        raise ConfigError("plot", str(path), "no data-parallel degree of the sweep divides the layout")
    out = check_plot_path(path, "--plot")  # suffix, folder exists and is writable, matplotlib installed
    plt = pyplot()
    chips = [p.num_chips for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(chips, [p.tx_bytes_per_chip for p in points], marker="o", label="Tx bytes per chip")
    ax.plot(chips, [p.rx_bytes_per_chip for p in points], marker="s", label="Rx bytes per chip")
    for p in points:
        ax.annotate(f"dp={p.dp}", (p.num_chips, p.rx_bytes_per_chip), fontsize=7, textcoords="offset points",
                    xytext=(2, 4))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chips (data-parallel degree swept)")
    ax.set_ylabel("bytes per chip, whole run")
    ax.set_title(title or "greentrain traffic: network bytes per chip")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, out, dpi=100, flag="--plot")  # atomic; an OSError is a ConfigError
