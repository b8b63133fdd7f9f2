"""Attention kernels as data: which fused (or unfused) attention kernel a framework runs, and what it reaches on
each chip relative to FlashAttention-2, whose forward + backward curves the chip entries of efficiency.yaml
hold (``attention_max_d64`` ... ``attention_half_seq``). The kernels and their sources live in efficiency.yaml
``attention_kernels``; this module only resolves a kernel for a chip.

A kernel entry gives ``speed_vs_fa2`` per chip (``default``: any chip not named) from published
microbenchmarks, or ``fused: false`` for a kernel that materialises the scores (SDPA's math backend: the op list
then holds the score and softmax ops, model/ops.py attention_ops). A chip with no figure for a kernel keeps
FlashAttention-2's curve and says so in ``attention_source``.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError, did_you_mean

DEFAULT_ATTENTION_KERNEL = "fa2"
_SCALED = ("attention_max_d64", "attention_max_d128")


def attention_kernel_names(section: dict[str, Any]) -> tuple[str, ...]:
    return tuple(section)


def attention_kernel_fields(section: dict[str, Any], name: str, chip: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The Efficiency fields of attention kernel ``name`` on ``chip``, from the chip's FlashAttention-2 figures in
    ``kw`` (already merged over the default chip). Raises ConfigError naming the known kernels."""
    if name not in section:
        known = attention_kernel_names(section)
        raise ConfigError("attention_kernel", name, f"is not a known attention kernel{did_you_mean(name, known)} "
                          f"(one of {', '.join(known)})")
    entry = section[name]
    out: dict[str, Any] = {"attention_kernel": name, "attention_fused": bool(entry.get("fused", True))}
    speeds = entry.get("speed_vs_fa2") or {}
    speed = speeds.get(chip, speeds.get("default"))
    source = str(entry.get("source", ""))
    if not out["attention_fused"]:
        out["attention_source"] = source
        return out
    if speed is None:
        speed = 1.0
        source = f"{name}: no published figure on {chip or 'this chip'}, FlashAttention-2's curve kept"
    require_speed(name, chip, speed)
    for f in _SCALED:
        out[f] = min(1.0, float(kw.get(f, 0.6)) * float(speed))
    out["attention_source"] = source
    return out


def require_speed(name: str, chip: str, speed: Any) -> None:
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed <= 4:
        raise ConfigError(f"efficiency.attention_kernels.{name}.speed_vs_fa2.{chip or 'default'}", speed,
                          "must be a number in (0, 4]")
