"""Training under host- and device-memory caps (seed 002, design/offload.md).

The planner (config, costs, model, plan, grid) imports no torch; the executor (train, testing) does and is
loaded only when asked for: ``from greentrain.offload.train import StreamingTrainer``.
"""
