"""Seed 001's six-axis FLOP and network-traffic model (lib.py + transformer.py of davidsj/ml_par_sim).

algebra: the general tensor-layout library; transformer: the GPT-like model built on it; closed_form: the
same counts by formula (an independent check); report: derived rates (the text: greentrain.report.seed001).
"""

from greentrain.estimate.traffic.algebra import Data, DataDim, LayoutError, Mesh, Meter, ParallelAxis
from greentrain.estimate.traffic.closed_form import closed_form_counts
from greentrain.estimate.traffic.config import TrafficConfig, allowed_microbatch_sizes
from greentrain.estimate.traffic.report import TrafficReport, sweep_data_parallel, traffic_report
from greentrain.estimate.traffic.transformer import TrafficCounts, count_traffic

__all__ = ["Data", "DataDim", "LayoutError", "Mesh", "Meter", "ParallelAxis", "TrafficConfig",
           "TrafficCounts", "TrafficReport", "allowed_microbatch_sizes", "closed_form_counts",
           "count_traffic", "sweep_data_parallel", "traffic_report"]
