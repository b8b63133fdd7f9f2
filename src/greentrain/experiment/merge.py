"""``greentrain experiment report A B ...``: one report of several output folders of the same experiment (split by
``--only``, run on several hosts without a shared disk, or a study's trials run by several runners).

Folders merge when their manifests name the same experiment: the same ``spec_hash`` (the name and the variants'
ids and config hashes; for a search, its base job and space), or for folders written before it existed the same
name, task and site, and no variant with two config hashes. Each variant appears once: the first folder (in the
order given) where it is finished (ok, not applicable), else where it failed or was skipped, else pending.
The attempts of every folder are counted (their waste adds up).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.experiment.attempts import DONE, Attempt, previous_attempts
from greentrain.experiment.results import VariantResult

_RANK = {**dict.fromkeys(DONE, 0), "failed": 1, "skipped_budget": 1, "pending": 2}


def _check_same(first: tuple[Path, dict[str, Any]], other: tuple[Path, dict[str, Any]],
                hashes: dict[str, str]) -> None:
    (d0, m0), (d, m) = first, other
    if m0.get("spec_hash") and m.get("spec_hash"):
        same = m0["spec_hash"] == m["spec_hash"]
    else:
        same = all(m0.get(k) == m.get(k) for k in ("name", "task", "site"))
    for v in m["variants"]:
        if hashes.setdefault(v["variant_id"], v["config_hash"]) != v["config_hash"]:
            same = False
    if not same:
        raise ConfigError("dir", str(d), f"holds experiment {m.get('name')!r} ({m.get('spec_hash', 'no spec hash')}),"
                          f" {d0} holds {m0.get('name')!r} ({m0.get('spec_hash', 'no spec hash')}): only folders of "
                          "the same experiment (name, variants and their config hashes) merge")


def load_merged(dirs: Sequence[Path], load_results: Callable[[Path], tuple[dict[str, Any], list[VariantResult]]]
                ) -> tuple[dict[str, Any], list[VariantResult], list[Attempt]]:
    """The merged manifest (the first folder's, with every folder's variants), one result per variant, and every
    folder's attempts; ``load_results`` reads one folder (report.load_results)."""
    loaded = [(Path(d), *load_results(Path(d))) for d in dirs]
    hashes: dict[str, str] = {}
    for d, man, _ in loaded:
        _check_same((loaded[0][0], loaded[0][1]), (d, man), hashes)
    best: dict[str, VariantResult] = {}
    variants: dict[str, dict[str, Any]] = {}
    for _, man, results in loaded:
        for v in man["variants"]:
            variants.setdefault(v["variant_id"], v)
        for r in results:
            old = best.get(r.variant_id)
            if old is None or _RANK.get(r.status, 1) < _RANK.get(old.status, 1):
                best[r.variant_id] = r
    manifest = {**loaded[0][1], "variants": list(variants.values())}
    attempts = [a for d, _, _ in loaded for a in previous_attempts(d)]
    return manifest, [best[v] for v in variants], attempts
