"""Is CI green every time? Clones the repository afresh and runs `bash .ci/run` N times under load, prints one
line per run and the tally (issue 24's goal: 10 of 10 at load 4 on 2 cores).

    .venv/bin/python benchmarks/ci_repeat.py --runs 10 --parallel 2 [--load 0] [--rev HEAD] [--log-dir DIR]

The load is real work where it can be: `--parallel K` runs K fresh-clone CI runs side by side (each runs pytest
with 2 xdist workers, so two runs on 2 cores keep the load average near 4), and `--load W` adds W processes that
spin in pure Python until the wave ends. The load average is sampled every 15 s during each wave and printed
beside the result, so the line says what load the run saw rather than what was intended.

Each run is a fresh `git clone` of one revision (`--rev`, resolved once at the start, so commits made while the
repetition runs do not change what it tests) into a temporary folder: the venv is built anew, as CI builds it.
The log of every run is kept in --log-dir; the exit status is 0 only if every run passed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _spin(stop: mp.synchronize.Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def _sample_load(stop: threading.Event, samples: list[float], every_s: float = 15.0) -> None:
    while not stop.wait(every_s):
        samples.append(os.getloadavg()[0])


def _one_run(repo: Path, rev: str, log: Path) -> tuple[bool, float]:
    """One fresh clone of ``rev`` and its `.ci/run`: (passed, wall seconds)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ci-repeat-") as tmp:
        clone = Path(tmp) / "greentrain"
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
        with log.open("w") as f:
            rc = subprocess.run(["bash", ".ci/run"], cwd=clone, stdout=f, stderr=subprocess.STDOUT).returncode
    return rc == 0, time.monotonic() - t0


def wave(repo: Path, rev: str, logs: list[Path], load: int) -> tuple[list[tuple[bool, float]], list[float]]:
    """Runs len(logs) CI runs side by side beside ``load`` spinners: their results and the load samples."""
    stop = mp.Event()
    spinners = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(load)]
    for p in spinners:
        p.start()
    samples: list[float] = []
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=_sample_load, args=(stop_sampling, samples), daemon=True)
    sampler.start()
    results: list[tuple[bool, float]] = [(False, 0.0)] * len(logs)

    def run(i: int) -> None:
        results[i] = _one_run(repo, rev, logs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(logs))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        stop_sampling.set()
        for p in spinners:
            p.join()
    return results, samples


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--parallel", type=int, default=2, help="fresh-clone CI runs side by side per wave")
    p.add_argument("--load", type=int, default=0, help="spinning processes beside each wave")
    p.add_argument("--rev", default="HEAD", help="the revision every run tests (resolved once)")
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    p.add_argument("--log-dir", default="/tmp/ci-repeat")
    a = p.parse_args(argv)
    # started as a background job (`nohup ... &`), SIGINT arrives ignored and every CI run would inherit that;
    # a handler here gives the children the default disposition again, as CI's runner does
    signal.signal(signal.SIGINT, signal.default_int_handler)
    repo = Path(a.repo)
    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", a.rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    logs_dir = Path(a.log_dir)
    logs_dir.mkdir(parents=True, exist_ok=True)
    print(f"{a.runs} fresh-clone CI runs of {rev[:10]}, {a.parallel} side by side, {a.load} spinners, "
          f"{os.cpu_count()} CPUs", flush=True)
    passed, done = 0, 0
    while done < a.runs:
        k = min(a.parallel, a.runs - done)
        logs = [logs_dir / f"run-{done + i + 1:02d}.log" for i in range(k)]
        results, samples = wave(repo, rev, logs, a.load)
        mean = sum(samples) / len(samples) if samples else float("nan")
        for i, (ok, wall_s) in enumerate(results):
            passed += ok
            print(f"run {done + i + 1:2d}: {'passed' if ok else 'FAILED'} in {wall_s:.0f} s, load average "
                  f"mean {mean:.1f} (min {min(samples, default=float('nan')):.1f}, max "
                  f"{max(samples, default=float('nan')):.1f}) (log {logs[i]})", flush=True)
        done += k
    print(f"{passed} of {a.runs} runs of {rev[:10]} passed")
    return 0 if passed == a.runs else 1


if __name__ == "__main__":
    sys.exit(main())
