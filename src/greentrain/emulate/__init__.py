"""Emulate parallelism for real on torch.distributed (seed 003, levendlee/ml-labs `parallelism/`, rebuilt).

The sharded maths runs on N ranks (gloo on CPU, NCCL on GPU); every collective and every local matmul is
counted in the seed's terms. Importing this package does not import torch: the case descriptions
(`cases`, `sharding`, `results`) are plain Python; `greentrain.emulate.launcher.emulate` runs them.
"""

from greentrain.emulate.cases import (
                                      FaultCase,
                                      FfnCase,
                                      MatMulCase,
                                      MatMulPolicy,
                                      MlpCase,
                                      PipelineCase,
                                      Schedule,
                                      derive_policy,
)
from greentrain.emulate.results import CollectiveRecord, EmulationResult, RankResult, Statistics
from greentrain.emulate.sharding import DimSharding, Mesh2D, TensorSharding

__all__ = ["CollectiveRecord", "DimSharding", "EmulationResult", "FaultCase", "FfnCase", "MatMulCase",
           "MatMulPolicy", "Mesh2D", "MlpCase", "PipelineCase", "RankResult", "Schedule", "Statistics",
           "TensorSharding", "derive_policy"]
