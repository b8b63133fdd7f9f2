# Offload executors on a lent GPU, each beside the planner's price (docs/offload.md). From the repository root:
#   OUT=DIR bash benchmarks/gpu_offload_stock.sh          (about 3 minutes; every step time-capped)
# 1. greentrain, fsdp2 and torchao (torchao from a carried wheel in .whl/, skipped if absent) at 64/24 GiB, 4k;
# 2. Session 8's run again (Llama 3.2 1B, 8,192 tokens, 2 micro-batches, 120/48 GiB), printing each step's time,
#    its optimizer phase and its bytes, beside the planner's step, optimizer and host-copy seconds (issue 24);
# 3. the host side on this machine: a fresh pageable device-to-host copy (what the executor's second
#    micro-batch does, `p.grad.to("cpu")`) against a copy into a buffer already touched, and the executor's
#    AdamW(foreach=False) over 1.5 B bf16 parameters on every thread, which the planner prices from the per-thread
#    rates of benchmarks/bench_offload.py host.
set -x
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/offload-out}
mkdir -p "$OUT"
nvidia-smi -L
nproc
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/torchao-0.18.0-*.whl || \
  echo "no torchao wheel: torchao skipped"
GT="python3 -c 'import sys; from greentrain.cli.main import main; sys.exit(main(sys.argv[1:]))'"
show() {  # the measured per-step figures and the planner's, from a train --json file
  python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["predicted"]
print(d["executor"], "tokens/s", round(d["tokens_per_s"]), "predicted", round(p["tokens_per_s"]), "bound", p["bound"])
print("  step s", [round(x, 3) for x in d["step_times_s"]], "predicted", round(p["step_time_s"], 3))
print("  optimizer s", [round(x, 3) for x in d["optimizer_times_s"]], "predicted", round(p["optimizer_time_s"], 3),
      "| host gradient copies predicted", round(p["host_copy_time_s"], 3), "| host threads", p["host_threads"])
print("  h2d GB", [round(x, 2) for x in d["step_h2d_gb"]], "d2h GB", [round(x, 2) for x in d["step_d2h_gb"]])
print("  device peak GiB", d["device_peak_gib"], "predicted", round(p["device_gib"], 2), "| host GiB",
      round(d["host_peak_gib"], 2), "predicted", round(p["host_gib"], 2), "| losses", d["losses"])
EOF
}
for e in greentrain fsdp2 torchao; do
  timeout 80 bash -c "$GT offload train 64 24 4096 1 --steps 3 --micro-batches 2 --device cuda --executor $e --json" \
    > "$OUT/$e.json" 2> "$OUT/$e.err"
  echo "$e rc=$?"; tail -3 "$OUT/$e.err"
  show "$OUT/$e.json" 2>/dev/null
done
timeout 90 bash -c "$GT offload train --model 1 --device cuda --chip h200 --host-gib 48 --device-gib 120 \
  --seq-len 8192 --steps 3 --json" > "$OUT/session8.json" 2> "$OUT/session8.err"
echo "session8 rc=$?"; tail -3 "$OUT/session8.err"
show "$OUT/session8.json"
timeout 120 python3 - <<'EOF'
import time, torch
g = torch.randn(2**28, device="cuda", dtype=torch.bfloat16)  # 512 MiB, a Llama 3.2 1B table's gradient
buf = torch.empty(g.shape, dtype=g.dtype)
buf.copy_(g)
for name, fn in (("fresh .to('cpu')", lambda: g.to("cpu")), ("into a touched buffer", lambda: buf.copy_(g))):
    t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); s = time.perf_counter() - t0
    print(f"pageable d2h, {name}: {g.numel() * 2 / s / 1e9:.2f} GB/s")
n = 1_498_000_000 // 8  # the untied 1B's parameters in 8 tensors
ps = [torch.zeros(n, dtype=torch.bfloat16) for _ in range(8)]
for p in ps:
    p.grad = torch.full_like(p, 1e-3)
opt = torch.optim.AdamW(ps, lr=3e-4, foreach=False)
opt.step()
t0 = time.perf_counter(); opt.step(); s = time.perf_counter() - t0
print(f"AdamW(foreach=False) bf16, {torch.get_num_threads()} threads: {s:.2f} s, {8 * n / s / 1e6:.0f} M params/s")
EOF
