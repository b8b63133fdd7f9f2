"""Seed 004: variants of a fine-tuning job run for real, measured, priced and compared (design/experiment.md).

Torch-free: spec, job, data, predict, plan, runner, results, cost, findings, quality, report (computed; rendered by
``greentrain.report.experiment``, so nothing here imports Rich or matplotlib).
The worker (``worker``, ``build``) is the only part that imports torch and transformers.
"""
