"""Energy meters behind one interface, and process-tree memory/CPU readers (Linux /proc, no torch).

Every meter returns a cumulative reading in joules labelled ``measured`` (a hardware counter) or
``estimated`` (a model of power from utilization). Meters:

- ``NvmlMeter``: NVIDIA's energy counter, ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the
  driver loaded; Volta and newer), per GPU, whole-device (every process on that GPU). Measured.
- ``RaplMeter``: Intel/AMD RAPL package counters ``/sys/class/powercap/intel-rapl:N/energy_uj`` (microjoules,
  wrapping at ``max_energy_range_uj``), whole-socket. Measured, when the files are readable.
- ``CpuEstimateMeter``: CPU TDP x utilization of the tracked process tree, CodeCarbon 3.x's "cpu_load" process
  mode with its TDP table and fallback (measure/codecarbon.py). Estimated.
- ``RamEstimateMeter``: CodeCarbon 3.x's RAM power model on the resident memory. Estimated.

When RAPL is absent (or NVML on a machine with an NVIDIA driver), one line on stderr says which estimate
replaces it.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from greentrain import units
from greentrain.config import require
from greentrain.measure import codecarbon

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_notices: set[str] = set()  # the fallback lines already printed by this process


def notice(text: str) -> None:
    """Print one line to stderr, once per process: a meter fell back to an estimate."""
    if text not in _notices:
        _notices.add(text)
        print(f"greentrain: {text}", file=sys.stderr)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergyReading:
    """Cumulative energy of one meter since it started."""

    name: str  # "gpu", "cpu" or "ram"
    energy_j: float
    measured: bool  # True: a hardware counter; False: a power model
    source: str  # e.g. "nvml:0,1", "rapl:package-0", "estimate: 85 W TDP x utilization"


class EnergyMeter(Protocol):
    name: str

    def read(self) -> EnergyReading: ...

    def close(self) -> None: ...


# --- /proc readers -------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux >= 3.5 /proc/PID/task/*/children; fallback: scan /proc)."""
    kids: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        for task in task_dir.iterdir():
            text = (task / "children").read_text()
            kids.extend(int(x) for x in text.split())
        return kids
    except OSError:
        return kids


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (those alive now)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # fields after "pid (comm) ", comm may contain spaces


def tree_cpu_s(pids: Sequence[int], reaped: bool = False) -> float:
    """User + system CPU seconds of the given processes (all their threads); ``reaped``: with their children
    that have exited and been waited for (a DataLoader worker or a compile pool that ended during the run)."""
    total = 0
    for pid in pids:
        f = _stat_fields(pid)
        if f is not None:
            total += int(f[11]) + int(f[12])  # utime, stime (proc(5): fields 14, 15)
            if reaped:
                total += int(f[13]) + int(f[14])  # cutime, cstime (fields 16, 17)
    return total / _CLK_TCK


def tree_rss_bytes(pids: Sequence[int]) -> float:
    """Resident set size of the given processes (shared pages counted once per process)."""
    total = 0
    for pid in pids:
        f = _stat_fields(pid)
        if f is not None:
            total += int(f[21])  # rss in pages (proc(5): field 24)
    return float(total * _PAGE_BYTES)


class RssReader:
    """Fast resident-memory reader for one process: pread on a kept-open /proc/PID/statm (about 5 us)."""

    def __init__(self, pid: int | None = None) -> None:
        self._fd = os.open(f"/proc/{pid or os.getpid()}/statm", os.O_RDONLY)

    def read_bytes(self) -> float:
        return float(int(os.pread(self._fd, 128, 0).split()[1]) * _PAGE_BYTES)

    def close(self) -> None:
        os.close(self._fd)


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# --- meters --------------------------------------------------------------------------------------


class _Integrator:
    """Integrates a power model between reads (thread-safe; read() may be called from any thread)."""

    def __init__(self, power_w: Callable[[float], float]) -> None:
        self._power_w = power_w
        self._lock = threading.Lock()
        self._t = time.monotonic()
        self._energy_j = 0.0

    def advance(self) -> float:
        with self._lock:
            now = time.monotonic()
            dt = now - self._t
            if dt > 0:
                self._energy_j += self._power_w(dt) * dt
                self._t = now
            return self._energy_j


class CpuEstimateMeter:
    """CPU energy = TDP x sockets / threads x CPU seconds of the process tree (TDP x utilization, integrated):
    CodeCarbon 3.x's process mode, with its TDP table and its 4 W per thread fallback (measure/codecarbon.py).

    Per-process CPU time is tracked so that processes which exit keep their share; ``settle`` adds CPU time
    the samples missed (e.g. the last moments of a child, from its rusage once it is reaped).
    """

    name = "cpu"

    def __init__(self, root_pid: int, tdp_w: float | None = None, threads: int | None = None) -> None:
        model = cpu_model_name()
        if tdp_w is not None:  # CodeCarbon's force_cpu_power: the machine's CPU power at full load
            require(tdp_w > 0, "cpu_tdp_w", tdp_w, "must be > 0")
            n = threads or os.cpu_count() or 1
            self.w_per_cpu_s, source = tdp_w / n, f"given {tdp_w:g} W / {n} threads"
        else:
            self.w_per_cpu_s, source = codecarbon.cpu_power_per_cpu_s(model)
        self.basis = source
        self.source = f"estimate: TDP x utilization ({model}; {source})"
        self._root = root_pid
        self._lock = threading.Lock()
        self._baseline = {p: tree_cpu_s([p]) for p in process_tree(root_pid)}
        self._last: dict[int, float] = dict(self._baseline)
        self._dead_s = 0.0

    @property
    def cpu_s(self) -> float:
        """CPU seconds consumed since the meter started (by processes alive at the last read or since gone)."""
        return self._dead_s + sum(v - self._baseline.get(p, 0.0) for p, v in self._last.items())

    def read(self) -> EnergyReading:
        with self._lock:
            alive = process_tree(self._root)
            now = {p: tree_cpu_s([p]) for p in alive}
            for p, v in self._last.items():
                if p not in now or now[p] < v:  # exited (or pid reused): keep what it had used
                    self._dead_s += v - self._baseline.pop(p, 0.0)
            self._last = {p: v for p, v in now.items() if v > 0 or p in self._baseline}
            energy_j = self.w_per_cpu_s * self.cpu_s
        return EnergyReading(name="cpu", energy_j=energy_j, measured=False, source=self.source)

    def settle(self, total_cpu_s: float) -> None:
        """Raise the consumed CPU time to ``total_cpu_s`` when the samples saw less."""
        with self._lock:
            missing = total_cpu_s - self.cpu_s
            if missing > 0:
                self._dead_s += missing

    def close(self) -> None:
        pass


class RamEstimateMeter:
    """RAM energy = CodeCarbon 3.x's RAM power (DIMMs estimated from memory size, 5 W each on x86, at least
    10 W; measure/codecarbon.py) of the process tree's resident memory, integrated over time."""

    name = "ram"

    def __init__(self, root_pid: int) -> None:
        self._root = root_pid
        self._integrator = _Integrator(
            lambda _dt: codecarbon.ram_power_w(tree_rss_bytes(process_tree(self._root))))

    def read(self) -> EnergyReading:
        return EnergyReading(name="ram", energy_j=self._integrator.advance(), measured=False,
                             source="estimate: CodeCarbon 3.x RAM model (5 W per DIMM, >= 10 W)")

    def close(self) -> None:
        pass


class RaplMeter:
    """Sum of the RAPL package counters; raises OSError at construction when none is readable."""

    name = "cpu"
    ROOT = Path("/sys/class/powercap")

    def __init__(self) -> None:
        self._zones = [z for z in sorted(self.ROOT.glob("intel-rapl:*")) if z.name.count(":") == 1]
        if not self._zones:
            raise OSError("no RAPL package zone under /sys/class/powercap")
        self._max = [float((z / "max_energy_range_uj").read_text()) for z in self._zones]
        self._last = [self._raw(z) for z in self._zones]  # raises PermissionError when unreadable
        self._energy_j = 0.0
        self._lock = threading.Lock()

    @staticmethod
    def _raw(zone: Path) -> float:
        return float((zone / "energy_uj").read_text())

    def read(self) -> EnergyReading:
        with self._lock:
            for i, zone in enumerate(self._zones):
                now = self._raw(zone)
                delta = now - self._last[i]
                if delta < 0:  # the counter wrapped at max_energy_range_uj
                    delta += self._max[i]
                self._energy_j += delta * units.UJ_J
                self._last[i] = now
            names = ",".join(z.name for z in self._zones)
            return EnergyReading(name="cpu", energy_j=self._energy_j, measured=True, source=f"rapl:{names}")

    def close(self) -> None:
        pass


class NvmlMeter:
    """NVML total-energy counter of the given GPUs (NVML indices); raises OSError without a usable GPU."""

    name = "gpu"

    def __init__(self, indices: Sequence[int] | None = None) -> None:
        try:
            import pynvml
        except ImportError as e:
            raise OSError("nvidia-ml-py is not installed") from e
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._nvml: Any = pynvml
            self._indices = list(range(count)) if indices is None else [i for i in indices if i < count]
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self._indices]
            if not self._handles:
                raise OSError("no NVIDIA GPU")
            # NVMLError_NotSupported before Volta: the caller falls back to another meter
            self._start_mj = [pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self._handles]
            self.names = [str(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
        except (pynvml.NVMLError, OSError) as e:
            with contextlib.suppress(Exception):  # initialised or not: leave NVML as we found it
                pynvml.nvmlShutdown()
            raise OSError(f"NVML: {e}") from e

    def read(self) -> EnergyReading:
        mj = sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) - s
                 for h, s in zip(self._handles, self._start_mj, strict=True))
        return EnergyReading(name="gpu", energy_j=mj * 1e-3, measured=True,
                             source="nvml:" + ",".join(str(i) for i in self._indices))

    def utilization_percent(self) -> float | None:
        """Mean over the meter's GPUs of NVML's utilisation: the percent of the last sample period (1/6 s to 1 s,
        by product) in which a kernel ran (NVML API reference, nvmlUtilization_t); None where unsupported."""
        try:
            rates = [float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles]
        except Exception:  # NotSupported (some vGPUs), a driver hiccup: a missing reading, not a failed run
            return None
        return sum(rates) / len(rates)

    def close(self) -> None:
        # shutdown of a library we no longer use must not mask the run's outcome
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def visible_gpu_indices() -> list[int] | None:
    """NVML indices named in CUDA_VISIBLE_DEVICES (numeric form only), or None for all."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None or not env.strip():
        return None
    try:
        return [int(x) for x in env.split(",") if x.strip()]
    except ValueError:  # UUIDs or MIG names: measure every GPU
        return None


def prepare_estimates() -> None:
    """Load CodeCarbon's CPU table and match this CPU now (about 0.05 s), so that meters built later (right
    after a tracked command starts) cost nothing."""
    codecarbon.match_cpu(cpu_model_name())


def _rapl_readable() -> bool:
    try:
        RaplMeter()
    except OSError:
        return False
    return True


def default_meters(root_pid: int, *, cpu_tdp_w: float | None = None, gpu: bool = True,
                   rapl: bool = True, gpu_indices: Sequence[int] | None = None,
                   host: bool = True) -> list[EnergyMeter]:
    """The best meter available for GPU, CPU and RAM: measured where possible, else estimated. ``host=False``:
    the GPU alone (another process meters this node's CPU and RAM); ``rapl=False`` with a readable RAPL counter:
    no CPU meter either (the process allowed RAPL reads the whole socket, this one's CPU included)."""
    meters: list[EnergyMeter] = []
    if gpu:
        try:
            meters.append(NvmlMeter(gpu_indices if gpu_indices is not None else visible_gpu_indices()))
        except OSError as e:  # no NVIDIA GPU, or no nvidia-ml-py: say so only when a GPU is there
            if Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia").exists():
                notice(f"GPU energy not measured ({e}); install greentrain[gpu] for NVML")
    if not host:
        return meters
    if not rapl and cpu_tdp_w is None and _rapl_readable():
        return [*meters, RamEstimateMeter(root_pid)]
    cpu: EnergyMeter | None = None
    if rapl and cpu_tdp_w is None:
        try:
            cpu = RaplMeter()
        except OSError as e:
            cpu = None
            reason = str(e)
    if cpu is None:
        estimate = CpuEstimateMeter(root_pid, cpu_tdp_w)
        if rapl and cpu_tdp_w is None:
            notice(f"no RAPL counter ({reason}): CPU energy estimated, {estimate.basis}")
        cpu = estimate
    meters.append(cpu)
    meters.append(RamEstimateMeter(root_pid))
    return meters
