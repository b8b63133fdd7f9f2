"""`greentrain offload train`: plan, then train a llama under the caps with the executor, and report what was
measured next to what the planner predicted. Every check runs before the first tensor is allocated."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.model.load import load_model
from greentrain.offload.config import (
    EXECUTORS,
    OffloadCaps,
    OffloadPolicy,
    offload_framework,
    stock_executor,
    stock_policy,
)
from greentrain.offload.plan import OffloadPlan, plan_offload
from greentrain.scenario import scenario_from_dict


def _device(name: str) -> str:
    if name == "cpu":
        return name  # no torch import before the checks that refuse in one line
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("offload.device", name, "no CUDA device is available; use offload.device cpu")
    return name


RUNTIME_SLACK_BYTES = 4 * units.GIB  # Python, torch's libraries, thread stacks and allocator arenas above the caps


def available_host_bytes(meminfo: str | Path = "/proc/meminfo") -> float:
    """Memory a new allocation can take now without swapping: the kernel's MemAvailable (Linux >= 3.14,
    kB = KiB), else the free pages (os.sysconf); inf where neither is known."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(meminfo).read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * units.KIB
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError):
        return float("inf")


def check_host_memory(caps: OffloadCaps, device: str, available_bytes: float) -> float:
    """The host bytes the run may use (the host cap; on CPU the emulated device's cap too, since its tensors
    live in host memory), refused in one line when the machine does not have them available."""
    need = caps.host_bytes + (caps.device_bytes if device == "cpu" else 0.0)
    if need > available_bytes:
        gib = units.bytes_to_gib
        what = "host cap + the CPU-emulated device cap" if device == "cpu" else "host cap"
        raise ConfigError("offload.host_gib", round(gib(caps.host_bytes), 3),
                          f"the {what} ({gib(need):.1f} GiB) is more than this machine has available "
                          f"({gib(available_bytes):.1f} GiB, /proc/meminfo MemAvailable); give a smaller cap")
    return need


def _data_bytes() -> float:
    """This process's private writable memory now (VmData of /proc/self/status, what RLIMIT_DATA counts)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmData:"):
                return float(line.split()[1]) * units.KIB
    return 0.0


@contextlib.contextmanager
def host_memory_capped(limit_bytes: float) -> Iterator[None]:
    """RLIMIT_DATA set to what the process holds now + ``limit_bytes`` + RUNTIME_SLACK_BYTES while the block
    runs, then put back: an allocation past the cap fails in this process (torch raises, the CLI says so in one
    line) instead of the kernel's OOM killer ending it, or another process, at the machine's limit."""
    old = resource.getrlimit(resource.RLIMIT_DATA)
    cap = int(_data_bytes() + limit_bytes + RUNTIME_SLACK_BYTES)
    if old[0] != resource.RLIM_INFINITY and old[0] <= cap:
        yield  # a tighter limit is already set
        return
    resource.setrlimit(resource.RLIMIT_DATA, (cap, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, old)


def make_plan(model: str, caps: OffloadCaps, seq_len: int, micro_batches: int, chip: str, device: str,
              host_link: str = "", downgrade: bool = True, executor: str = "greentrain",
              host_threads: int | None = None) -> tuple[Any, OffloadPlan]:
    """The spec and the plan the executor will follow (fp32 on CPU, bf16 on CUDA): the pytorch framework's best
    placement for greentrain's executor, a stock executor's own placement priced (offload/config.py); for the
    step the run takes (``micro_batches`` rounds and one optimizer step, the host AdamW on ``host_threads``)
    and the model it builds: offload/llama.py's head is its own matrix, so the plan counts an untied head
    whatever the model's config says (Llama 3.2 1B ties it: 262.7 M parameters more, 1.96 GiB of bf16 state)."""
    from greentrain.offload.llama import TINY_LLAMA

    spec = dataclasses.replace(load_model(TINY_LLAMA if model == "tiny" else model), tied_embeddings=False)
    precision = "bf16" if device == "cuda" else "fp32"
    cluster = {"chip": chip, "num_chips": 1} | ({"host_link": host_link} if host_link else {})
    sc = scenario_from_dict({"model": spec.to_dict(), "cluster": cluster,
                             "workload": {"seq_len": seq_len, "global_batch_size": micro_batches,
                                          "precision": precision}})
    eff = efficiency_for(sc.cluster.chip.name, "ddp")
    if device == "cpu":  # no CUDA context or allocator reserve on an emulated device
        eff = dataclasses.replace(eff, reserved_bytes=0.0)
    state = "bf16" if device == "cuda" else "mixed"  # the masters are the model's dtype: bf16 on CUDA, fp32 on CPU
    if executor == "greentrain":
        policy = OffloadPolicy(downgrade=downgrade, rounds_per_step=micro_batches, host_threads=host_threads)
        return spec, plan_offload(sc, caps, policy, offload_framework("pytorch", state), eff=eff)
    policy = dataclasses.replace(stock_policy(executor, spec.num_layers, downgrade), rounds_per_step=micro_batches,
                                 host_threads=host_threads)
    plan = plan_offload(sc, caps, policy, stock_executor(executor, state), eff=eff)
    if plan.device.total_bytes > caps.device_bytes:  # its placement is fixed: the planner cannot make it fit
        raise ConfigError("offload.device_gib", round(units.bytes_to_gib(caps.device_bytes), 3),
                          f"{executor} keeps {'one layer' if executor == 'fsdp2' else 'every layer'}'s weights and "
                          f"every activation on the device: the planner prices "
                          f"{units.bytes_to_gib(plan.device.total_bytes):.4g} GiB; give a larger cap or use "
                          "offload.executor greentrain")
    return spec, plan


def train_command(*, model: str, caps: OffloadCaps, seq_len: int, steps: int, micro_batches: int, device: str,
                  seed: int, chip: str, framework: str, host_link: str = "", downgrade: bool = True,
                  executor: str = "greentrain") -> dict[str, Any]:
    if framework != "pytorch":
        raise ConfigError("offload.framework", framework, "the executor runs pytorch plans (ml_dataflow predicts only)")
    dev = _check_executor(executor, _device(device))
    need = check_host_memory(caps, dev, available_host_bytes())
    import torch  # its intra-op threads run the executor's host AdamW: the plan prices this machine's

    spec, plan = make_plan(model, caps, seq_len, micro_batches, chip, dev, host_link, downgrade, executor,
                           host_threads=torch.get_num_threads())

    from greentrain.offload.llama import build_llama, synthetic_batch
    from greentrain.offload.stock import one_process_group
    from greentrain.offload.testing import DeviceBytes

    acct = None
    if dev == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, caps.device_bytes / total))
        torch.cuda.reset_peak_memory_stats()
    elif executor == "greentrain":  # a stock library's host copies cannot be told from its device ones on CPU
        acct = DeviceBytes(caps.device_bytes)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    # on CPU the process's own memory is capped (on CUDA the device cap is torch's memory fraction above; the
    # driver's host mappings are not counted right by RLIMIT_DATA, so the host cap is checked, not enforced)
    group = one_process_group(dev) if executor in ("fsdp2", "deepspeed") else contextlib.nullcontext()
    with host_memory_capped(need) if dev == "cpu" else contextlib.nullcontext(), group:
        try:
            trainer = _trainer(executor, build_llama(spec, seed=seed, dtype=dtype), plan, dev, acct, micro_batches)
            stats = [trainer.step(synthetic_batch(spec.vocab_size, micro_batches, 1, seq_len, seed=seed + i))
                     for i in range(steps)]
        except (MemoryError, RuntimeError) as e:
            if isinstance(e, RuntimeError) and "memory" not in str(e).lower():
                raise
            if "cuda" in str(e).lower():
                reached = units.bytes_to_gib(torch.cuda.max_memory_allocated())
                raise ConfigError("offload.device_gib", round(units.bytes_to_gib(caps.device_bytes), 3),
                                  f"the run needed more device memory than its cap (peak {reached:.1f} GiB "
                                  "allocated before an allocation failed; the plan's estimate was short): give a "
                                  "larger cap") from None
            raise ConfigError("offload.host_gib", round(units.bytes_to_gib(caps.host_bytes), 3),
                              f"the run needed more host memory than its cap ({units.bytes_to_gib(need):.1f} GiB "
                              "with the emulated device): give a larger cap or a smaller model/sequence") from None
    return _result(executor, spec, dev, plan, chip, caps, seq_len, micro_batches, stats, acct is not None)


def _result(executor: str, spec: Any, dev: str, plan: OffloadPlan, chip: str, caps: OffloadCaps, seq_len: int,
            micro_batches: int, stats: list[Any], accounted: bool) -> dict[str, Any]:
    """What `offload train` prints: measured per run and per step, beside the plan's prediction."""
    import torch

    steps = len(stats)
    acct = accounted
    timed = stats[1:] or stats  # the first step warms up
    tps = sum(s.tokens for s in timed) / sum(s.step_time_s for s in timed)
    flop_per_token = plan.mfu * _peak(plan, chip) * plan.step_time_s / plan.tokens_per_step
    gib = units.bytes_to_gib
    return {
        "executor": executor, "model": spec.name, "device": dev, "chip_for_prediction": plan.chip,
        "seq_len": seq_len, "steps": steps,
        "micro_batches": micro_batches, "device_gib": gib(caps.device_bytes), "host_gib": gib(caps.host_bytes),
        "losses": [s.loss for s in stats], "tokens_per_s": tps,
        "mfu": tps * flop_per_token / _peak(plan, chip) if dev == "cuda" else None,
        "device_peak_gib": gib(max(s.device_peak_bytes for s in stats)) if dev == "cuda" or acct else None,
        "host_peak_gib": gib(max(s.host_bytes for s in stats)),
        "h2d_gb": stats[-1].h2d_bytes / units.GB, "d2h_gb": stats[-1].d2h_bytes / units.GB,
        # per step (the first includes the trainer's first loads): the next GPU session splits the step with these
        "step_times_s": [s.step_time_s for s in stats], "optimizer_times_s": [s.optimizer_time_s for s in stats],
        "step_h2d_gb": [(b - a) / units.GB for a, b in itertools.pairwise([0, *(s.h2d_bytes for s in stats)])],
        "step_d2h_gb": [(b - a) / units.GB for a, b in itertools.pairwise([0, *(s.d2h_bytes for s in stats)])],
        "placement": {"resident_layers": plan.resident_layers, "activation_slots": plan.slots()},
        "predicted": {"tokens_per_s": plan.tokens_per_s, "mfu": plan.mfu, "device_gib": gib(plan.device.total_bytes),
                      "host_gib": gib(plan.host.total_bytes), "bound": plan.bound, "step_time_s": plan.step_time_s,
                      "optimizer_time_s": plan.optimizer_time_s, "host_copy_time_s": plan.host_copy_time_s,
                      "num_rounds": plan.num_rounds, "host_threads": torch.get_num_threads()},
        "note": "" if dev == "cuda" else "CPU run: tokens/s is the CPU's and the prediction is for the chip named; "
                + ("the device is a byte budget (DeviceBytes)" if acct else f"{executor}'s host and device are one "
                   "memory here, so no device peak is measured; host_peak_gib is the process's peak RSS growth"),
    }


def _check_executor(executor: str, dev: str) -> str:
    """The device, once the executor is known and can run on it (its library installed, CUDA where needed)."""
    if executor not in EXECUTORS:
        raise ConfigError("offload.executor", executor, f"must be one of {', '.join(EXECUTORS)}")
    if executor != "greentrain":
        from greentrain.offload.stock import unavailable

        reason = unavailable(executor, dev)
        if reason:
            raise ConfigError("offload.executor", executor, reason)
    return dev


def _trainer(executor: str, model: Any, plan: OffloadPlan, dev: str, acct: Any, micro_batches: int) -> Any:
    """greentrain's StreamingTrainer under the plan, or a stock executor (offload/stock.py) in a world of one."""
    from greentrain.offload.llama import stack_of
    from greentrain.offload.train import StreamingTrainer

    if executor == "greentrain":
        return StreamingTrainer(stack_of(model), plan, device=dev, accountant=acct, max_grad_norm=1.0)
    from greentrain.offload.stock import StockTrainer

    return StockTrainer(executor, model, device=dev, grad_accum=micro_batches, max_grad_norm=1.0)


def _peak(plan: OffloadPlan, chip: str) -> float:
    """The chip's bf16 dense peak: the planner's MFU and the measured one use the same denominator."""
    from greentrain.hardware.catalog import get_chip

    return get_chip(chip).peak_flop_per_s("bf16")
