"""The first worker process, started before the run: it checks every variant, then runs the first it is given.

Checking the variants' training arguments needs the installed transformers (``build.check_training_args``), and
importing it (with torch) takes a worker process ~4.5 s on 2 cores. The check must refuse a bad variant before
any variant trains and before the runner writes anything in its folder, so it runs before the runner joins the
folder. Instead of a process that only checks (and a second import in the first variant's worker), the runner
starts the first worker early, with the environment of the pool's first slot::

    python -m greentrain.experiment.warm
    stdin   line 1: the variants (``Variant.to_dict()``, a JSON list)
    stdout  ``checked`` once every variant passed; else exit 2 with the one-line refusal on stderr
    stdin   line 2: the path of a VARIANT.json to run as ``worker VARIANT.json`` would, or end of file: exit 0

The runner hands that process the first variant that runs in the same environment (a resumed run: the first not
yet done), and closes it unused when none does (all done, a refusal, Ctrl-C). stderr goes to an unnamed temporary
file, which no training output can fill as it could a pipe nobody reads. Every variant's job is parsed before any
import of torch or transformers, so a variant refused by the job schema costs no such import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import IO, Any

from greentrain.errors import ConfigError, GreentrainError

CHECKED = "checked"  # the worker's line on stdout once every variant's training arguments passed
WORKER_ERROR = "greentrain experiment: error: "  # the worker's one-line refusal on stderr


class WarmWorker:
    """One checked worker process waiting for its variant (see the module's text); a context manager that kills
    it when it was never used."""

    def __init__(self, env_extra: Sequence[tuple[str, str]] = (), runner_pid_env: str = "") -> None:
        self.env_extra = tuple(env_extra)
        self._runner_pid_env = runner_pid_env
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None
        self._lock = threading.Lock()

    def check(self, variants: list[dict[str, Any]]) -> None:
        """Start the worker and wait for its verdict on ``variants``; a refusal is a GreentrainError (one line)."""
        env = {**os.environ, **dict(self.env_extra)}
        if self._runner_pid_env:
            env[self._runner_pid_env] = str(os.getpid())
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (closed in run/close)
        self._proc = subprocess.Popen([sys.executable, "-m", "greentrain.experiment.warm"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, env=env)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(variants) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:  # died while starting: its stderr says why
            pass
        for line in self._proc.stdout:  # a library may print on import: the verdict is the line CHECKED
            if line.strip() == CHECKED:
                return
        code = self._proc.wait()
        lines = self.take_stderr().strip().splitlines()
        self.close()
        raise GreentrainError(lines[-1].removeprefix(WORKER_ERROR) if lines else f"the check exited {code}")

    def take(self, env_extra: Sequence[tuple[str, str]]) -> subprocess.Popen[str] | None:
        """The waiting process, once, for a variant run in ``env_extra``; None when taken or another environment."""
        with self._lock:
            proc = self._proc
            if proc is None or tuple(env_extra) != self.env_extra:
                return None
            self._proc = None
            return proc

    def run(self, proc: subprocess.Popen[str], spec_path: str) -> tuple[int, str]:
        """Run VARIANT.json in the taken process: its exit status and stderr."""
        assert proc.stdin is not None
        try:
            proc.stdin.write(spec_path + "\n")
            proc.stdin.close()
        except BrokenPipeError:  # it died waiting (a signal): its status says so
            pass
        code = proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return code, self.take_stderr()

    def take_stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read()
        self._stderr.close()
        self._stderr = None
        return text

    def close(self) -> None:
        """Kill the process when nobody took it (it is only waiting on its stdin)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                if f is not None:
                    f.close()
        if self._stderr is not None and proc is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> WarmWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_variants(variants: list[dict[str, Any]]) -> None:
    """Each variant's job (all of them first: no torch), then its training arguments (against the installed
    transformers); nothing is built."""
    from greentrain.experiment.job import parse_job

    def named(v: dict[str, Any], e: ConfigError) -> ConfigError:
        return ConfigError(f"variant {v['variant_id']}: {e.field}", e.value, e.rule)

    jobs = []
    for v in variants:
        try:
            jobs.append(parse_job(v["job"]))
        except ConfigError as e:
            raise named(v, e) from None
    from greentrain.experiment.build import check_training_args

    for v, job in zip(variants, jobs, strict=True):
        try:
            check_training_args(job)
        except ConfigError as e:
            raise named(v, e) from None


def checked_then_run() -> int:
    """``python -m greentrain.experiment.warm``: check the variants of stdin's first line, say ``checked`` on
    stdout (exit 2 with one line when one is refused), then run the VARIANT.json named on stdin's second line as
    ``python -m greentrain.experiment.worker VARIANT.json`` does (end of file: nothing to run)."""
    from greentrain.experiment import ranks

    ranks.die_with_parent(int(os.environ.get(ranks.PARENT_ENV, os.getppid())))
    try:
        check_variants(json.loads(sys.stdin.readline()))
    except ConfigError as e:
        print(f"{WORKER_ERROR}{e}", file=sys.stderr)
        return 2
    print(CHECKED, flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)  # from here a worker's stdout goes nowhere, as the runner's others
    os.dup2(devnull, 1)
    os.close(devnull)
    path = sys.stdin.readline().strip()
    if not path:
        return 0
    from greentrain.experiment.worker import main

    return main([path])


if __name__ == "__main__":
    raise SystemExit(checked_then_run())
