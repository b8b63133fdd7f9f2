"""A real Llama training step on one GPU, eager or torch.compile'd, for comparing `greentrain track` with
`greentrain plan` (issue 23's GPU part): Hugging Face ``LlamaForCausalLM`` built from Llama 3.2 1B's published
config (random initialisation; no weights are downloaded), SDPA attention, pure bf16 weights and AdamW states
(greentrain's ``--no-master-weights --optimizer-dtype bf16``), random token ids.

Each step's time is measured by this script too (CUDA synchronised wall time), so the comparison does not
depend on the tracker's hooks; the first ``--warmup`` steps (allocator, autotuning, compilation) are left out.

    greentrain track --grid-g-per-kwh 56 --out OUT/eager -- python benchmarks/gpu_llama_step.py --out OUT/eager
    greentrain plan --model llama3.2-1b --chip h200 --num-chips 1 --seq-len 2048 --global-batch 8 \\
        --micro-batch 8 --no-master-weights --optimizer-dtype bf16 --framework fsdp2

On CPU, ``--tiny`` runs a 2-layer, 64-wide model for a few steps: it checks the code path only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

# Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json): the shape greentrain's llama3.2-1b preset describes
LLAMA_32_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
               "rope_theta": 500000.0, "tie_word_embeddings": True, "rms_norm_eps": 1e-5}
TINY = {**LLAMA_32_1B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512}


def build(tiny: bool, device: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**(TINY if tiny else LLAMA_32_1B), attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):  # random initialisation where it trains: seconds on a GPU
        return LlamaForCausalLM(cfg).to(dtype=torch.bfloat16)


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
    p.add_argument("--out", required=True, help="folder for step_times.json")
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build(a.tiny, device)
    fwd = torch.compile(model) if a.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (a.batch, a.seq_len), device=device)
    times_s: list[float] = []
    for _ in range(a.steps):
        sync(device)
        t0 = time.perf_counter()
        loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        times_s.append(time.perf_counter() - t0)
    timed = times_s[a.warmup:] or times_s
    median_s = statistics.median(timed)
    out = {"model": "tiny" if a.tiny else "llama3.2-1b", "device": torch.cuda.get_device_name() if device == "cuda"
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
