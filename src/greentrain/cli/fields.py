"""Core modules name the fields of their inputs in errors (``constraints.max_chips``, ``step.bucket_mb``); the
CLI shows the flag that set a field instead, so that a user reads the flag they typed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from greentrain.errors import ConfigError


@contextmanager
def fields_as_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a ConfigError whose field is a key of ``flags`` as the same error naming the flag."""
    try:
        yield
    except ConfigError as e:
        if e.field not in flags:
            raise
        raise ConfigError(flags[e.field], e.value, e.rule) from None


SEARCH_FLAGS = {"constraints.max_chips": "--max-chips", "constraints.memory_headroom": "--memory-headroom",
                "constraints.budget_usd": "--budget-usd", "search.objective": "--objective", "search.top_k": "--top",
                "search.max_tp": "--max-tp", "search.max_micro_batch": "--max-micro-batch"}
SITE_FLAGS = {"site.region": "--region", "site.grid_g_co2e_per_kwh": "--grid-g-per-kwh", "site.pue": "--pue",
              "site.electricity_usd_per_kwh": "--electricity-usd-per-kwh"}
KERNEL_FLAGS = {"attention_kernel": "--attention-kernel", "loss_kernel": "--loss-kernel",
                "selective_recompute": "--selective-recompute"}
OFFLOAD_FLAGS = {"cluster.host_link": "--host-link", "measured": "--measured"}
TRACK_FLAGS = {"track.cpu_tdp_w": "--cpu-tdp-w", "track.interval_s": "--interval-s", "track.out_dir": "--out"}
SUMMARIZE_FLAGS = {"out_dir": "--summarize"}
EXPERIMENT_RUN_FLAGS = {"jobs": "--jobs", "fresh": "--fresh", "storage": "--storage", "out": "--out",
                        "executor": "--executor", "max_retries": "--max-retries",
                        "executor.ray_address": "--ray-address", "slurm": "--slurm"}
STEP_FLAGS = {"step.inter_node_slowdown": "--link-slowdown", "step.bucket_mb": "--bucket-mb",
              "step.stragglers": "--straggler"}
