"""Seed 001's simple per-batch timing model (simple_transformer.py of davidsj/ml_par_sim); its report text is
greentrain.report.seed001's."""

from greentrain.estimate.batch_time.chips import SEED_CHIPS, BatchChip, get_batch_chip
from greentrain.estimate.batch_time.model import BatchTimeConfig, BatchTimeResult, batch_time

__all__ = ["SEED_CHIPS", "BatchChip", "BatchTimeConfig", "BatchTimeResult", "batch_time", "get_batch_chip"]
