"""Regenerate greentrain's error-band table (src/greentrain/calibrate/bands.yaml) from published measured runs.

Runs `greentrain validate`'s predictions on every calibration CSV (each row with its own framework; the
playbook sweep as nanotron over efa-400, as docs/validation.md scores it) and writes the 80th-percentile
|throughput error| per class (framework x chip x dense/MoE x scale). Run it after any change to the estimator:

    .venv/bin/python benchmarks/make_bands.py [--calibration DIR] [--out PATH]

DIR holds the calibration CSVs (default: tests/data/calibration, where Korthikanti et al. 2022 Table 5 is read
from too).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from greentrain.calibrate.bands import bands_to_yaml, build_bands
from greentrain.calibrate.runs import Run, read_runs
from greentrain.calibrate.validate import Prediction, validate

ROOT = Path(__file__).resolve().parents[1]
# (file, framework for every row or "" for each row's own, inter-node link or "")
CSVS = (("llmfoundry-a100-80gb.csv", "", ""), ("torchtitan-a100-2404.csv", "", ""),
        ("megatron-bridge-2509.csv", "", ""), ("playbook-h100-1b-3b.csv", "nanotron", "efa-400"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", type=Path, default=ROOT / "tests" / "data" / "calibration")
    ap.add_argument("--out", type=Path, default=ROOT / "src" / "greentrain" / "calibrate" / "bands.yaml")
    args = ap.parse_args(argv)
    files = [(args.calibration / name, fw, link) for name, fw, link in CSVS]
    files.append((ROOT / "tests" / "data" / "calibration" / "korthikanti2022-table5.csv", "", ""))
    missing = [str(p) for p, _, _ in files if not p.exists()]
    if missing:
        print(f"make_bands: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    runs: list[Run] = []
    preds: list[Prediction] = []
    for path, framework, link in files:
        rs = read_runs(path, inter_node_link=link)
        ps, summary = validate(rs, framework=framework)
        runs += rs
        preds += ps
        print(f"{path.name}: {len(rs)} runs, throughput error mean {summary.throughput_error_mean}")
    bands = build_bands(runs, preds)
    sources = [f"{p.name} ({fw or 'each row its framework'}{', ' + link if link else ''})" for p, fw, link in files]
    text = bands_to_yaml(bands, sources, "python benchmarks/make_bands.py", datetime.date.today().isoformat())
    args.out.write_text(text, encoding="utf-8")
    for b in bands:
        print(f"{b.label:55s} n={b.runs:5d} band {100 * b.band:5.1f} % mean {100 * b.mean_abs:5.1f} % "
              f"bias {100 * b.bias:+5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
