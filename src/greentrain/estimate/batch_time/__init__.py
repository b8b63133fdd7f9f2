"""Seed 001's simple per-batch timing model (simple_transformer.py of davidsj/ml_par_sim)."""

from greentrain.estimate.batch_time.chips import SEED_CHIPS, BatchChip, get_batch_chip
from greentrain.estimate.batch_time.model import BatchTimeConfig, BatchTimeResult, batch_time
from greentrain.estimate.batch_time.render import render_text, to_json

__all__ = ["SEED_CHIPS", "BatchChip", "BatchTimeConfig", "BatchTimeResult", "batch_time", "get_batch_chip",
           "render_text", "to_json"]
