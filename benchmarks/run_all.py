"""`make bench`: runs the CPU benchmarks one after another with their default arguments and prints each one's
output under its name; the exit status is the number of benchmarks that failed.

    .venv/bin/python benchmarks/run_all.py [--only plan,search]

Left out: bench_gpu_kernels.py (needs a GPU: its command is in BENCHMARKS.md), ci_repeat.py (clones and runs CI
ten times), make_bands.py (regenerates data, needs the calibration runs), bench_codecarbon.py (needs the
optional codecarbon package). Timings depend on the machine's load: compare ratios within one run (see
BENCHMARKS.md), never figures from different days.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name -> extra arguments (the quick form where the script has one)
BENCHES: dict[str, tuple[str, ...]] = {
    "plan": (),
    "search": ("--repeat", "3"),
    "search_workers": ("--rounds", "1"),
    "sim": (),
    "offload": ("crosscheck",),
    "kernel_overheads": (),
    "cpu_rates": (),
    "tracker": ("--rounds", "5"),
    "emulate": ("--repeats", "1"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated names: " + ", ".join(BENCHES))
    a = p.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or list(BENCHES)
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        print(f"run_all: --only {','.join(unknown)}: unknown; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        print(f"\n=== bench_{name}.py {' '.join(BENCHES[name])}", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run([sys.executable, str(HERE / f"bench_{name}.py"), *BENCHES[name]]).returncode
        failed += rc != 0
        print(f"=== bench_{name}.py: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
