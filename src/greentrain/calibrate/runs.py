"""Measured (or planned) training runs read from a runs CSV: one Scenario with its Strategy per row, and what
was measured. The schema is docs/runs-csv.md (every column with its unit, rule and default): unknown columns are
an error, an empty cell means "not given".

Every bad cell is one ConfigError naming the row's run_id, the column, the value and the rule; the whole file is
checked before anything is predicted.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from greentrain import units
from greentrain.config import BOUNDS, read_text
from greentrain.errors import ConfigError, GreentrainError, csv_errors, did_you_mean
from greentrain.estimate.efficiency import DEFAULT_FRAMEWORK, Efficiency, efficiency_for, framework_names
from greentrain.estimate.fp8 import check_chip
from greentrain.estimate.recompute import MEGATRON_MODULES, check_selective_mode
from greentrain.hardware.catalog import get_chip
from greentrain.model.finetune import FULL
from greentrain.model.load import load_model
from greentrain.model.spec import TransformerSpec
from greentrain.parallel.fields import CSV_COLUMNS
from greentrain.parallel.strategy import RECOMPUTE, Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import OPTIMIZER_DTYPES, Workload, finetune_from_dict

IDENTITY = ("run_id", "source", "framework", "attention_kernel", "loss_kernel")
SCENARIO = ("model", "chip", "num_chips", "chips_per_node", "seq_len", "global_batch", "micro_batch", "precision")
# optional (docs/runs-csv.md)
WORKLOAD = ("finetune", "lora_rank", "lora_targets", "lora_dtype", "lora_dropout", "optimizer_dtype", "fp8_recipe",
            "fp8_weights")
STRATEGY = CSV_COLUMNS  # parallel/fields.py: the Strategy fields a runs CSV may give
MEASURED = ("status", "measured_step_time_s", "measured_tokens_per_s_per_chip", "measured_mfu",
            "measured_peak_memory_gib")
COLUMNS = IDENTITY + SCENARIO + WORKLOAD + STRATEGY + MEASURED
REQUIRED = ("run_id", "model", "chip", "num_chips", "seq_len", "global_batch")
STATUSES = ("ok", "failed")
MAX_ROWS = 1_000_000
# the CSV's column where a Workload or Strategy field has another name (an error names the column)
_COLUMN_OF = {"global_batch_size": "global_batch", "micro_batch_size": "micro_batch"}
_TRUE, _FALSE = ("true", "yes", "1", "y", "t"), ("false", "no", "0", "n", "f")


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """What was measured of one run; None where the CSV does not say."""

    status: str | None = None  # "ok" (it ran) or "failed" (crashed or out of memory)
    step_time_s: float | None = None
    tokens_per_s_per_chip: float | None = None
    mfu: float | None = None
    peak_memory_bytes: float | None = None

    @property
    def ran(self) -> bool | None:
        return None if self.status is None else self.status == "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One row: the scenario (its strategy set), where it comes from, and what was measured."""

    run_id: str
    source: str
    framework: str  # "" when not given
    scenario: Scenario
    measured: Measured
    selective_recompute: str = ""  # what its selective recomputation saves ("": the framework's)
    attention_kernel: str = ""  # the kernel it ran ("": the framework's)
    loss_kernel: str = ""

    @property
    def strategy(self) -> Strategy:
        assert self.scenario.strategy is not None
        return self.scenario.strategy

    @property
    def group(self) -> tuple[str, int]:
        """Runs of one model on one number of chips: the choices a user compares."""
        return (self.scenario.model.name, self.scenario.cluster.num_chips)


class _Row:
    """Typed access to one CSV row; every error names the run, the column, the value and the rule."""

    def __init__(self, cells: dict[str, str], run_id: str) -> None:
        self.cells, self.run_id = cells, run_id

    def _fail(self, col: str, value: object, rule: str) -> ConfigError:
        return ConfigError(f"runs[{self.run_id}].{_COLUMN_OF.get(col, col)}", value, rule)

    def text(self, col: str, default: str = "") -> str:
        return (self.cells.get(col) or "").strip() or default

    def number(self, col: str, rule: str = "must be a finite number >= 0") -> float | None:
        raw = self.text(col)
        if not raw:
            return None
        try:
            v = float(raw)
        except ValueError:
            raise self._fail(col, raw, "must be a number") from None
        if not math.isfinite(v) or v < 0:
            raise self._fail(col, raw, rule)
        return v

    def integer(self, col: str, default: int | None = None, minimum: int = 1) -> int:
        v = self.number(col, f"must be an integer >= {minimum}")
        if v is None:
            if default is None:
                raise self._fail(col, "", "is required")
            return default
        if v != int(v) or v < minimum:
            raise self._fail(col, self.text(col), f"must be an integer >= {minimum}")
        return int(v)

    def boolean(self, col: str, default: bool) -> bool:
        raw = self.text(col).lower()
        if not raw:
            return default
        if raw in _TRUE or raw in _FALSE:
            return raw in _TRUE
        raise self._fail(col, raw, "must be true or false")

    def choice(self, col: str, options: tuple[str, ...], default: str) -> str:
        raw = self.text(col).lower() or default
        if raw not in options:
            raise self._fail(col, raw, f"must be one of {', '.join(options)}")
        return raw


def _check_header(header: list[str], path: Path) -> None:
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise ConfigError(f"{path.name} column", unknown[0],
                          f"is not a runs column{did_you_mean(unknown[0], COLUMNS)} (the columns: "
                          "docs/runs-csv.md)")
    twice = [c for i, c in enumerate(header) if c in header[:i]]
    if twice:  # csv.DictReader keeps the last cell of a column named twice, without a word
        raise ConfigError(f"{path.name} column", twice[0], "is named twice in the header: each column once")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ConfigError(f"{path.name} column", missing[0], f"is missing: a runs CSV needs {', '.join(REQUIRED)}")


def _recompute(r: _Row, default: str) -> tuple[str, str]:
    """(strategy recompute, selective mode) of the recompute cell: none, selective, full, or a selective mode
    (attention, op, layer-N, Megatron Core modules joined by +: estimate/recompute.py); empty: the framework's
    default_recompute."""
    raw = r.text("recompute").lower() or default
    if raw in RECOMPUTE:
        return raw, ""
    try:
        return "selective", check_selective_mode(raw)
    except ConfigError:
        raise r._fail("recompute", raw, f"must be one of {', '.join(RECOMPUTE)}, or a selective mode: attention, "
                      f"op, layer-N (N >= 1), or Megatron Core modules joined by + ({', '.join(MEGATRON_MODULES)})"
                      ) from None


def _strategy(r: _Row, num_chips: int, recompute: str, fw: Efficiency | None) -> Strategy:
    """The row's strategy; an empty zero cell is its framework's default_zero (the nemo family's distributed
    optimizer 1, the FSDP frameworks' full sharding 3), and a MoE row with ep > 1 and no etp cell takes its
    framework's default_etp (Megatron-Bridge's MoE presets: expert tensor parallelism 1)."""
    default_etp, default_zero = (int(fw.default_etp), int(fw.default_zero)) if fw else (0, 0)
    tp, pp, cp = r.integer("tp", 1), r.integer("pp", 1), r.integer("cp", 1)
    inner = tp * pp * cp
    dp_given = r.number("dp", "must be an integer >= 1")
    dp = r.integer("dp", num_chips // inner if num_chips % inner == 0 else 0, minimum=1) if dp_given is not None \
        else num_chips // inner
    if dp * inner != num_chips:
        raise r._fail("dp" if dp_given is not None else "num_chips", dp if dp_given is not None else num_chips,
                      f"dp*tp*pp*cp = {dp}*{tp}*{pp}*{cp} = {dp * inner} must equal num_chips = {num_chips}")
    ep = r.integer("ep", 1)
    etp = r.integer("etp", default_etp if ep > 1 else 0, minimum=0)  # 0: as tp (Megatron Core's default)
    vpp, sp, zero = r.integer("vpp", 1), r.boolean("sp", False), r.integer("zero", default_zero, minimum=0)  # each
    mb, flash = r.integer("micro_batch", 1), r.boolean("flash_attention", True)  # names its own cell if it fails
    offload = r.integer("offload_activations", 0, minimum=0)
    try:
        return Strategy(dp=dp, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, sp=sp, zero=zero, recompute=recompute,
                        micro_batch_size=mb, flash_attention=flash, offload_activations=offload)
    except ConfigError as e:
        raise r._fail(e.field.removeprefix("strategy."), e.value, e.rule) from None


def _measured(r: _Row) -> Measured:
    status = r.text("status").lower() or None
    if status is not None and status not in STATUSES:
        raise r._fail("status", status, f"must be one of {', '.join(STATUSES)}")
    mem = r.number("measured_peak_memory_gib")
    mfu = r.number("measured_mfu")
    if mfu is not None and mfu > 1:
        raise r._fail("measured_mfu", mfu, "must be a fraction in [0, 1]")
    step = r.number("measured_step_time_s")
    if step is not None and not BOUNDS["step_time_s"].ok(step):  # 1e300 and 1e-300 s were scored
        raise r._fail("measured_step_time_s", step, BOUNDS["step_time_s"].rule())
    if mem is not None and not BOUNDS["device_memory_gib"].ok(mem):
        raise r._fail("measured_peak_memory_gib", mem, BOUNDS["device_memory_gib"].rule())
    tokens = r.number("measured_tokens_per_s_per_chip")
    if status is None and any(v is not None for v in (step, tokens, mfu, mem)):
        status = "ok"  # an empty status with a measured figure: the run ran (docs/runs-csv.md)
    return Measured(status=status, step_time_s=step, tokens_per_s_per_chip=tokens, mfu=mfu,
                    peak_memory_bytes=None if mem is None else units.gib_to_bytes(mem))


class _Models:
    """Model files and presets, loaded once each (a runs CSV names the same few models many times)."""

    def __init__(self, base: Path) -> None:
        self.base, self.cache = base, dict[str, TransformerSpec]()

    def get(self, r: _Row) -> TransformerSpec:
        name = r.text("model")
        if name not in self.cache:
            arg = str(self.base / name) if (self.base / name).exists() else name
            try:
                self.cache[name] = load_model(arg)
            except GreentrainError as e:
                raise r._fail("model", name, f"cannot be loaded ({e})") from None
        return self.cache[name]


def _framework(r: _Row, known: tuple[str, ...]) -> Efficiency | None:
    """The efficiency profile of the row's framework (None when the cell is empty)."""
    name = r.text("framework").lower()
    if not name:
        return None
    if known and name not in known:
        raise r._fail("framework", name, "is not a framework greentrain has a profile for"
                      f"{did_you_mean(name, known)} (or give one framework for every run)")
    return efficiency_for("", name) if name in framework_names() else None


def _workload(r: _Row) -> Workload:
    """The row's workload: one step of its batch; the fine-tuning and precision-recipe cells. optimizer_dtype bf16
    is pure bf16 training (bf16 weights, gradients and Adam moments, no fp32 master: 8 bytes per parameter);
    empty: the optimizer dtype, master copy and grad dtype are left unset, so the estimate takes the framework's
    precision_recipe and grad_dtype as plan and search do (estimate/memory.py workload_grad_dtype)."""
    opt_dtype = r.choice("optimizer_dtype", tuple(OPTIMIZER_DTYPES), "") if r.text("optimizer_dtype") else ""
    cells = {k: r.text(k) for k in ("finetune", "lora_rank", "lora_targets", "lora_dtype", "lora_dropout")
             if r.text(k)}
    if "lora_targets" in cells:  # "q,v" quoted, or "q;v" / "q v" (no comma to quote)
        cells["lora_targets"] = ",".join(cells["lora_targets"].replace(";", " ").replace(",", " ").split())
    try:
        ft = finetune_from_dict(cells, "workload") if cells else FULL
    except ConfigError as e:
        raise r._fail(e.field.split(".")[-1], e.value, e.rule) from None
    return Workload(global_batch_size=r.integer("global_batch"), seq_len=r.integer("seq_len"), num_steps=1,
                    precision=r.choice("precision", ("fp32", "tf32", "bf16", "fp16", "fp8"), "bf16"),
                    optimizer_dtype=opt_dtype, master_weights=(opt_dtype == "fp32") if opt_dtype else None,
                    finetune=ft, fp8_recipe=r.text("fp8_recipe").lower(),
                    fp8_weights=r.boolean("fp8_weights", False) if r.text("fp8_weights") else None)


def _run(r: _Row, models: _Models, links: tuple[str, str], known: tuple[str, ...] = ()) -> Run:
    for col in REQUIRED:
        if not r.text(col):
            raise r._fail(col, "", "is required")
    try:
        chip = get_chip(r.text("chip"))
    except ConfigError as e:
        raise r._fail("chip", r.text("chip"), e.rule) from None
    num_chips = r.integer("num_chips")
    cpn = r.integer("chips_per_node", min(chip.chips_per_node, num_chips))
    fw = _framework(r, known)
    try:
        cluster = build_cluster(chip, num_chips, cpn, intra_node_link=links[0], inter_node_link=links[1])
        workload = _workload(r)
    except ConfigError as e:
        if e.field.startswith("runs["):
            raise
        raise r._fail(e.field.split(".")[-1], e.value, e.rule) from None
    from greentrain.footprint.site import Site

    if workload.fp8_recipe:  # MXFP8 on Blackwell only (estimate/fp8.py)
        try:
            check_chip(workload.fp8_recipe, chip.name)
        except ConfigError as e:
            raise r._fail("fp8_recipe", workload.fp8_recipe, e.rule) from None
    recompute, mode = _recompute(r, fw.default_recompute if fw else "none")
    model = models.get(r)
    try:
        workload.finetune.check(model)
    except ConfigError as e:
        raise r._fail(e.field.split(".")[-1], e.value, e.rule) from None
    strategy = _strategy(r, num_chips, recompute, fw)
    try:  # the scenario's own checks (a sequence past a model's learned positions)
        sc = Scenario(model=model, cluster=cluster, workload=workload, site=Site.from_intensity(0.0, 1.0, "", 0.0),
                      strategy=strategy)
    except ConfigError as e:
        raise r._fail(e.field.split(".")[-1], e.value, e.rule) from None
    attention, loss = _kernels(r, strategy.flash_attention)
    return Run(run_id=r.run_id, source=r.text("source"), framework=r.text("framework").lower(), scenario=sc,
               measured=_measured(r), selective_recompute=mode, attention_kernel=attention, loss_kernel=loss)


def _kernels(r: _Row, flash_attention: bool) -> tuple[str, str]:
    """The row's attention and loss kernels (names of `greentrain plan --attention-kernel / --loss-kernel`; ""
    the framework's). A fused attention kernel beside flash_attention false would be ignored: refused."""
    attention, loss = r.text("attention_kernel").lower(), r.text("loss_kernel").lower()
    if not (attention or loss):
        return attention, loss
    try:  # an unknown name: the error's field is the column (attention_kernel, loss_kernel)
        eff = efficiency_for("", DEFAULT_FRAMEWORK, attention, loss_kernel=loss)
    except ConfigError as e:
        raise r._fail(e.field, e.value, e.rule) from None
    if attention and eff.attention_fused and not flash_attention:
        raise r._fail("attention_kernel", attention, "is a fused kernel: it conflicts with flash_attention false")
    return attention, loss


def read_runs(path: str | Path, *, intra_node_link: str = "", inter_node_link: str = "",
              frameworks: tuple[str, ...] = ()) -> tuple[Run, ...]:
    """Every row of a runs CSV, checked; model files are relative to the CSV's folder. The links (catalog
    names) say what the runs' cluster had where it differs from the chip's catalog links (the runs schema has
    no column for them). ``frameworks``: the names a framework cell may take (empty: any)."""
    p = Path(path)
    text = read_text(p, field="runs").removeprefix("\ufeff")  # Excel's "CSV UTF-8" starts with a byte-order mark
    with csv_errors("runs", p):
        reader = csv.DictReader(text.splitlines(), strict=True)  # an unclosed quote is an error, not a cell
        header = list(reader.fieldnames or [])
        rows = list(itertools.islice(reader, MAX_ROWS + 1))
    _check_header(header, p)
    if len(rows) > MAX_ROWS:
        raise ConfigError("runs", str(p), f"has more than {MAX_ROWS:,} rows")
    models, runs, seen = _Models(p.parent), list[Run](), set[str]()
    for i, cells in enumerate(rows):
        if None in cells:
            raise ConfigError(f"runs[row {i + 2}]", ",".join(cells[None]), "has more cells than the header")
        run_id = (cells.get("run_id") or "").strip() or f"row {i + 2}"
        if run_id in seen:
            raise ConfigError(f"runs[{run_id}].run_id", run_id, "must be unique")
        seen.add(run_id)
        runs.append(_run(_Row(cells, run_id), models, (intra_node_link, inter_node_link), frameworks))
    if not runs:
        raise ConfigError("runs", str(p), "has no rows")
    return tuple(runs)
