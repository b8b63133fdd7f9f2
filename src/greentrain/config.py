"""YAML/JSON files -> plain mappings -> checked values for the frozen dataclasses.

Every reader names the field in dotted form (``model.num_layers``) so that a bad value gives a one-line
ConfigError naming the field, the value and the rule. Unknown keys are rejected with a "did you mean".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.errors import ConfigError, did_you_mean

# Limits on what a user's file may hold (docs/bad-input.md): each is refused at once, with the limit named.
MAX_INPUT_BYTES = 16 * 2**20  # scenario, devices, runs CSV, model config: kilobytes in practice
MAX_YAML_NODES = 100_000  # values after expanding YAML aliases (a "billion laughs" file expands to 10**9)
MAX_NESTING = 64  # levels of nested lists and mappings

# Ranges of run sizes: wide enough for any real run, narrow enough that a slip (1e40) is refused instead of
# printed as 1.6e29 days. The largest published pre-training runs use ~4e13 tokens (Llama 4, Qwen3: 30-40 T).
MAX_TOKENS = 1e16  # 250x those
MAX_STEPS = 10**10
MAX_EPOCHS = 1e6
MAX_BATCH_SEQUENCES = 10**8
MAX_SEQ_LEN = 10**8  # 100 M tokens per sequence (published long-context models reach 10 M)
MAX_SHAPE = 10**9  # any layer count, width, degree or batch given as a plain integer
MIN_LINK_BYTES_PER_S = 1e3  # 8 kbit/s: slower than any network a training run has used
MAX_LINK_BYTES_PER_S = 1e15  # 8 Pbit/s: above any single link (NVLink 5: 1.8e12 B/s)
MAX_DEVICE_FLOP_PER_S = 1e19  # 10 EFLOP/s per device: ~5,000x a B200 at fp8 dense
MAX_NAME_CHARS = 255  # a name (model, run, chip) may become a file name: NAME_MAX of Linux file systems
MAX_PATH_CHARS = 4096  # a path a user names: PATH_MAX of Linux


def _num(x: float) -> str:
    """16,777,216 as such, 1e+14 and 0.001 as ``g`` prints them."""
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e9 else f"{x:g}"


@dataclass(frozen=True, slots=True)
class Bound:
    """The range of one kind of input, in SI or the unit its name says, with the reason for its ends.

    Ends are physical or published extremes with a wide margin: a value a real user could run is never
    refused; a slip (1e9 for a PUE, 1e12 layers) is, in one line naming the field, the value and the range.
    """

    lo: float
    hi: float
    unit: str
    reason: str
    lo_open: bool = False  # (lo, hi] instead of [lo, hi]

    def rule(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"must be in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}]{unit}: {self.reason}"

    def ok(self, x: float) -> bool:
        if not isinstance(x, int) and not math.isfinite(x):  # an int is compared exactly (10**400 has no float)
            return False
        return (x > self.lo if self.lo_open else x >= self.lo) and x <= self.hi

    def check(self, value: Any, field: str) -> float:
        """``value`` as a finite float inside the range, else a ConfigError naming ``field``."""
        x = as_float(value, field)
        require(self.ok(x), field, value, self.rule())
        return x

    def check_int(self, value: Any, field: str) -> int:
        n = as_int(value, field)
        require(self.ok(n), field, value, self.rule())
        return n


# The one table of input ranges (docs/bad-input.md): flags (cli/argtypes.bounded) and files (Bound.check) use it.
BOUNDS: dict[str, Bound] = {
    # site
    "pue": Bound(1.0, 3.0, "", "facility / IT energy: surveyed data centres average 1.56, the least efficient "
                 "report ~2.5 (Uptime Institute 2024)"),
    "grid_g_co2e_per_kwh": Bound(0.0, 2000.0, "g CO2e/kWh", "lignite plants emit ~1,100-1,200 g/kWh; the most "
                                 "carbon-intensive national grids ~1,000 (IPCC AR5 WG3 Annex III; Ember 2024)"),
    "electricity_usd_per_kwh": Bound(0.0, 10.0, "USD/kWh", "retail prices peaked near 1 USD/kWh (EU, 2022)"),
    # run length and power
    "sample_interval_s": Bound(1e-3, 60.0, "s", "RAPL counters update every ~1 ms (NVML power every 20-100 ms); "
                               "a RAPL package counter wraps at max_energy_range_uj (262 kJ on Intel servers: ~9 "
                               "min at 500 W) and a sampler that misses a wrap loses its energy; a killed run "
                               "loses its last interval (CodeCarbon samples every 15 s)"),
    "duration_s": Bound(0.0, 10 * 365.25 * units.DAY_S, "s", "10 years: longer than an accelerator's service life"),
    "deadline_days": Bound(0.0, 10 * 365.25, "days", "10 years: longer than an accelerator's service life",
                           lo_open=True),
    "chip_power_w": Bound(0.0, 1e5, "W", "a wafer-scale Cerebras WSE-3 draws ~23 kW; a GPU 0.3-1.4 kW"),
    "budget_usd": Bound(0.0, 1e12, "USD", "the largest training runs are costed at ~1e9 USD", lo_open=True),
    "usd_per_chip_hour": Bound(0.0, 1e4, "USD/h", "clouds rent accelerators for 1-15 USD per chip-hour"),
    "hardware_usd_per_chip": Bound(0.0, 1e8, "USD", "a GPU costs 1e4-5e4 USD, a wafer-scale system ~3e6"),
    "lifetime_years": Bound(0.0, 30.0, "years", "accelerators are amortised over 3-6 years", lo_open=True),
    "cpu_tdp_w": Bound(0.5, 1e4, "W", "a Raspberry Pi's SoC draws ~1-7 W; server CPUs are <= 500 W per socket "
                       "(AMD EPYC 9965), 8 sockets ~4 kW"),
    "host_memory_gib": Bound(0.0, 1e5, "GiB", "the largest single hosts hold 32 TiB (HPE Superdome Flex)"),
    "chip_memory_bytes": Bound(0.0, 1e14, "bytes", "the largest accelerator memories are 2.9e11 bytes (288 GB "
                               "HBM3e: B300, MI355X)", lo_open=True),
    "device_memory_gib": Bound(0.0, 1e5, "GiB", "the largest accelerator memories are 268 GiB (B300, MI355X)",
                               lo_open=True),
    "chip_memory_bytes_per_s": Bound(1e9, 1e17, "bytes/s", "one DDR3 channel gives 1.3e10, HBM3e 8e12, a "
                                     "Cerebras WSE-3's SRAM 2.1e16"),
    "chip_flop_per_s": Bound(1e9, MAX_DEVICE_FLOP_PER_S, "FLOP/s", "one CPU core gives ~1e11 with AVX-512, a "
                             "Cerebras WSE-3 1.25e17 (0: the chip has no such peak)"),
    # factors
    "usd_per_hour": Bound(0.0, 1e5, "USD/h", "an 8-GPU cloud machine rents for 20-100 USD/h"),
    "storage_usd_per_gb_month": Bound(0.0, 10.0, "USD/GB-month", "cloud object storage costs 0.001-0.03"),
    "storage_months": Bound(0.0, 1200.0, "months", "100 years: longer than any storage contract", lo_open=True),
    "step_time_s": Bound(1e-6, 1e6, "s", "one optimizer step runs at least one kernel (~5 us to launch); 1e6 s "
                         "(11.6 days) per step would take decades per run"),
    "bucket_mb": Bound(0.0, 1e6, "MB", "torch DDP buckets 25 MB by default; 1e6 MB holds any model's gradients in "
                       "one bucket"),
    "rank_timeout_s": Bound(1.0, 7 * units.DAY_S, "s", "ranks import torch and meet over TCP in 1-10 s (a store "
                            "given less than 1 s cannot reach itself); an emulation that needs a week has hung"),
    "learning_rate": Bound(0.0, 1e3, "", "Adam uses 1e-5 to 1e-2; large-batch SGD with LARS tens (arXiv "
                           "1708.03888)", lo_open=True),
    "num_threads": Bound(1, 4096, "threads", "the largest hosts have ~1,000 hardware threads"),
    "slowdown": Bound(1e-3, 1e4, "x", "a device 10,000x slower than its peers has failed; measured stragglers "
                      "are 1.1-10x (MegaScale, arXiv 2402.15627)"),
    # counts (model shapes: published extremes x 10 or more)
    "num_layers": Bound(1, 1e4, "layers", "DeepNet trained 1,000 layers (arXiv 2203.00555)"),
    "width": Bound(1, 1e6, "", "the widest published models have hidden sizes ~2e4 and FFNs ~1e5"),
    "vocab_size": Bound(1, 1e7, "tokens", "the largest vocabularies have ~2.6e5 entries (Gemma 3)"),
    "num_heads": Bound(1, 1e5, "heads", "published models use <= 128 attention heads"),
    "seq_len": Bound(1, MAX_SEQ_LEN, "tokens", "published long-context models reach 1e7 tokens"),
    "num_experts": Bound(1, 2**21, "experts", "PEER routes over 1,048,576 experts (arXiv 2407.04202)"),
    "seed": Bound(0, 2**32 - 1, "", "at most 2**32 - 1, numpy's legacy seed range (np.random.seed, which "
                  "transformers' set_seed calls; torch's manual_seed overflows past 2**64)"),
    "num_chips": Bound(1, 2**24, "chips", "the largest clusters have a few 1e5 accelerators (2025)"),
    "chips_per_node": Bound(1, 16384, "chips", "the largest scale-up domain is a TPU v7 pod of 9,216 chips"),
    "examples": Bound(1, 1e6, "examples", "a data file is at most 1 GiB (~1e6 rows of ~1 kB) and synthetic examples "
                      "are generated in memory (~1 kB each)"),
    "example_tokens": Bound(1, 65536, "tokens", "every example is padded to it; long-context seq2seq fine-tuning "
                            "uses <= 16,384 (LongT5)"),
    "rounds": Bound(1, 1e7, "rounds", "a pre-training run takes at most ~1e6 optimizer steps"),
    "batch_tokens": Bound(1, 1e8, "tokens", "the largest published batches are ~6e7 tokens (DeepSeek-V3)"),
    "trials": Bound(1, 1e5, "trials", "Optuna studies run 10-1,000 trials; each trial here trains a variant"),
    # decoding (transformers GenerationConfig)
    "num_beams": Bound(1, 1024, "beams", "summarisation decodes with 1-8 beams (T5, BART: 4); each beam holds a "
                       "copy of the decoder's state"),
    "length_penalty": Bound(-100.0, 100.0, "", "the exponent of the length in a beam's score; summarisation "
                            "uses 0.6-2.0 (BART: 2.0)"),
}


def read_text(path: str | Path, field: str = "path", encoding: str = "utf-8",
              max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The text of a file the user named; a directory, a device, a missing, unreadable, non-UTF-8 or over-large
    (> ``max_bytes``) file is a ConfigError."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(field, str(path), "is a directory, not a file")
    if not p.is_file():
        raise ConfigError(field, str(path), "is not a regular file (a device, pipe or socket)" if p.exists()
                          else "file does not exist")
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise ConfigError(field, str(path), f"is {size / 2**20:.1f} MiB; input files are limited to "
                                                f"{max_bytes // 2**20} MiB")
        return p.read_text(encoding=encoding)
    except UnicodeDecodeError as e:
        raise ConfigError(field, str(path), f"is not a UTF-8 text file (byte 0x{e.object[e.start]:02x} at offset "
                          f"{e.start})") from None
    except OSError as e:
        raise ConfigError(field, str(path), f"cannot be read: {e.strerror or e}") from None


class _TooDeep(Exception):
    pass


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's scanner: linear in open levels


class _UniqueKeyLoader(_BaseLoader):
    """A safe loader that refuses a key given twice in one mapping (PyYAML silently keeps the last one) and,
    in pure Python, stops composing past MAX_NESTING levels (PyYAML's own scanner slows quadratically with
    open levels: 5,000 took 3 s; libyaml's does not)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may override merged keys
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeLoader reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _DuplicateJSONKey(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateJSONKey(key)
        out[key] = value
    return out


def _expanded_size(node: yaml.Node, field: str, path: str) -> int:
    """Values in ``node`` once its aliases are expanded (memoised on the shared nodes, so a bomb is counted
    in microseconds, not expanded); refuses more than MAX_YAML_NODES or deeper than MAX_NESTING."""
    memo: dict[int, int] = {}

    def size(n: yaml.Node, depth: int) -> int:
        if id(n) in memo:
            return memo[id(n)]
        if depth > MAX_NESTING:
            raise ConfigError(field, path, f"nests lists/mappings more than {MAX_NESTING} levels deep")
        total = 1
        if isinstance(n, yaml.SequenceNode):
            total += sum(size(c, depth + 1) for c in n.value)
        elif isinstance(n, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        memo[id(n)] = total
        if total > MAX_YAML_NODES:
            raise ConfigError(field, path, f"expands (through YAML aliases) to more than {MAX_YAML_NODES:,} "
                                           "values")
        return total

    return size(node, 0)


def _load_yaml(text: str, field: str, path: str) -> Any:
    """Compose the node graph, check its expanded size, then construct (PyYAML's merge keys copy nodes, so
    an unchecked file can exhaust memory while being constructed)."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, field, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_mapping(path: str | Path, field: str = "path") -> dict[str, Any]:
    """Read a YAML or JSON file whose top level is a mapping; a key given twice is an error; the file's
    size, nesting and alias expansion are bounded (MAX_INPUT_BYTES, MAX_NESTING, MAX_YAML_NODES)."""
    p = Path(path)
    text = read_text(p, field)
    try:
        if p.suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        else:
            data = _load_yaml(text, field, str(path))  # a SafeLoader subclass
    except (RecursionError, _TooDeep):
        raise ConfigError(field, str(path), f"nests lists/mappings more than {MAX_NESTING} levels deep") from None
    except _DuplicateJSONKey as e:
        raise ConfigError(field, str(path), f"malformed JSON: duplicate key {e.args[0]!r}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(field, str(path), f"malformed JSON at line {e.lineno}: {e.msg}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "syntax error"
        if "nesting depth" in str(problem):  # newer PyYAML bounds nesting itself, before _expanded_size
            raise ConfigError(field, str(path), f"nests lists/mappings more than {MAX_NESTING} levels deep") from None
        raise ConfigError(field, str(path), f"malformed YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(field, str(path), f"top level must be a mapping, got {type(data).__name__}")
    return data


def split_list(text: str, field: str) -> list[str]:
    """A comma-separated list of names (``us-east-1,FRA``); an empty list or an empty item is an error."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ConfigError(field, text, "must be a comma-separated list of names, none of them empty")
    return items


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Reject keys that are not in ``allowed``."""
    allowed_set = set(allowed)
    for key in data:
        if key not in allowed_set:
            raise ConfigError(_join(where, str(key)), data[key], "unknown key" + did_you_mean(str(key), allowed_set))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def as_int(value: Any, field: str, *, minimum: int | None = None) -> int:
    """An integer (a float with no fractional part such as 1e6 is accepted)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, "must be an integer")
    if isinstance(value, str):
        try:
            value = float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            raise ConfigError(field, value, "must be an integer") from None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ConfigError(field, value, "must be an integer")
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(field, value, "must be an integer")
    if minimum is not None and value < minimum:
        raise ConfigError(field, value, f"must be >= {minimum}")
    return value


def as_float(value: Any, field: str, *, minimum: float | None = None, positive: bool = False,
             maximum: float | None = None) -> float:
    if isinstance(value, bool):
        raise ConfigError(field, value, "must be a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "must be a number") from None
    except OverflowError:  # an integer beyond the float range (10**400)
        raise ConfigError(field, value, "must be finite") from None
    if not math.isfinite(x):
        raise ConfigError(field, value, "must be finite")
    if positive and x <= 0:
        raise ConfigError(field, value, "must be > 0")
    if minimum is not None and x < minimum:
        raise ConfigError(field, value, f"must be >= {minimum}")
    if maximum is not None and x > maximum:
        raise ConfigError(field, value, f"must be <= {maximum}")
    return x


def as_bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.lower() in ("true", "yes", "on", "1")
    raise ConfigError(field, value, "must be true or false")


def as_name(value: Any, field: str) -> str:
    """A name from a file (chip, device): a non-blank string, at most MAX_NAME_CHARS, no control character
    (it is printed in one-line messages and tables, and may become a file name)."""
    ok = isinstance(value, str) and bool(value.strip()) and len(value) <= MAX_NAME_CHARS
    require(ok and not any(ord(c) < 32 or c == "\x7f" for c in value), field, value,
            f"must be a non-empty name of at most {MAX_NAME_CHARS} characters without control characters")
    return str(value)


def as_choice(value: Any, field: str, choices: Iterable[str]) -> str:
    options = list(choices)
    s = str(value).lower()
    if s not in options:
        raise ConfigError(field, value, f"must be one of {', '.join(options)}")
    return s


def require_extra(module: str, extra: str, field: str, value: object = None) -> None:
    """Before any work: a feature whose library is an optional extra (torch, matplotlib) that is not installed
    is one line naming the extra to install, not a traceback half-way through (issue 16 item 12)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ConfigError(field, value, f"needs {module}, which is not installed: pip install 'greentrain[{extra}]'")


def require(condition: bool, field: str, value: object, rule: str) -> None:
    """Raise ConfigError(field, value, rule) unless ``condition`` holds."""
    if not condition:
        raise ConfigError(field, value, rule)
