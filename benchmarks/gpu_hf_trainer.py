"""Hugging Face Trainer on one GPU with greentrain's callback and CodeCarbon side by side (issue 26's GPU part):
the same training (Llama 3.2 1B's config at random initialisation, bf16 mixed precision, random token ids) run
three times in one process after a short warm-up: bare (the baseline wall time), with
``GreentrainTrainerCallback`` alone (its overhead), and with the callback and CodeCarbon's ``EmissionsTracker``
together (the energy of each, on the same seconds). Writes ``results.json``: wall time, overhead ratio, peak
CUDA memory, each tool's GPU / CPU / RAM / total energy and its emissions.csv row.

    python benchmarks/gpu_hf_trainer.py --out OUT/hf            # on a GPU, needs codecarbon
    python benchmarks/gpu_hf_trainer.py --tiny --steps 4 --out /tmp/hf   # CPU: the code path only
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from greentrain.measure import GreentrainTrainerCallback
from greentrain.measure.codecarbon import read_emissions

PARTS = ("gpu_energy", "cpu_energy", "ram_energy", "energy_consumed", "gpu_power", "duration")


class RandomTokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int, seq_len: int, vocab: int) -> None:
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def train_once(a: argparse.Namespace, out: Path, callbacks: list[Any]) -> dict[str, Any]:
    from gpu_llama_step import LLAMA_32_1B, TINY
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    cuda = torch.cuda.is_available()
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):  # random initialisation on the GPU: seconds, not a minute
        model = LlamaForCausalLM(LlamaConfig(**(TINY if a.tiny else LLAMA_32_1B), attn_implementation="sdpa"))
    args = TrainingArguments(output_dir=str(out), max_steps=a.steps, per_device_train_batch_size=a.batch,
                             learning_rate=1e-4, bf16=cuda, logging_steps=10, save_strategy="no",
                             report_to="none", use_cpu=not cuda, dataloader_num_workers=0, seed=0)
    data = RandomTokens(a.steps * a.batch, a.seq_len, model.config.vocab_size)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    trainer.train()
    wall_s = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    del trainer, model
    if cuda:
        torch.cuda.empty_cache()
    return {"wall_s": wall_s, "peak_cuda_bytes": peak}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--grid-g-per-kwh", type=float, default=56.0)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    out = Path(a.out)
    logging.getLogger("codecarbon").setLevel(logging.WARNING)
    train_once(argparse.Namespace(**{**vars(a), "steps": 3}), out / "warmup", [])  # CUDA/cuBLAS start-up
    res: dict[str, Any] = {"bare": train_once(a, out / "bare", [])}
    cb = GreentrainTrainerCallback(grid_g_per_kwh=a.grid_g_per_kwh, pue=1.0, print_summary=False)
    res["greentrain"] = train_once(a, out / "greentrain", [cb])
    res["overhead_ratio"] = res["greentrain"]["wall_s"] / res["bare"]["wall_s"]
    try:
        from codecarbon import EmissionsTracker
    except ImportError:
        res["codecarbon"] = "not installed (pip install codecarbon)"
    else:
        cc_dir = out / "codecarbon"
        cc_dir.mkdir(parents=True, exist_ok=True)
        cc = EmissionsTracker(project_name="gpu-hf-trainer", output_dir=str(cc_dir), pue=1.0,
                              measure_power_secs=1, save_to_file=True, log_level="warning",
                              allow_multiple_runs=True)
        both = GreentrainTrainerCallback(grid_g_per_kwh=a.grid_g_per_kwh, pue=1.0, print_summary=False)
        cc.start()
        res["side_by_side"] = train_once(a, out / "both", [both])
        cc.stop()
        cc_row = read_emissions(cc_dir / "emissions.csv")[-1]
        gt_row = read_emissions(out / "both" / "greentrain" / "emissions.csv")[-1]
        res["energy"] = {k: {"greentrain": gt_row.get(k), "codecarbon": cc_row.get(k)} for k in PARTS}
        res["codecarbon_row"] = cc_row
    (out / "results.json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: v for k, v in res.items() if k != "codecarbon_row"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
