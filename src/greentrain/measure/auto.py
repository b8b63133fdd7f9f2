"""Opt-in automatic measurement: ``import greentrain.auto`` (or GREENTRAIN_AUTO=1 under `greentrain track`),
which imports this module.

- A global ``torch.optim`` step hook marks one step per optimizer step.
- The first module called at the top level, with gradients on and trainable parameters, is taken as the
  model being trained: the module hooks (time, FLOPs, memory per module) go on it, and the record starts.
- At exit the record is closed (status "error" after an uncaught exception).

Settings from the environment: GREENTRAIN_OUT_DIR (default greentrain-out), GREENTRAIN_REGION,
GREENTRAIN_GRID_G_PER_KWH, GREENTRAIN_PUE, GREENTRAIN_DEPTH (default 1; "leaf" for every leaf module).
Under `greentrain track` (GREENTRAIN_CHILD=1) the parent measures energy and memory and writes the outputs;
this process only writes its step and module records (steps.jsonl, steps.rank{r}.jsonl).
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from greentrain.measure.tracker import Tracker


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    return float(value) if value else None


def _make_tracker() -> Tracker:
    child = os.environ.get("GREENTRAIN_CHILD") == "1"
    depth_env = os.environ.get("GREENTRAIN_DEPTH", "1")
    rank = os.environ.get("RANK")
    name = None
    if child:
        name = "steps.jsonl" if rank is None or os.environ.get("WORLD_SIZE", "1") == "1" else f"steps.rank{rank}.jsonl"
    return Tracker(None, region=os.environ.get("GREENTRAIN_REGION") or None,
                   grid_g_per_kwh=_env_float("GREENTRAIN_GRID_G_PER_KWH"), pue=_env_float("GREENTRAIN_PUE"),
                   out_dir=os.environ.get("GREENTRAIN_OUT_DIR", "greentrain-out"),
                   depth=None if depth_env == "leaf" else int(depth_env), meters=not child,
                   write_outputs=not child, jsonl_name=name)


tracker = _make_tracker()
_state: dict[str, Any] = {"depth": 0, "handles": [], "status": "ok", "error": ""}


def _global_pre(module: nn.Module, args: Any) -> None:
    if tracker.hooks is not None:
        return  # attached; these global hooks are removed at the next optimizer step (not mid-call)
    if _state["depth"] == 0 and torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters()):
        if not tracker.running:
            tracker.start()
        tracker.attach(module)
        attached: Any = tracker.hooks
        attached.enter_root_call(args, {})  # this call's own pre-hooks were fixed before attach
        return
    _state["depth"] += 1


def _global_post(_module: nn.Module, _args: Any, _out: Any) -> None:
    if tracker.hooks is None:
        _state["depth"] = max(_state["depth"] - 1, 0)


def _optimizer_step(_opt: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
    if not tracker.running:
        tracker.start()
    tracker.step()
    if tracker.hooks is not None and _state["handles"]:
        for h in _state["handles"]:
            h.remove()
        _state["handles"].clear()


def _excepthook(exc_type: Any, exc: BaseException, tb: Any) -> None:
    _state["status"], _state["error"] = "error", f"{exc_type.__name__}: {exc}"
    _previous_excepthook(exc_type, exc, tb)


def _at_exit() -> None:
    if tracker.running:
        tracker.stop(status=_state["status"], error=_state["error"])


_state["handles"] += [nn.modules.module.register_module_forward_pre_hook(_global_pre),
                      nn.modules.module.register_module_forward_hook(_global_post)]
register_optimizer_step_post_hook(_optimizer_step)
_previous_excepthook = sys.excepthook
sys.excepthook = _excepthook
atexit.register(_at_exit)
