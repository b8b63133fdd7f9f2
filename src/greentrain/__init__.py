"""greentrain: predict, check and measure what a training run costs.

Time, memory, network traffic, energy, money and CO2e, from one description of a run (a Scenario).
"""

from greentrain._version import __version__ as __version__  # re-exported: `greentrain --version`


def __getattr__(name: str) -> object:
    """``greentrain.Tracker``, imported on first use (torch is loaded only then)."""
    if name == "Tracker":
        from greentrain.measure.tracker import Tracker

        return Tracker
    raise AttributeError(f"module 'greentrain' has no attribute {name!r}")
