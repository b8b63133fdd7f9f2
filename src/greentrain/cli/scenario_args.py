"""Scenario options shared by `plan`, `search` and `simulate step`: one way to describe a run on the CLI."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from greentrain.cli.argtypes import bounded, finite_float, name_text, path_text, positive_float
from greentrain.cli.argtypes import positive_int as _positive
from greentrain.cli.argtypes import whole as _whole
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.model.finetune import FINETUNE_MODES, LORA_DTYPES
from greentrain.model.loss import LOSS_KERNELS
from greentrain.parallel.fields import STRATEGY_FLAGS, MeshAxis, flag_help
from greentrain.parallel.strategy import RECOMPUTE, SCHEDULES
from greentrain.scenario import (
    DEFAULT_SCENARIO,
    Scenario,
    build_cluster,
    check_sequence,
    load_scenario,
    scenario_from_dict,
    site_from_dict,
)
from greentrain.search.pins import apply_pins, resolve_strategy
from greentrain.workload import (
    FINETUNE_FIELDS,
    FP8_RECIPES,
    GRAD_DTYPES,
    OPTIMIZER_DTYPES,
    OPTIMIZERS,
    Workload,
    finetune_from_dict,
)


def add_scenario_arguments(p: argparse.ArgumentParser, strategy: bool = True) -> None:
    p.add_argument("scenario", nargs="?", type=path_text, help="scenario YAML (default: Llama 3 8B on 64 H100 for "
                   "1T tokens in us-east-1; a file's missing parts take these defaults too)")
    g = p.add_argument_group("model and cluster")
    g.add_argument("--model", type=path_text, help="preset name, model YAML or Hugging Face config.json")
    g.add_argument("--chip", type=name_text, help="chip name from `greentrain catalog chips`, or a chip YAML")
    g.add_argument("--num-chips", type=bounded("num_chips", integer=True))
    g.add_argument("--chips-per-node", type=bounded("chips_per_node", integer=True))
    g.add_argument("--power-limit-w", type=positive_float, metavar="W",
                   help="board power limit per chip (nvidia-smi --power-limit): below the chip's full limit it draws "
                   "at most W and computes at the clock that leaves (default: the catalog's tdp_w)")
    g = p.add_argument_group("workload")
    g.add_argument("--global-batch", type=_positive, help="sequences per optimizer step")
    g.add_argument("--seq-len", type=_positive)
    g.add_argument("--target-seq-len", type=_positive, help="decoder length of an encoder-decoder model")
    g.add_argument("--tokens", type=positive_float, help="training tokens of the whole run")
    g.add_argument("--steps", type=_positive, help="optimizer steps of the whole run (instead of --tokens)")
    g.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16", "fp8"))
    g.add_argument("--fp8-recipe", choices=FP8_RECIPES,
                   help="with --precision fp8: how tensors are scaled: tensorwise (current scaling: torchao, "
                   "NeMo fp8-cs), delayed (amax history: Transformer Engine, Megatron-LM), rowwise (torchao), mxfp8 "
                   "(32-element blocks; Blackwell only). Default: the --framework's (`greentrain catalog frameworks`)")
    g.add_argument("--fp8-weights", action=argparse.BooleanOptionalAction, default=None,
                   help="with --precision fp8: the weights kept and gathered in fp8, 1 byte per parameter "
                   "(Transformer Engine's fp8 primary weights: NeMo fp8_params, Megatron-LM --fp8-param-gather). "
                   "Default: the --framework's (on for nemo and megatron-bridge, whose fp8 presets set it)")
    g.add_argument("--optimizer", choices=OPTIMIZERS)
    g.add_argument("--optimizer-dtype", choices=tuple(OPTIMIZER_DTYPES),
                   help="the optimizer's moments; alone it names the recipe, as a runs CSV's optimizer_dtype: bf16 "
                   "pure bf16 (no fp32 master, bf16 gradients), fp32 mixed precision (default: the framework's)")
    g.add_argument("--master-weights", action=argparse.BooleanOptionalAction, default=None,
                   help="an fp32 master copy of the weights (default: as --optimizer-dtype says, else the "
                   "framework's; none under pure bf16)")
    g.add_argument("--grad-dtype", choices=GRAD_DTYPES, help="gradient accumulation buffer (default: the "
                   "--framework's, `greentrain catalog frameworks`: fp32, bf16 for nemo*; bf16 under pure bf16)")
    g.add_argument("--finetune", choices=FINETUNE_MODES,
                   help="which parameters train: full (default), freeze (the --freeze parts keep their weights) or "
                   "lora (rank --lora-rank adapters on --lora-targets; every base weight frozen)")
    g.add_argument("--freeze", metavar="PART,...", help="with --finetune freeze: embeddings, encoder, decoder")
    g.add_argument("--lora-rank", type=_positive, help="with --finetune lora (default 16)")
    g.add_argument("--lora-targets", metavar="NAME,...",
                   help="with --finetune lora: q, k, v, o, gate, up, down (default q,v as peft)")
    g.add_argument("--lora-dtype", choices=LORA_DTYPES,
                   help="with --finetune lora, the adapters' precision: model (the model's dtype), fp32 (peft's "
                   "default on a bf16 model) or fp32-autocast (the same under autocast, Hugging Face Trainer's "
                   "bf16=True); default: the --framework's")
    g.add_argument("--lora-dropout", type=float, metavar="P",
                   help="with --finetune lora: dropout on each adapter's input, 0 <= P < 1 (default 0: none)")
    g = p.add_argument_group("site")
    g.add_argument("--region", type=name_text,
                   help="grid region: country (FRA), US state (US-CA) or cloud region (us-east-1)")
    g.add_argument("--grid-g-per-kwh", type=bounded("grid_g_co2e_per_kwh"),
                   help="grid carbon intensity, g CO2e per kWh")
    g.add_argument("--pue", type=bounded("pue"), help="data-centre power usage effectiveness (>= 1)")
    g.add_argument("--electricity-usd-per-kwh", type=bounded("electricity_usd_per_kwh"))
    add_profile_arguments(p.add_argument_group("prediction"))
    if strategy:
        _add_strategy_arguments(p)


def _add_strategy_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("strategy (omit all to let greentrain choose)")
    for axis in (a.field for a in MeshAxis if a.field.flag):  # parallel/fields.py: one help per field
        g.add_argument(f"--{axis.flag}", type=_whole if axis.name == "etp" else _positive, help=axis.help)
    on_off: dict[str, Any] = {"action": argparse.BooleanOptionalAction, "default": None}
    g.add_argument("--sp", **on_off, help=flag_help("sp"))
    g.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help=flag_help("zero"))
    g.add_argument("--recompute", choices=RECOMPUTE, help=flag_help("recompute"))
    g.add_argument("--micro-batch", type=_positive, help=flag_help("micro_batch"))
    g.add_argument("--offload-optimizer", **on_off, help=flag_help("offload_optimizer"))
    g.add_argument("--offload-activations", type=_whole, metavar="N", help=flag_help("offload_activations"))
    g.add_argument("--schedule", choices=SCHEDULES, help=flag_help("schedule"))
    g.add_argument("--flash-attention", **on_off, help=flag_help("flash_attention"))
    g.add_argument("--stage-layers", type=_layer_list, metavar="N,N,...", help=flag_help("stage_layers"))
    g.add_argument("--memory-headroom", type=finite_float, default=None, metavar="F",
                   help="when greentrain chooses: fraction of device memory to leave free, in [0, 1) "
                        "(default 0.05; search/engine.py DEFAULT_MEMORY_HEADROOM)")


def add_profile_arguments(g: argparse.ArgumentParser | argparse._ArgumentGroup, *, for_runs: bool = False) -> None:
    """The framework profile, a calibration and the kernel overrides (estimate/efficiency.py Profile); ``for_runs``:
    they replace what each run of a runs CSV says (``greentrain validate``)."""
    fw_default, fws = ("each run's framework column, else megatron", "each run's framework's") if for_runs else (
        "megatron", "the framework's")
    g.add_argument("--framework", default="" if for_runs else "megatron", type=str if for_runs else name_text,
                   help=f"training framework profile (default: {fw_default}; `greentrain catalog frameworks` lists "
                   "them)")
    g.add_argument("--calibration", type=path_text, metavar="PROFILE.yaml",  # '' given was no calibration
                   help="constants fitted by `greentrain calibrate` on your own runs")
    g.add_argument("--attention-kernel", type=name_text, metavar="KERNEL",
                   help=f"attention kernel: fa2, sdpa-flash, sdpa, fa1, fa1-triton, fa3, cudnn, sdpa-math "
                   f"(default: {fws}; `greentrain catalog frameworks`)")
    g.add_argument("--loss-kernel", type=name_text, metavar="KERNEL",
                   help=f"cross-entropy kernel, what the loss keeps and moves per logit: {', '.join(LOSS_KERNELS)} "
                   f"(fused-linear: Liger's) (default: {fws})")
    recompute = "the run's recompute cell, else its framework's" if for_runs else "the framework's"
    g.add_argument("--selective-recompute", type=name_text, metavar="MODE",
                   help="what selective recomputation saves: attention (Korthikanti et al.'s attention core), op "
                   "(torchtitan op-SAC), layer-N (every N-th block fully checkpointed), or Megatron Core's "
                   "recompute_modules joined by + (core_attn, layernorm, mlp, moe, moe_act, shared_experts, "
                   f"mla_up_proj; e.g. layernorm+moe_act) (default: {recompute})")


def _layer_list(text: str) -> tuple[int, ...]:
    """--stage-layers 7,8,8,...: whole numbers >= 0, one per pipeline stage."""
    try:
        counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated whole numbers") from None
    if any(n < 0 for n in counts):
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return counts


def _base(args: argparse.Namespace) -> Scenario:
    if args.scenario:
        return load_scenario(args.scenario)
    return scenario_from_dict(DEFAULT_SCENARIO)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario file (or the default) with every given flag applied on top."""
    sc = _base(args)
    from greentrain.hardware.catalog import get_chip
    from greentrain.model.load import load_model

    model = load_model(args.model) if args.model else sc.model
    cl = sc.cluster
    if args.chip or args.num_chips or args.chips_per_node:
        chip = get_chip(args.chip) if args.chip else cl.chip
        cpn = args.chips_per_node or (cl.chips_per_node if not args.chip else None)
        cl = build_cluster(chip, args.num_chips or cl.num_chips, cpn)
    if getattr(args, "power_limit_w", None) is not None:
        cl = dataclasses.replace(cl, chip=cl.chip.power_limited(args.power_limit_w, "--power-limit-w"))
    w = sc.workload
    changes: dict[str, Any] = {}
    for flag, field in (("global_batch", "global_batch_size"), ("seq_len", "seq_len"),
                        ("target_seq_len", "target_seq_len"), ("precision", "precision"),
                        ("optimizer", "optimizer"), ("optimizer_dtype", "optimizer_dtype"),
                        ("master_weights", "master_weights"), ("grad_dtype", "grad_dtype")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    if args.tokens is not None and args.steps is not None:
        raise ConfigError("--steps", args.steps, f"conflicts with --tokens {args.tokens:g}: give one run length")
    if args.tokens is not None:  # a flag's run length replaces the file's
        changes.update(train_tokens=args.tokens, num_steps=0, num_epochs=0.0)
    if args.steps is not None:
        changes.update(num_steps=args.steps, train_tokens=0.0, num_epochs=0.0)
    ft = _finetune_flags(args, w)
    if ft is not None:
        changes["finetune"] = ft
    changes.update(_fp8_flags(args, w, cl.chip.name))
    w = dataclasses.replace(w, **changes) if changes else w
    from_flags = not args.scenario  # the defaults are fixed with flags; a file's values in the file
    check_sequence(model, w, "--seq-len" if from_flags or args.seq_len is not None else "workload.seq_len",
                   "--target-seq-len" if from_flags or args.target_seq_len is not None
                   else "workload.target_seq_len")
    from greentrain.cli.fields import fields_as_flags

    names = _flag_names(args, sc)
    with fields_as_flags(_pin_flags(args, names)):
        strategy = apply_pins(sc, _strategy_flags(args), cl.num_chips, names,
                              profile_from_args(args).for_chip(cl.chip.name).default_etp)
    return Scenario(model=model, cluster=cl, workload=w, site=_site(args, sc.site), strategy=strategy)


def batch_is_default(args: argparse.Namespace) -> bool:
    """The global batch comes from the built-in default: neither --global-batch nor the file's workload set it."""
    if args.global_batch is not None:
        return False
    if not args.scenario:
        return True
    from pathlib import Path

    from greentrain.config import load_mapping

    workload = load_mapping(Path(args.scenario), field="scenario").get("workload")
    return not (isinstance(workload, dict) and "global_batch_size" in workload)


def _fp8_flags(args: argparse.Namespace, w: Workload, chip: str) -> dict[str, Any]:
    """The workload's fp8_recipe and fp8_weights after --fp8-recipe, --fp8-weights and --precision: a file's go with
    a --precision that is not fp8; the flags need fp8; MXFP8 needs a Blackwell chip (estimate/fp8.py check_chip)."""
    from greentrain.estimate import fp8

    precision = getattr(args, "precision", None) or w.precision
    flag, weights = getattr(args, "fp8_recipe", None), getattr(args, "fp8_weights", None)
    for option, value in (("--fp8-recipe", flag), ("--fp8-weights", weights)):
        if value is not None and value is not False and precision != "fp8":
            raise ConfigError(option, value, f"applies to --precision fp8 only (precision is {precision})")
    name = flag if flag is not None else (w.fp8_recipe if precision == "fp8" else "")
    if name:
        fp8.check_chip(name, chip, "--fp8-recipe" if flag is not None else "workload.fp8_recipe")
    out: dict[str, Any] = {"fp8_recipe": name} if name != w.fp8_recipe else {}
    kept = (weights if weights is not None else w.fp8_weights) if precision == "fp8" else None  # None: framework's
    return out | ({"fp8_weights": kept} if kept != w.fp8_weights else {})


def _finetune_flags(args: argparse.Namespace, w: Workload) -> Any:
    """The Finetune the fine-tuning flags describe (on top of the file's unless --finetune is given), or None."""
    flags = {"finetune": args.finetune, "freeze": args.freeze, "lora_rank": args.lora_rank,
             "lora_targets": args.lora_targets, "lora_dtype": args.lora_dtype, "lora_dropout": args.lora_dropout}
    given = {k: v for k, v in flags.items() if v is not None}
    if not given:
        return None
    base = {} if args.finetune else {k: v for k, v in w.to_dict().items() if k in FINETUNE_FIELDS}
    data = {**base, **given}
    if "finetune" not in data:  # a lora or freeze flag alone says which mode
        data["finetune"] = "freeze" if "freeze" in data else "lora"
    return finetune_from_dict(data)


def _site(args: argparse.Namespace, site: Site) -> Site:
    data: dict[str, Any] = {}
    if args.region is not None:
        data["region"] = args.region
    if args.grid_g_per_kwh is not None:
        data["grid_g_co2e_per_kwh"] = args.grid_g_per_kwh
    if args.pue is not None:
        data["pue"] = args.pue
    if args.electricity_usd_per_kwh is not None:
        data["electricity_usd_per_kwh"] = args.electricity_usd_per_kwh
    if not data:
        return site
    if "region" not in data and "grid_g_co2e_per_kwh" not in data:  # keep the file's site, change PUE/price
        data["grid_g_co2e_per_kwh"] = site.grid_g_co2e_per_kwh
        data["region"] = site.region
        data.setdefault("pue", site.pue)
    from greentrain.cli.fields import SITE_FLAGS, fields_as_flags

    given = {k: f for k, f in SITE_FLAGS.items() if getattr(args, f[2:].replace("-", "_")) is not None}
    with fields_as_flags(given):  # an error names the flag typed, not the file's key
        return site_from_dict(data)


def _strategy_flags(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for flag in STRATEGY_FLAGS:
        value = getattr(args, flag, None)
        if value is not None:
            kw["micro_batch_size" if flag == "micro_batch" else flag] = value
    return kw


def _pin_flags(args: argparse.Namespace, names: dict[str, str]) -> dict[str, str]:
    """The fields of a strategy or search space that the given strategy flags set, as those flags (an error names
    the flag typed: strategy.micro_batch_size -> --micro-batch)."""
    given = [f for f in _strategy_flags(args) if f in names]
    return {f"{where}.{f}": names[f] for f in given for where in ("strategy", "search")} | \
        ({"search.micro_batch": names["micro_batch_size"]} if "micro_batch_size" in given else {})


def _flag_names(args: argparse.Namespace, sc: Scenario) -> dict[str, str]:
    """Strategy fields as the flags that set them, for the planning rules' errors (search/pins.py); vpp keeps
    its field name when the file's strategy set it and no --vpp was given."""
    names = {("micro_batch_size" if f == "micro_batch" else f): "--" + f.replace("_", "-") for f in STRATEGY_FLAGS}
    if getattr(args, "vpp", None) is None and sc.strategy is not None:
        names.pop("vpp")
    return names


if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Profile


def profile_from_args(args: argparse.Namespace) -> Profile:
    """The efficiency profile of --framework and --calibration (checked here, before any work)."""
    from greentrain.estimate.efficiency import Profile

    mode, recompute = getattr(args, "selective_recompute", None), getattr(args, "recompute", None)
    if mode and recompute in ("none", "full"):  # it would be ignored without a word
        raise ConfigError("--selective-recompute", mode, f"applies to --recompute selective, not {recompute}")
    from greentrain.cli.fields import KERNEL_FLAGS, fields_as_flags

    with fields_as_flags(KERNEL_FLAGS):  # a bad kernel or mode names the flag typed
        profile = Profile(framework=getattr(args, "framework", "megatron") or "megatron",
                          calibration=getattr(args, "calibration", "") or "",
                          attention_kernel=getattr(args, "attention_kernel", "") or "",
                          selective_recompute=getattr(args, "selective_recompute", "") or "",
                          loss_kernel=getattr(args, "loss_kernel", "") or "")
    flash = getattr(args, "flash_attention", None)
    said = f"--{'' if flash else 'no-'}flash-attention"
    if profile.attention_kernel and flash is None and getattr(args, "scenario", None):  # the file's, if it says
        from greentrain.config import as_bool
        from greentrain.search.pins import file_strategy_section

        section = file_strategy_section(args.scenario)
        if "flash_attention" in section:
            flash = as_bool(section["flash_attention"], "strategy.flash_attention")
            said = f"the scenario file's strategy.flash_attention: {str(flash).lower()}"
    if profile.attention_kernel and flash is not None:
        check_attention_kernel(profile.attention_kernel, profile.framework, flash, said)
    return profile


def check_attention_kernel(kernel: str, framework: str, flash: bool, said: str) -> None:
    """An --attention-kernel that contradicts a flash_attention given beside it (``said``: where) would leave one
    of them ignored without a word: refused."""
    from greentrain.estimate.efficiency import efficiency_for

    fused = efficiency_for("", framework, kernel).attention_fused  # the kernel's data
    if fused != flash:
        raise ConfigError("--attention-kernel", kernel,
                          f"{'is a fused kernel' if fused else 'materialises the scores (unfused)'}: it conflicts "
                          f"with {said}; give one of them")


def with_resolved_strategy(args: argparse.Namespace, sc: Scenario) -> tuple[Scenario, bool]:
    """``sc`` with its strategy: the given one, or the search's fastest within the degrees the flags pin (or, with
    no strategy flag, the fields a scenario file's partial `strategy:` section sets, as `search` pins them); True
    when the search chose it (the rules: search/pins.py)."""
    from greentrain.search.pins import file_pins, pins_only

    headroom = getattr(args, "memory_headroom", None)
    pins, names = _strategy_flags(args), _flag_names(args, sc)
    if not pins and args.scenario and sc.strategy is not None:
        section = file_pins(args.scenario, sc.strategy)
        unset = dataclasses.replace(sc, strategy=None)
        if pins_only(section, unset):  # the file names some fields only: the planner chooses the rest
            sc, pins, names = unset, section, {}
    from greentrain.cli.fields import SEARCH_FLAGS, fields_as_flags

    headroom_flag = {k: v for k, v in SEARCH_FLAGS.items() if k == "constraints.memory_headroom"}  # plan's one
    with fields_as_flags({**headroom_flag, **_pin_flags(args, names)}):
        return resolve_strategy(sc, pins, profile_from_args(args), names, memory_headroom=headroom)
