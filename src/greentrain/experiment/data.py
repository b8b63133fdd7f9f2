"""Text pairs for a fine-tuning experiment: the built-in synthetic task, or the user's JSONL/CSV/saved data set.

``synthetic-news`` (deterministic from the seed): an article of 3-5 sentences in which exactly one sentence
reports the key fact (a person, a verb of the "event" set, an object, a city, a day); the summary is that
sentence. Filler sentences use other verbs, so a model must learn which sentence to copy: random-init T5
learns it in a few hundred steps on 2 CPUs, which makes ROUGE differences between variants real and cheap.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from greentrain.config import read_text
from greentrain.errors import ConfigError, csv_errors

SYNTHETIC_SOURCES = ("synthetic-news",)

_PEOPLE = ("anna", "boris", "chen", "dara", "emil", "fatima", "goran", "hana", "ivan", "julia", "kofi", "lena",
           "marco", "nadia", "omar", "priya", "quinn", "rosa", "sami", "tara", "umar", "vera", "wen", "yusuf")
_EVENT_VERBS = ("opened", "sold", "launched", "closed", "bought", "built", "won", "signed")
_FILLER_VERBS = ("discussed", "praised", "visited", "mentioned", "reviewed", "watched", "described", "noted")
_OBJECTS = ("a bakery", "the bridge", "a startup", "the museum", "a factory", "the stadium", "a school",
            "the harbour", "a library", "the clinic", "a vineyard", "the airport", "a garden", "the theatre")
_CITIES = ("paris", "lagos", "lima", "oslo", "delhi", "quito", "cairo", "seoul", "perth", "tunis", "riga",
           "dakar", "hanoi", "porto")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ADJECTIVES = ("busy", "quiet", "cold", "sunny", "long", "short", "calm", "windy")


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPairs:
    """Sources and their reference summaries (targets), in order."""

    sources: tuple[str, ...]
    targets: tuple[str, ...]

    def __post_init__(self) -> None:
        assert len(self.sources) == len(self.targets)

    def __len__(self) -> int:
        return len(self.sources)

    def slice(self, start: int, stop: int) -> TextPairs:
        return TextPairs(sources=self.sources[start:stop], targets=self.targets[start:stop])


def _key_fact(rng: random.Random) -> str:
    return (f"{rng.choice(_PEOPLE)} {rng.choice(_EVENT_VERBS)} {rng.choice(_OBJECTS)} in {rng.choice(_CITIES)} "
            f"on {rng.choice(_DAYS)} .")


def _filler(rng: random.Random) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        return f"{rng.choice(_PEOPLE)} {rng.choice(_FILLER_VERBS)} {rng.choice(_OBJECTS)} ."
    if kind == 1:
        return f"the weather in {rng.choice(_CITIES)} was {rng.choice(_ADJECTIVES)} ."
    return f"officials {rng.choice(_FILLER_VERBS)} {rng.choice(_OBJECTS)} on {rng.choice(_DAYS)} ."


def synthetic_news(n: int, seed: int) -> TextPairs:
    """``n`` articles (3-5 sentences, one key fact at a random position) and their one-sentence summaries."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(n):
        fact = _key_fact(rng)
        sentences = [_filler(rng) for _ in range(rng.randint(2, 4))]
        sentences.insert(rng.randint(0, len(sentences)), fact)
        sources.append(" ".join(sentences))
        targets.append(fact)
    return TextPairs(sources=tuple(sources), targets=tuple(targets))


# a JSONL or CSV data file read whole into memory: 1e6 examples (BOUNDS["examples"]) of ~1 kB; larger sets are
# saved data set folders (datasets.Dataset.save_to_disk), read by `datasets`
DATA_MAX_BYTES = 2**30

def _rows_jsonl(path: Path) -> list[dict[str, object]]:
    rows = []
    for i, line in enumerate(read_text(path, "data.path", max_bytes=DATA_MAX_BYTES).splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError("data.path", f"{path}:{i + 1}", "malformed JSON line") from None
        if not isinstance(row, dict):
            raise ConfigError("data.path", f"{path}:{i + 1}", "each line must be a JSON object")
        rows.append(row)
    return rows


def _rows(path: Path) -> list[dict[str, object]]:
    if path.is_dir():  # a data set saved with `datasets.Dataset.save_to_disk`
        try:
            from datasets import load_from_disk  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ConfigError("data.path", str(path), "a saved data set needs `datasets`: "
                              "pip install 'greentrain[experiment]'") from None
        return [dict(r) for r in load_from_disk(str(path))]
    if not path.is_file():
        raise ConfigError("data.path", str(path), "file does not exist")
    if path.suffix == ".jsonl":
        return _rows_jsonl(path)
    if path.suffix == ".csv":  # a UTF-8 text file of at most DATA_MAX_BYTES, cells csv can parse
        text = read_text(path, "data.path", max_bytes=DATA_MAX_BYTES)
        with csv_errors("data.path", path):
            return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""))]
    raise ConfigError("data.path", str(path), "must be a .jsonl or .csv file or a saved data set folder")


def read_pairs(path: str | Path, source_column: str, target_column: str) -> TextPairs:
    """Pairs from a JSONL or CSV file (or a saved data set); a missing column is a ConfigError."""
    rows = _rows(Path(path))
    if not rows:
        raise ConfigError("data.path", str(path), "has no rows")
    for field, column in (("data.source_column", source_column), ("data.target_column", target_column)):
        missing = next((i for i, r in enumerate(rows) if column not in r), None)
        if missing is not None:
            raise ConfigError(field, column, f"column missing in {path} (row {missing + 1}; columns: "
                              f"{', '.join(sorted(map(str, rows[missing])))})")
    return TextPairs(sources=tuple(str(r[source_column]) for r in rows),
                     targets=tuple(str(r[target_column]) for r in rows))


def load_splits(source: str, path: str, source_column: str, target_column: str, sizes: Sequence[int],
                seed: int) -> tuple[TextPairs, ...]:
    """Consecutive train / eval / test splits of the given sizes (synthetic: generated; a file: its first rows)."""
    total = sum(sizes)
    if source in SYNTHETIC_SOURCES:
        pairs = synthetic_news(total, seed)
    else:
        pairs = read_pairs(path, source_column, target_column)
        if len(pairs) < total:
            raise ConfigError("data.path", path, f"has {len(pairs)} rows; the splits need {total}")
    out, start = [], 0
    for n in sizes:
        out.append(pairs.slice(start, start + n))
        start += n
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthStats:
    """Token lengths of one side of the examples (sources or targets) against the length they are cut to (the
    seed's "check the sequence length distribution of source and target tokens" before truncating)."""

    count: int
    max_tokens: int  # the cut (data.max_source_tokens or data.max_target_tokens)
    p50_tokens: float
    p95_tokens: float
    longest_tokens: int
    truncated: int  # examples longer than max_tokens

    @property
    def truncated_fraction(self) -> float:
        return self.truncated / self.count if self.count else 0.0


def length_stats(lengths: Sequence[int], max_tokens: int) -> LengthStats:
    """Median, 95th percentile (numpy's linear interpolation), longest and how many exceed ``max_tokens``."""
    import numpy as np

    if not lengths:
        return LengthStats(count=0, max_tokens=max_tokens, p50_tokens=0.0, p95_tokens=0.0, longest_tokens=0,
                           truncated=0)
    a = np.asarray(lengths, dtype=np.int64)
    return LengthStats(count=len(a), max_tokens=max_tokens, p50_tokens=float(np.percentile(a, 50)),
                       p95_tokens=float(np.percentile(a, 95)), longest_tokens=int(a.max()),
                       truncated=int((a > max_tokens).sum()))
