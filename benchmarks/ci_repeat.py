"""Is CI green every time? Clones the repository afresh and runs `bash .ci/run` N times, each with W busy
processes beside it (issue 24's goal: 10 of 10 at load 4 on 2 cores), and prints one line per run and the tally.

    .venv/bin/python benchmarks/ci_repeat.py --runs 10 --load 4 [--repo .] [--log-dir /tmp/ci-repeat]

Each run is a fresh `git clone` of the repository's HEAD into a temporary folder (the venv is built anew, as CI
builds it), so nothing of this checkout leaks in. The busy processes spin in pure Python until the run ends.
The log of every run is kept in --log-dir; the exit status is 0 only if every run passed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _spin(stop: mp.synchronize.Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def one_run(repo: Path, load: int, log: Path) -> tuple[bool, float]:
    """One fresh clone and `.ci/run` beside ``load`` spinning processes: (passed, wall seconds)."""
    stop = mp.Event()
    spinners = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(load)]
    for p in spinners:
        p.start()
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="ci-repeat-") as tmp:
            clone = Path(tmp) / "greentrain"
            subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
            with log.open("w") as f:
                rc = subprocess.run(["bash", ".ci/run"], cwd=clone, stdout=f, stderr=subprocess.STDOUT).returncode
    finally:
        stop.set()
        for p in spinners:
            p.join()
    return rc == 0, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--load", type=int, default=4, help="busy processes beside each run")
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    p.add_argument("--log-dir", default="/tmp/ci-repeat")
    a = p.parse_args(argv)
    logs = Path(a.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    passed = 0
    for i in range(1, a.runs + 1):
        ok, wall_s = one_run(Path(a.repo), a.load, logs / f"run-{i:02d}.log")
        passed += ok
        print(f"run {i:2d}: {'passed' if ok else 'FAILED'} in {wall_s:.0f} s (log {logs / f'run-{i:02d}.log'})",
              flush=True)
    print(f"{passed} of {a.runs} runs passed at load {a.load}")
    return 0 if passed == a.runs else 1


if __name__ == "__main__":
    sys.exit(main())
