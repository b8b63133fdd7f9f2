"""Pinned strategy fields: the part of a strategy a user fixes, and what the planner makes of it.

Pins come from the strategy flags of `plan` and `simulate step` (``--tp 8``) or from the strategy section of a
scenario file given to `search`. They are named by Strategy field (``tp``, ``micro_batch_size``); errors name
``strategy.<field>`` and the CLI maps fields to its flags. The planning rules (they lived in
cli/scenario_args.py):

- With tp, pp, zero, recompute and micro_batch_size pinned (WHOLE), or a schedule or stage layers, the pins
  are a whole strategy: dp is what the chips leave (``num_chips / (tp * pp * cp)``), sp defaults to tp > 1,
  every other field to the file's strategy or Strategy's default (``whole_strategy``).
- Fewer pins fix only what they name; the search chooses the rest among the strategies that keep them
  (``pinned_space``); dp, tp and pp all pinned also pin cp = 1 (the user sized the mesh).
- `search` pins every field a scenario file's strategy sets (``file_pins``); what the vectorised search cannot
  enumerate (a schedule whose record is not ``searched``, e.g. GPipe; pinned stage layers) is refused in one
  line, never dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greentrain.config import load_mapping
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.parallel.schedules import PIPELINE_SCHEDULES, get_schedule, implied_schedule
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, check_schedule

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Profile
    from greentrain.search.space import SearchSpace

DEGREES = ("dp", "tp", "pp", "vpp", "cp", "ep")
WHOLE = frozenset({"tp", "pp", "zero", "recompute", "micro_batch_size"})  # these given: a whole strategy


def pins_only(pins: Mapping[str, Any], sc: Scenario) -> bool:
    """True when ``pins`` leave the search to choose the rest (no scenario strategy, not a whole strategy)."""
    return (bool(pins) and sc.strategy is None and "schedule" not in pins and "stage_layers" not in pins
            and not set(pins) >= WHOLE)


def _choice(pins: Mapping[str, Any], field: str, base: tuple[Any, ...], where: str) -> tuple[Any, ...]:
    if field not in pins:
        return base
    value = pins[field]
    if value not in base:
        raise ConfigError(f"{where}.{field}", value, f"is outside the search space ({', '.join(map(str, base))})")
    return (value,)


def pinned_space(pins: Mapping[str, Any], base: SearchSpace | None = None, where: str = "strategy") -> SearchSpace:
    """``base`` (default: the whole space) with every pinned field fixed; fields it does not pin stay searched.
    A pin the vectorised search cannot keep (a schedule it does not search, uneven stage layers) is a ConfigError."""
    from greentrain.search.space import SearchSpace  # numpy: only when a search runs

    base = base or SearchSpace()
    if pins.get("stage_layers"):
        raise ConfigError(f"{where}.stage_layers", list(pins["stage_layers"]), "cannot be searched (the "
                          "search places layers evenly): plan this strategy with `greentrain plan`, or remove it")
    schedule = get_schedule(str(pins["schedule"]), f"{where}.schedule") if "schedule" in pins else None
    if schedule is not None and not schedule.searched:
        searched = " and ".join(r.name for r in PIPELINE_SCHEDULES.values() if r.searched)
        raise ConfigError(f"{where}.schedule", schedule.name, f"cannot be searched (the search enumerates "
                          f"{searched}): plan this strategy with `greentrain plan`, or remove it")
    degrees: dict[str, Any] = {k: int(pins[k]) for k in DEGREES if k in pins}
    if schedule is not None and not schedule.interleaved and "vpp" not in degrees:  # one model chunk
        degrees["vpp"] = 1
    acts = (int(pins["offload_activations"]),) if "offload_activations" in pins else base.offload_activations
    if acts and min(acts) < 0:
        raise ConfigError(f"{where}.offload_activations", min(acts), "must be a whole number of layers >= 0")
    if acts and min(acts) > 0:  # every choice offloads: activation offloading runs on one pipeline stage
        if degrees.get("pp", 1) != 1:
            raise ConfigError(f"{where}.offload_activations", acts[0], "needs pp = 1 (activation offloading runs "
                              "without pipeline parallelism)")
        degrees["pp"] = 1
    if {"dp", "tp", "pp"} <= set(degrees):  # the user sized the mesh: context parallelism only if asked for
        degrees.setdefault("cp", 1)
    return dataclasses.replace(
        base, **degrees,
        etp=int(pins["etp"]) if "etp" in pins else base.etp,
        sp=bool(pins["sp"]) if "sp" in pins else base.sp,
        micro_batch=int(pins.get("micro_batch_size", base.micro_batch)),
        zero=_choice(pins, "zero", base.zero, where), recompute=_choice(pins, "recompute", base.recompute, where),
        offload=_choice(pins, "offload_optimizer", base.offload, where), offload_activations=acts,
        flash_attention=bool(pins.get("flash_attention", base.flash_attention)))


def file_strategy_section(path: str | Path) -> dict[str, Any]:
    """The strategy section of the scenario file at ``path`` as written ({} when it has none or it is not a
    mapping: the scenario reader refuses that with its own error)."""
    section = load_mapping(path, field="scenario").get("strategy")
    return section if isinstance(section, dict) else {}


def file_pins(path: str | Path, strategy: Strategy | None) -> dict[str, Any]:
    """The fields the strategy section of the scenario file at ``path`` sets, with their parsed values
    (``strategy``, the scenario's Strategy read from that file)."""
    if strategy is None:
        return {}
    section = file_strategy_section(path)
    pins = {k: getattr(strategy, k) for k in section if k in Strategy.__dataclass_fields__}
    if not pins.get("stage_layers", True):  # an empty list: the framework places the layers, nothing pinned
        pins.pop("stage_layers")
    return pins


def _namer(names: Mapping[str, str]) -> Callable[[str], str]:
    return lambda field: names.get(field, f"strategy.{field}")


def whole_strategy(pins: Mapping[str, Any], sc: Scenario, num_chips: int,
                   names: Mapping[str, str] | None = None, default_etp: int = 0) -> Strategy:
    """The pins as a whole strategy over the scenario's (or Strategy's default) other fields; dp is what the
    chips leave, sp defaults to tp > 1 when tp is pinned, etp to the framework's ``default_etp`` (with_default_etp).
    Errors name ``names[field]`` (the CLI passes its flags), else ``strategy.<field>``."""
    name = _namer(names or {})
    base = sc.strategy or Strategy()
    kw = dict(pins)
    if "schedule" in kw:
        check_schedule(str(kw["schedule"]), int(kw.get("vpp", base.vpp)), name("schedule"), name("vpp"))
    tp, pp, cp = int(kw.get("tp", base.tp)), int(kw.get("pp", base.pp)), int(kw.get("cp", base.cp))
    if "dp" not in kw:
        if num_chips % (tp * pp * cp):
            raise ConfigError(f"{name('tp')}/{name('pp')}/{name('cp')}", f"{tp}*{pp}*{cp}",
                              f"must divide the number of chips ({num_chips})")
        kw["dp"] = num_chips // (tp * pp * cp)
    if "sp" not in kw and "tp" in kw:
        kw["sp"] = kw["tp"] > 1
    if "vpp" in kw and "schedule" not in kw and base.schedule == implied_schedule(base.vpp).name:
        kw["schedule"] = ""  # the base's vpp implied its schedule: the pinned vpp implies it now (Strategy.schedule
        # ""); a schedule the base chose (gpipe) is kept and still conflicts with vpp > 1
    return with_default_etp(dataclasses.replace(base, **kw), default_etp)


def with_default_etp(s: Strategy, default_etp: int) -> Strategy:
    """``s`` with the framework's expert tensor parallelism where it uses experts (ep > 1) and gives none (etp 0),
    as a runs CSV row without an etp cell takes it (efficiency default_etp: Megatron-Bridge's MoE presets, 1)."""
    if default_etp and s.ep > 1 and s.etp == 0:
        return dataclasses.replace(s, etp=int(default_etp))
    return s


def apply_pins(sc: Scenario, pins: Mapping[str, Any], num_chips: int,
               names: Mapping[str, str] | None = None, default_etp: int = 0) -> Strategy | None:
    """The strategy a scenario has once ``pins`` are applied: the pins as a whole strategy, or (no pins, or
    pins that leave the rest to the search) the scenario's own strategy, possibly None."""
    if not pins or pins_only(pins, sc):
        return None if sc.strategy is None else with_default_etp(sc.strategy, default_etp)
    return whole_strategy(pins, sc, num_chips, names, default_etp)


def resolve_strategy(sc: Scenario, pins: Mapping[str, Any], profile: Profile | None = None,
                     names: Mapping[str, str] | None = None,
                     memory_headroom: float | None = None) -> tuple[Scenario, bool]:
    """``sc`` with its strategy, and True when the search chose it: the scenario's own (``apply_pins`` has run),
    else the search's fastest within ``pins``. When nothing fits the pins: the pins as a whole strategy
    (defaults for the rest), so that estimating it names the rule it breaks."""
    if sc.strategy is not None:
        return sc, False
    from greentrain.search.engine import best_strategy

    space = pinned_space(pins) if pins_only(pins, sc) else None
    try:
        return sc.with_strategy(best_strategy(sc, space, profile, memory_headroom)), True
    except InfeasibleError:
        if space is None:
            raise
        return sc.with_strategy(whole_strategy(pins, sc, sc.cluster.num_chips, names)), False
