set -x
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/torchao-0.18.0-*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
nvidia-smi -L
for e in greentrain fsdp2 torchao; do
  timeout 80 python3 -c "import sys; from greentrain.cli.main import main; sys.exit(main(sys.argv[1:]))" offload train 64 24 4096 1 --steps 3 --micro-batches 2 --device cuda --executor $e --json > $OUT/$e.json 2> $OUT/$e.err
  echo "$e rc=$?"; tail -3 $OUT/$e.err
  python3 -c "import json,sys; d=json.load(open('$OUT/$e.json')); print('$e', {k: d[k] for k in ('tokens_per_s','mfu','device_peak_gib','host_peak_gib','losses')}, d['predicted'])" 2>/dev/null
done
