"""A real Llama training step on one GPU, eager or torch.compile'd, for comparing `greentrain track` with
`greentrain plan` (issue 23's GPU part): Hugging Face ``LlamaForCausalLM`` built from Llama 3.2 1B's published
config (random initialisation; no weights are downloaded), SDPA attention, pure bf16 weights and AdamW states
(greentrain's ``--no-master-weights --optimizer-dtype bf16``), random token ids.

Each step's time is measured by this script too (CUDA synchronised wall time), so the comparison does not
depend on the tracker's hooks; the first ``--warmup`` steps (allocator, autotuning, compilation) are left out.

    greentrain track --grid-g-per-kwh 56 --out OUT/eager -- python benchmarks/gpu_llama_step.py --out OUT/eager
    greentrain plan --model llama3.2-1b --chip h200 --num-chips 1 --seq-len 2048 --global-batch 8 \\
        --micro-batch 8 --no-master-weights --optimizer-dtype bf16 --framework fsdp2

``--model llama3-8b`` builds Llama 3 8B's config instead; ``--lora-targets q,v`` freezes every base weight and
trains peft LoRA adapters (rank ``--lora-rank``) on those projections, the optimizer over the adapters only (peft's
default keeps the adapters in fp32 beside a bf16 base, ``--adapter-dtype bf16`` keeps them in bf16);
``--grad-ckpt`` recomputes each decoder layer (transformers' gradient checkpointing, non-reentrant); ``--sac op``
wraps each decoder layer in torchtitan's op-level selective checkpointing instead (its policy as of @9dec370,
parallelize_llama.py: save the outputs of the matmuls, flash attention and max, except every second matmul;
recompute the rest) with SDPA's flash backend, as torchtitan's Dec-2024 tables ran; ``--layers N`` keeps only the
first N decoder layers of the config (a wide model's layers on one device). The forward runs with
``use_cache=False`` (since session 26; transformers otherwise fills a KV cache that op-SAC's recomputation
would find changed); the cache held references to the saved keys and values only. Each step also
records the memory the forward left allocated (saved activations, logits and the loss's buffers), the figure
greentrain's activation estimate describes.

    greentrain plan --model llama3-8b --chip h200 --num-chips 1 --seq-len 4096 --global-batch 2 --micro-batch 2 \
        --finetune lora --lora-targets q,v --framework pytorch

On CPU, ``--tiny`` runs a 2-layer, 64-wide model for a few steps: it checks the code path only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

# Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json): the shape greentrain's llama3.2-1b preset describes
LLAMA_32_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
               "rope_theta": 500000.0, "tie_word_embeddings": True, "rms_norm_eps": 1e-5}
# Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json)
LLAMA_3_8B = {**LLAMA_32_1B, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
              "num_key_value_heads": 8, "max_position_embeddings": 8192, "tie_word_embeddings": False}
MODELS = {"llama3.2-1b": LLAMA_32_1B, "llama3-8b": LLAMA_3_8B}
TINY = {**LLAMA_32_1B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512}


def build(config: dict, device: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**config, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):  # random initialisation where it trains: seconds on a GPU
        return LlamaForCausalLM(cfg).to(dtype=torch.bfloat16)


def add_lora(model: torch.nn.Module, targets: str, rank: int, adapter_dtype: str,
             dropout: float = 0.0) -> torch.nn.Module:
    """peft LoRA adapters on the named projections (greentrain's names: q, k, v, o, gate, up, down); every base
    weight frozen. peft's ``autocast_adapter_dtype`` (default) keeps bf16 adapters in fp32."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=dropout, task_type="CAUSAL_LM",
                     target_modules=[f"{t.strip()}_proj" for t in targets.split(",")])
    return get_peft_model(model, cfg, autocast_adapter_dtype=adapter_dtype == "fp32")


def op_sac(model: torch.nn.Module) -> None:
    """torchtitan's op-level SAC (@9dec370 torchtitan/parallelisms/parallelize_llama.py _apply_ac_to_transformer_block)
    around each decoder layer: MUST_SAVE the outputs of mm (all but every second one), the SDPA flash and
    efficient kernels and max; PREFER_RECOMPUTE everything else."""
    from collections import defaultdict
    from functools import partial

    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default, aten.max.default}

    def context() -> tuple:
        meta: dict[str, int] = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):
            key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
            if func == aten.mm.default:
                meta[key] += 1
            keep = func in save and not (func == aten.mm.default and meta[key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    for layer in model.model.layers:
        layer.forward = partial(checkpoint, layer.forward, use_reentrant=False, context_fn=context,
                                preserve_rng_state=False)


def sdpa_backend(sac: str | None, device: str) -> Any:
    """SDPA's flash backend under op-SAC on CUDA (the kernel torchtitan's save list names); else SDPA's choice."""
    from contextlib import nullcontext

    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.FLASH_ATTENTION) if sac and device == "cuda" else nullcontext()


def ops_by_shape(prof: Any) -> list[dict[str, Any]]:
    """The profiled step's aten ops grouped by (name, input shapes, input dtypes, thread): calls and self device
    time (us), the longest first."""
    groups: dict[tuple[str, str, str, int], list[float]] = {}
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        k = (e.name, json.dumps(e.input_shapes), json.dumps(getattr(e, "input_dtypes", [])), int(e.thread))
        g = groups.setdefault(k, [0.0, 0.0])
        g[0] += 1
        g[1] += float(e.self_device_time_total)
    rows = [{"name": k[0], "shapes": k[1], "dtypes": k[2], "thread": k[3], "calls": int(v[0]), "self_device_us": v[1]}
            for k, v in groups.items()]
    return sorted(rows, key=lambda r: -r["self_device_us"])


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=25, help="optimizer steps, warm-up included")
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the step time")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (one micro-batch)")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--tiny", action="store_true", help="a 2-layer 64-wide model: the code path only")
    p.add_argument("--model", choices=sorted(MODELS), default="llama3.2-1b", help="the published config to build")
    p.add_argument("--lora-targets", help="q,v,...: peft LoRA adapters there, every base weight frozen")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lora-dropout", type=float, default=0.0, help="peft's lora_dropout")
    p.add_argument("--adapter-dtype", choices=("fp32", "bf16"), default="fp32", help="peft's default: fp32")
    p.add_argument("--autocast", action="store_true",
                   help="the forward under torch.autocast(bf16), as HF Trainer's bf16=True runs it")
    p.add_argument("--profile", action="store_true", help="profile the last step: kernels.txt beside the times")
    p.add_argument("--grad-ckpt", action="store_true", help="recompute each decoder layer in the backward")
    p.add_argument("--sac", choices=("op",), help="torchtitan's op-level selective checkpointing of each layer")
    p.add_argument("--layers", type=int, help="keep the first N decoder layers of the config")
    p.add_argument("--out", required=True, help="folder for step_times.json")
    a = p.parse_args(argv)
    if a.sac and a.grad_ckpt:
        p.error("--sac and --grad-ckpt are two recomputation schemes: give one")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = TINY if a.tiny else MODELS[a.model]
    model = build({**config, "num_hidden_layers": a.layers} if a.layers else config, device)
    if a.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if a.sac == "op":
        op_sac(model)  # on the Hugging Face model's own layers, before a peft wrapper hides them
    if a.lora_targets:
        model = add_lora(model, a.lora_targets, a.lora_rank, a.adapter_dtype, a.lora_dropout)
    fwd = torch.compile(model) if a.compile else model
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, fused=device == "cuda")
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (a.batch, a.seq_len), device=device)
    times_s: list[float] = []
    forward_bytes: list[int] = []
    prof = None
    for i in range(a.steps):
        if a.profile and i == a.steps - 1:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]
                                          + ([torch.profiler.ProfilerActivity.CUDA] if device == "cuda" else []),
                                          record_shapes=True)
            prof.__enter__()
        sync(device)
        t0 = time.perf_counter()
        before = torch.cuda.memory_allocated() if device == "cuda" else 0
        with sdpa_backend(a.sac, device):  # the recomputation in the backward runs the same kernel
            with torch.autocast(device, dtype=torch.bfloat16, enabled=a.autocast):
                loss = fwd(input_ids=ids, labels=ids, use_cache=False).loss
            forward_bytes.append(torch.cuda.memory_allocated() - before if device == "cuda" else 0)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        times_s.append(time.perf_counter() - t0)
    if prof is not None:
        prof.__exit__(None, None, None)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        key = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
        (Path(a.out) / "kernels.txt").write_text(prof.key_averages().table(sort_by=key, row_limit=60))
        # every op by its input shapes, dtypes and thread (the autograd engine's: the backward), with its self
        # device time: which element-wise chain each kernel's time belongs to
        (Path(a.out) / "ops.json").write_text(json.dumps(ops_by_shape(prof), indent=0))
    timed = times_s[a.warmup:] or times_s
    median_s = statistics.median(timed)
    out = {"model": "tiny" if a.tiny else a.model, "lora_targets": a.lora_targets, "lora_rank": a.lora_rank,
           "lora_dropout": a.lora_dropout, "adapter_dtype": a.adapter_dtype if a.lora_targets else None,
           "grad_ckpt": a.grad_ckpt, "sac": a.sac, "layers": a.layers, "autocast": a.autocast,
           "trainable_params": sum(p.numel() for p in trainable),
           "forward_bytes_median": statistics.median(forward_bytes[a.warmup:] or forward_bytes),
           "device": torch.cuda.get_device_name() if device == "cuda"
           else "cpu", "torch": torch.__version__, "compile": a.compile, "batch": a.batch, "seq_len": a.seq_len,
           "params": sum(p.numel() for p in model.parameters()), "step_times_s": times_s,
           "step_time_s_median": median_s, "tokens_per_s": a.batch * a.seq_len / median_s,
           "peak_cuda_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else 0,
           "loss_last": float(loss.detach())}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "step_times.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k != "step_times_s"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
