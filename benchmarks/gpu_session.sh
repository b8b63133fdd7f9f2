#!/usr/bin/env bash
# Every GPU check of issues 23-27 as one script for a lent GPU (one call, each step time-capped, in priority
# order), results packed after each step into $OUT/results.tgz so a cut-off run still returns what it did.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh      # on the GPU machine, from the repository root
#   OUT=/tmp/gpu STEPS="llama-eager hf-trainer" bash benchmarks/gpu_session.sh   # some steps only
#
# Needs torch with CUDA, transformers, accelerate, nvidia-ml-py on the machine; codecarbon and rouge-score from
# wheels in .whl/ when present (installed into /tmp/site). greentrain runs from src/ (no install).
set -u
OUT=${OUT:-/tmp/gpu-out}
W=/tmp/gw
mkdir -p "$OUT" "$W"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 GREENTRAIN_DEVICE=cuda
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    || echo "wheels: install failed"
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p /tmp/bin
printf '#!/bin/sh\nexec python3 -c "import sys; from greentrain.cli.main import main; sys.argv[0]=\\"greentrain\\"; sys.exit(main())" "$@"\n' \
  > /tmp/bin/greentrain
chmod +x /tmp/bin/greentrain
export PATH=/tmp/bin:$PATH

pack() { tar -czf "$OUT/results.tgz" -C /tmp --exclude='*.safetensors' --exclude='*.bin' --exclude='*.pt' \
  --exclude='checkpoint-*' gw 2>/dev/null; }
step() {  # step NAME SECONDS COMMAND...: time-capped, its exit status and wall time logged; STEPS="a b" runs those
  local name=$1 cap=$2; shift 2
  case " ${STEPS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  echo "=== $name (cap ${cap}s) $(date -u +%FT%TZ)"
  local t0=$SECONDS
  timeout -k 5 "$cap" "$@"
  local rc=$?
  echo "=== $name rc=$rc wall_s=$((SECONDS - t0))"
  echo "$name rc=$rc wall_s=$((SECONDS - t0))" >> "$W/steps.txt"
  pack
}

GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$GPU" in *H200*) CHIP=h200 ;; *H100*) CHIP=h100-sxm ;; *) CHIP=h100-sxm ;; esac
{ nvidia-smi; python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
  python3 -m pip list 2>/dev/null | grep -i -E "codecarbon|rouge|nvidia-ml|accelerate|pytest"; } > "$W/env.txt" 2>&1
echo "chip $CHIP ($GPU)"

# 1. issue 23: kernels (MAMF, SDPA + each backend, triad, host link, fp8 GEMMs, grouped MoE GEMMs)
step kernels 100 python3 benchmarks/bench_gpu_kernels.py --chip "$CHIP" --out "$W/kernels"
# ... and one expert-parallel rank's MoE block (router, permutation, grouped GEMMs) against greentrain's two byte
# counts of its expert GEMMs (docs/validation.md "MoE step time held out": which one the device agrees with)
step moe-layer 90 python3 benchmarks/bench_gpu_moe_layer.py --chip "$CHIP" --out "$W/moe"
# ... GPT-OSS's block without its expert biases, its clamped SwiGLU, or both: which one costs the time
step moe-ablate 90 python3 benchmarks/bench_gpu_moe_layer.py --chip "$CHIP" --ablate --out "$W/moe-ablate"
# 2. issues 25/24: the GPU tests (real NVML meter beside the fake one's shape, the Tracker's CUDA paths)
step gpu-tests 60 python3 -m pytest -q -p no:cacheprovider tests/gpu -o addopts=""
# 3. issue 23: a Llama 3.2 1B step eager and compiled under track (NVML live), against plan (run off the GPU)
step llama-bare 60 python3 benchmarks/gpu_llama_step.py --steps 20 --warmup 5 --out "$W/bare"
step llama-eager 75 greentrain track --grid-g-per-kwh 56 --pue 1.0 --interval-s 0.2 --out "$W/eager" -- \
  python3 benchmarks/gpu_llama_step.py --steps 20 --warmup 5 --out "$W/eager"
step llama-compiled 120 greentrain track --grid-g-per-kwh 56 --pue 1.0 --interval-s 0.2 --out "$W/compiled" -- \
  python3 benchmarks/gpu_llama_step.py --steps 20 --warmup 5 --compile --out "$W/compiled"
# ... and Llama 3 8B's first 8 layers at torchtitan's Dec-2024 micro-batch (2 x 8,192 tokens): no recomputation,
# torchtitan's op-level SAC, full recomputation, each against plan (benchmarks/measured/h100-2026-11-27/predicted.txt)
T8="python3 benchmarks/gpu_llama_step.py --model llama3-8b --layers 8 --batch 2 --seq-len 8192 --steps 12 --warmup 4"
step tt8-none 75 $T8 --out "$W/tt8-none"
step tt8-sac 75 $T8 --sac op --out "$W/tt8-sac"
step tt8-full 75 $T8 --grad-ckpt --out "$W/tt8-full"
# ... one profiled step of each (kernel time against the step's wall time: where op-SAC's extra time goes) and
# the compiled step (HF's compiled forward builds a boolean mask: op-SAC with the flash backend cannot run it)
step tt8-none-prof 75 $T8 --steps 8 --warmup 3 --profile --out "$W/tt8-none-prof"
step tt8-sac-prof 75 $T8 --steps 8 --warmup 3 --sac op --profile --out "$W/tt8-sac-prof"
step tt8-full-prof 75 $T8 --steps 8 --warmup 3 --grad-ckpt --profile --out "$W/tt8-full-prof"
# ... and the Llama 3.2 1B step profiled (8 x 2,048 tokens; ops_by_shape.txt: each op by input shapes and dtypes)
step llama-prof 60 python3 benchmarks/gpu_llama_step.py --steps 8 --warmup 3 --profile --out "$W/llama-prof"
step tt8-none-compiled 150 $T8 --compile --out "$W/tt8-none-compiled"
# ... and Llama 3 8B, 2 x 4,096 tokens: full training (pure bf16) against peft LoRA (issue 23's fine-tuning memory:
# frozen GEMMs keep no input, estimate/frozen.py), each one's forward-left memory and step against plan
L8="python3 benchmarks/gpu_llama_step.py --model llama3-8b --batch 2 --seq-len 4096 --steps 12 --warmup 4"
step l8-full 90 $L8 --out "$W/l8-full"
step l8-lora-qv 75 $L8 --lora-targets q,v --out "$W/l8-lora-qv"
step l8-lora-qv-bf16 75 $L8 --lora-targets q,v --adapter-dtype bf16 --out "$W/l8-lora-qv-bf16"
step l8-lora-all 75 $L8 --lora-targets q,k,v,o,gate,up,down --out "$W/l8-lora-all"
step l8-lora-qv-ckpt 75 $L8 --lora-targets q,v --grad-ckpt --out "$W/l8-lora-qv-ckpt"
step l8-lora-track 90 greentrain track --grid-g-per-kwh 56 --pue 1.0 --interval-s 0.2 --out "$W/l8-track" -- \
  $L8 --lora-targets q,v --out "$W/l8-track"
# ... the same at other ranks, lengths and sizes (held out from the rank-16 runs above)
L8S="python3 benchmarks/gpu_llama_step.py --model llama3-8b --batch 1 --seq-len 8192 --steps 12 --warmup 4"
step l8-r64-all-bf16 75 $L8S --lora-targets q,k,v,o,gate,up,down --lora-rank 64 --adapter-dtype bf16 \
  --out "$W/l8-r64-all-bf16"
step l8-r64-all-fp32 75 $L8S --lora-targets q,k,v,o,gate,up,down --lora-rank 64 --out "$W/l8-r64-all-fp32"
step l8-r256-qkvo-fp32 75 $L8 --lora-targets q,k,v,o --lora-rank 256 --out "$W/l8-r256-qkvo-fp32"
step l1-lora-qv 60 python3 benchmarks/gpu_llama_step.py --steps 15 --warmup 5 --lora-targets q,v --out "$W/l1-lora-qv"
# ... peft's fp32 adapters under autocast (HF Trainer's bf16=True with a bf16 model)
step l8-lora-qv-autocast 75 $L8 --lora-targets q,v --autocast --out "$W/l8-lora-qv-autocast"
step l8-lora-all-autocast 75 $L8 --lora-targets q,k,v,o,gate,up,down --autocast --out "$W/l8-lora-all-autocast"
# ... one profiled step of each adapter precision (which kernels the fp32 adapters add)
step l8-prof-all-fp32 75 $L8 --steps 6 --warmup 3 --lora-targets q,k,v,o,gate,up,down --profile --out "$W/l8-prof-all-fp32"
step l8-prof-all-bf16 75 $L8 --steps 6 --warmup 3 --lora-targets q,k,v,o,gate,up,down --adapter-dtype bf16 --profile \
  --out "$W/l8-prof-all-bf16"
# ... peft's lora_dropout (each adapter its own dropped copy and a 1-byte mask)
step l8-lora-qv-drop 75 $L8 --lora-targets q,v --lora-dropout 0.1 --out "$W/l8-lora-qv-drop"
step l8-lora-qv-bf16-drop 75 $L8 --lora-targets q,v --adapter-dtype bf16 --lora-dropout 0.1 --out "$W/l8-lora-qv-bf16-drop"
step l8-lora-all-autocast-drop 75 $L8 --lora-targets q,k,v,o,gate,up,down --autocast --lora-dropout 0.05 \
  --out "$W/l8-lora-all-autocast-drop"
# 4. issue 24: SIGINT to track on the CUDA run after 25 s (expect 130 and an incomplete measurement)
step track-sigint 45 timeout --preserve-status -s INT 25 greentrain track --grid-g-per-kwh 56 --out "$W/sigint" -- \
  python3 benchmarks/gpu_llama_step.py --steps 100000 --out "$W/sigint-steps"
# ... and a full disk: a 2 MiB tmpfs filled to its last 64 KiB while the run records (expect exit 1, one line)
case " ${STEPS:-track-enospc} " in *" track-enospc "*) ;; *) NOFULL=1 ;; esac
[ -z "${NOFULL:-}" ] && mkdir -p /mnt/gtfull && mount -t tmpfs -o size=2m tmpfs /mnt/gtfull && \
  { dd if=/dev/zero of=/mnt/gtfull/filler bs=64k count=31 2>/dev/null; \
    step track-enospc 50 greentrain track --grid-g-per-kwh 56 --interval-s 0.05 --out /mnt/gtfull/run -- \
      python3 benchmarks/gpu_llama_step.py --steps 30 --out "$W/enospc-steps"; \
    ls -la /mnt/gtfull/run > "$W/enospc-ls.txt" 2>&1; cp -r /mnt/gtfull/run "$W/enospc-run" 2>/dev/null; umount /mnt/gtfull; } \
  || echo "tmpfs: mount refused, full-disk step skipped"
# 5. issues 24/26: offload train on CUDA at a device cap and with ample memory; and Ctrl-C during it
step offload-cap 60 greentrain offload train --model 1 --device cuda --chip "$CHIP" --host-gib 48 --device-gib 10 \
  --seq-len 8192 --steps 3 --json > "$W/offload-cap.json"
# ... each executor at a device cap (executor:GiB; the H100 of Session 13 ran these: torchao at 24 crossed it)
for RUN in ${OFFLOAD_RUNS:-greentrain:24 fsdp2:24 torchao:32}; do
  EX=${RUN%%:*} GIB=${RUN##*:}
  step "offload-$EX-$GIB" 60 greentrain offload train --model 1 --executor "$EX" --device cuda --chip "$CHIP" \
    --host-gib 48 --device-gib "$GIB" --seq-len 8192 --steps 3 --json > "$W/offload-$EX-$GIB.json"
done
step offload-ample 60 greentrain offload train --model 1 --device cuda --chip "$CHIP" --host-gib 48 --device-gib 120 \
  --seq-len 8192 --steps 6 --json > "$W/offload-ample.json"
step offload-sigint 30 timeout --preserve-status -s INT 15 greentrain offload train --model 1 --device cuda \
  --chip "$CHIP" --host-gib 48 --device-gib 10 --seq-len 8192 --steps 1000
# 6. issue 26: HF Trainer bare / with the callback / with the callback and CodeCarbon
step hf-trainer 100 python3 benchmarks/gpu_hf_trainer.py --out "$W/hf"
# 7. issue 27: the example study on the GPU, local executor, one job
step experiment 120 greentrain experiment run examples/tiny-summarize.yaml --out "$W/exp" --jobs 1 --no-plot
# ... and on a Ray local cluster with the GPU as a resource (Ray carried in parts and joined by
# benchmarks/gpu_ray_wheels.sh into /tmp/site-ray; without it the step ends in one line naming the extra)
[ -d /tmp/site-ray ] && export PYTHONPATH="/tmp/site-ray:$PYTHONPATH"
step experiment-ray 180 greentrain experiment run examples/tiny-summarize.yaml --out "$W/exp-ray" --executor ray \
  --jobs 1 --no-plot
nvidia-smi --query-gpu=name,power.draw,temperature.gpu,clocks.sm --format=csv >> "$W/env.txt" 2>&1
pack
echo "=== done"
