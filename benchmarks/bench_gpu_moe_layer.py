"""One expert-parallel rank's MoE block, forward + backward, timed on a device beside greentrain's prediction of
the same ops (issue 23: which part of MoE time greentrain misses; docs/validation.md "MoE step time held out").

The block is what torchtitan's MoE runs on one rank once the dispatch has delivered its tokens (models/moe):
the router over the rank's own T tokens, top-k, the permutation that gathers T x top_k token copies in expert
order (with ep ranks balanced, a rank receives as many copies as it sends), one ``torch._grouped_mm`` for the
gate and up projections of its E / ep experts, SiLU(gate) x up, one grouped GEMM down, and the weighted
scatter-add back to the tokens; for GPT-OSS (``expert_bias``, family gpt_oss) also each expert's two biases, added
by indexing (their backward an indexed accumulation, the atomic-add pattern pith-train's GPT-OSS work replaced:
mlc-ai/pith-train #34) and its clamped SwiGLU (OpenAI's gpt-oss reference: gate clamped at 7, up at +/-7,
gate x sigmoid(1.702 gate) x (up + 1)), the two things of a GPT-OSS block an ordinary MoE block lacks (greentrain
predicts GPT-OSS-120B 45-80 % too fast, docs/validation.md). The all-to-alls are not run (one device).
greentrain's side prices the MoE layer's router, expert GEMMs and activation under ``Sharding(ep=ep)`` with the
torchtitan profile, the expert GEMMs' bytes operand by operand (the rank's own experts' weights:
estimate/compute.py ``_local``, since session 20; before, every expert's weights): the measured time checks it
where the GEMMs are memory bound.

    python3 benchmarks/bench_gpu_moe_layer.py --chip h100-sxm --out DIR          # on the GPU
    python3 benchmarks/bench_gpu_moe_layer.py --device cpu --quick --out DIR     # checks the code path only
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from bench_gpu_kernels import timed_s

from greentrain.estimate.compute import Sharding, compute_peaks, ops_time
from greentrain.estimate.efficiency import efficiency_for
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops

# (preset, tokens per micro-batch on a rank, ep): the shapes of the Megatron-Bridge rows docs/validation.md scores
CASES = (("qwen3-30b-a3b", 4096, 8), ("qwen3-235b-a22b", 4096, 8), ("gpt-oss-120b", 4096, 8),
         ("gpt-oss-120b", 16384, 8), ("deepseek-v3", 4096, 8))
QUICK = (("qwen3-30b-a3b", 64, 64), ("gpt-oss-20b", 64, 16))  # 2 local experts each: the code paths only


def moe_block(model: str, tokens: int, ep: int, device: str, dtype: torch.dtype, scale: int = 1,
              bias: bool | None = None, clamped: bool | None = None) -> Any:
    """A closure running one forward + backward of the rank's MoE block (weights and inputs random); ``bias`` and
    ``clamped`` (None: as the model has them) turn GPT-OSS's expert biases and clamped SwiGLU on or off."""
    spec = load_model(model)
    d, f, k = spec.hidden_size // scale, spec.expert_ffn_hidden_size // scale, spec.top_k
    local = max(1, spec.num_experts // ep)
    x = torch.randn(tokens, d, device=device, dtype=dtype, requires_grad=True)
    router = torch.randn(d, spec.num_experts, device=device, dtype=dtype, requires_grad=True)
    w_up = torch.randn(local, d, 2 * f, device=device, dtype=dtype, requires_grad=True)
    w_down = torch.randn(local, f, d, device=device, dtype=dtype, requires_grad=True)
    copies = tokens * k  # balanced: the copies a rank sends equal those its experts receive
    offs = torch.arange(copies // local, copies + 1, copies // local, device=device, dtype=torch.int32)[:local]
    gpt_oss = spec.family == "gpt_oss" if clamped is None else clamped
    biased = bool(spec.expert_bias) if bias is None else bias
    b_up = torch.zeros(local, 2 * f, device=device, dtype=dtype, requires_grad=True) if biased else None
    b_down = torch.zeros(local, d, device=device, dtype=dtype, requires_grad=True) if biased else None
    row_expert = torch.arange(local, device=device).repeat_interleave(copies // local)  # rows in expert blocks
    grouped = hasattr(torch, "_grouped_mm") and device == "cuda"

    def gmm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if grouped:
            return torch._grouped_mm(a, w, offs=offs)
        return torch.cat([p @ w[e] for e, p in enumerate(a.split(copies // local))])

    def step() -> None:
        probs = torch.softmax((x @ router).float(), dim=-1)
        weight, expert = torch.topk(probs, k, dim=-1)
        # the copies sorted by expert; the load is forced even (Megatron-Bridge's benchmarks set
        # moe_router_force_load_balancing): local expert i takes the i-th block of copies / local rows
        order = torch.argsort(expert.flatten() % local, stable=True)
        rows = order // k
        h = gmm(x.index_select(0, rows), w_up)
        if b_up is not None:
            h = h + b_up[row_expert]
        gate, up = h.chunk(2, dim=-1)
        if gpt_oss:
            gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
            act = gate * torch.sigmoid(1.702 * gate) * (up + 1.0)
        else:
            act = F.silu(gate) * up
        out = gmm(act, w_down)
        if b_down is not None:
            out = out + b_down[row_expert]
        out = out * weight.flatten()[order].unsqueeze(-1).to(dtype)
        y = torch.zeros_like(x).index_add(0, rows, out)
        y.float().square().mean().backward()

    return step, {"experts_local": local, "copies": copies, "hidden": d, "expert_ffn": f, "grouped_mm": grouped,
                  "expert_bias": biased, "gpt_oss_swiglu": gpt_oss}


def predicted_s(model: str, tokens: int, ep: int, chip: str) -> dict[str, float]:
    """greentrain's forward + backward of the same ops (router, expert GEMMs, activation)."""
    spec, eff = load_model(model), efficiency_for(chip, "torchtitan")
    cl_chip = get_chip(chip)
    group = next(g for g in model_ops(spec, 1, tokens, 2.0).layers if g.moe)
    ops = tuple(o for o in group.ops if o.name.startswith("mlp.") and (o.expert or o.name.endswith(".router")))
    peaks = compute_peaks(cl_chip, "bf16")
    t = ops_time(ops, Sharding(ep=ep), peaks, cl_chip.memory_bytes_per_s, eff)
    return {"predicted_s": float(t.forward_s + t.backward_s)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chip", default="h100-sxm", help="catalog chip greentrain predicts for")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    p.add_argument("--quick", action="store_true", help="tiny shapes on any device: checks the code path only")
    p.add_argument("--ablate", action="store_true",
                   help="GPT-OSS cases also without their biases, their clamped SwiGLU, or both")
    p.add_argument("--out", required=True, help="folder for moe-layer.json")
    a = p.parse_args(argv)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    rows = []
    cases = [(m, t, ep, None, None) for m, t, ep in (QUICK if a.quick else CASES)]
    if a.ablate:
        cases += [(m, t, ep, b, c) for m, t, ep in (QUICK if a.quick else CASES) if m.startswith("gpt-oss")
                  for b, c in ((False, False), (True, False), (False, True))]
    for model, tokens, ep, bias, clamped in cases:
        step, shape = moe_block(model, tokens, ep, a.device, dtype, scale=16 if a.quick else 1, bias=bias,
                                clamped=clamped)
        measured = timed_s(step, a.device, 1 if a.quick else 3, 2 if a.quick else 10)
        row = {"model": model, "tokens": tokens, "ep": ep, **shape, "measured_s": measured}
        if not a.quick:
            row.update(predicted_s(model, tokens, ep, a.chip))
        rows.append(row)
        print(json.dumps(row))
        del step
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "moe-layer.json").write_text(json.dumps({"kind": "moe-layer", "chip": a.chip, "device": name,
                                                    "torch": torch.__version__, "quick": a.quick,
                                                    "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
