"""greentrain: predict, check and measure what a training run costs.

Time, memory, network traffic, energy, money and CO2e, from one description of a run (a Scenario).
"""

__version__ = "0.1.0"
