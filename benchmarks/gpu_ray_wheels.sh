#!/usr/bin/env bash
# Ray on a lent GPU machine, which reaches no package index: Ray's wheel (79 MB for 2.60, cp312) is over what one
# device call carries (64 MiB with the working tree), so it travels in three parts over two calls to the same
# warm machine, which keeps ignored paths of the repository between calls, and is joined there.
#
#   bash benchmarks/gpu_ray_wheels.sh split    # here: download Ray and its dependencies, cut into .ray-part-{1,2}/
#   (device call 1, carry [".whl", ".ray-part-1"]; device call 2, carry [".ray-part-2"])
#   bash benchmarks/gpu_ray_wheels.sh join     # there: join the parts, install into /tmp/site-ray, check the import
#
# Then, on the device: PYTHONPATH=/tmp/site-ray:... STEPS="experiment-ray" bash benchmarks/gpu_session.sh
set -euo pipefail
RAY=${RAY_VERSION:-2.60.0}
case "${1:-}" in
  split)
    rm -rf .ray-part-1 .ray-part-2 /tmp/gt-ray && mkdir -p .ray-part-1 .ray-part-2 /tmp/gt-ray
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux2014_x86_64 -d /tmp/gt-ray "ray==$RAY" "msgpack>=1.0,<2" "jsonschema" \
      "jsonschema-specifications" "referencing" "rpds-py" "attrs" "protobuf>=3.20.3" "click>=7"
    wheel=$(ls /tmp/gt-ray/ray-*.whl)
    # three parts of at most 27 MB: part 1 beside .whl (27 MB), parts 2 and 3 in the second call
    split -b 27000000 -d -a 1 "$wheel" /tmp/gt-ray/ray.whl.part-
    mv /tmp/gt-ray/ray.whl.part-0 .ray-part-1/
    mv /tmp/gt-ray/ray.whl.part-1 /tmp/gt-ray/ray.whl.part-2 .ray-part-2/
    basename "$wheel" > .ray-part-1/NAME
    sha256sum "$wheel" | cut -d' ' -f1 > .ray-part-1/SHA256
    rm "$wheel" && mv /tmp/gt-ray/*.whl .ray-part-2/
    du -sh .ray-part-1 .ray-part-2 .whl 2>/dev/null || true
    ;;
  join)
    test -d .ray-part-1 && test -d .ray-part-2 || { echo "gpu_ray_wheels: .ray-part-1 and .ray-part-2 must both be here (two calls)"; exit 2; }
    name=$(cat .ray-part-1/NAME)
    mkdir -p /tmp/gt-ray
    cat .ray-part-1/ray.whl.part-0 .ray-part-2/ray.whl.part-1 .ray-part-2/ray.whl.part-2 > "/tmp/gt-ray/$name"
    echo "$(cat .ray-part-1/SHA256)  /tmp/gt-ray/$name" | sha256sum -c -
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-ray \
      "/tmp/gt-ray/$name" .ray-part-2/*.whl
    PYTHONPATH=/tmp/site-ray python3 -c "import ray; print('ray', ray.__version__)"
    ;;
  *) echo "usage: gpu_ray_wheels.sh split|join"; exit 2 ;;
esac
