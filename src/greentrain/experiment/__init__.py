"""Seed 004: variants of a fine-tuning job run for real, measured, priced and compared (design/experiment.md).

Torch-free: spec, job, data, predict, plan, runner, results, cost, findings, quality, report, console, plots.
The worker (``worker``, ``build``) is the only part that imports torch and transformers.
"""
