"""The seed's resource figures of one variant, from what the worker measured (no torch): utilisation and mean
power, token lengths and truncation, stored bytes and their cost, the electricity bill at the site.

Utilisation: NVML's GPU utilisation (sampled by the train phase's Tracker, measure/records.Sampler) when a GPU
was read, else the CPU's (the train phase Tracker's CPU seconds of the process tree / (its duration x logical
CPUs), as CodeCarbon's cpu_utilization_percent); ``utilization_source`` says which. Mean power: IT energy
(before PUE) over time.
"""

from __future__ import annotations

from typing import Any

from greentrain.experiment.cost import Pricing, storage_cost_usd
from greentrain.experiment.data import LengthStats
from greentrain.experiment.job import Job
from greentrain.measure.summary import Measurement


def length_fields(source: LengthStats | None, target: LengthStats | None) -> dict[str, Any]:
    """VariantResult's token-length fields of the sources' and the targets' statistics."""
    return {**_lengths("source", source), **_lengths("target", target)}


def _lengths(prefix: str, s: LengthStats | None) -> dict[str, Any]:
    if s is None:
        return {}
    return {f"{prefix}_tokens_p50": s.p50_tokens, f"{prefix}_tokens_p95": s.p95_tokens,
            f"{prefix}_tokens_longest": s.longest_tokens, f"{prefix}_truncated_fraction": s.truncated_fraction}


def usage_fields(*, job: Job, train: Measurement, gpu_utilization_percent: float | None, energy_j: float,
                 wall_s: float, train_energy_j: float, train_s: float, pricing: Pricing,
                 source_lengths: LengthStats | None = None, target_lengths: LengthStats | None = None,
                 generated_tokens: list[int] | None = None, model_bytes: float = 0.0,
                 output_bytes: float = 0.0) -> dict[str, Any]:
    """VariantResult fields (by name) for utilisation, power, truncation, storage and the electricity bill."""
    gpu = gpu_utilization_percent is not None
    return {
        "cpu_utilization_percent": train.cpu_utilization_percent if train.cpu_utilization_percent > 0 else None,
        "gpu_utilization_percent": gpu_utilization_percent, "utilization_source": "nvml" if gpu else "cpu-time",
        "mean_power_w": energy_j / wall_s if wall_s > 0 else None,
        "train_power_w": train_energy_j / train_s if train_s > 0 else None,
        "max_source_tokens": job.data.max_source_tokens, "max_target_tokens": job.data.max_target_tokens,
        **length_fields(source_lengths, target_lengths),
        "generated_tokens_mean": sum(generated_tokens) / len(generated_tokens) if generated_tokens else None,
        "model_bytes": model_bytes, "output_bytes": output_bytes,
        "storage_cost_usd": storage_cost_usd(output_bytes, job.site.storage_usd_per_gb_month,
                                             job.site.storage_months),
        "electricity_usd_per_kwh": pricing.electricity_usd_per_kwh,
        "electricity_cost_usd": pricing.electricity_cost_usd}
