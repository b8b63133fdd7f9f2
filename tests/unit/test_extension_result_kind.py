"""Issue 25 item 5: a new result kind (a JSON output) is one view and one ``register`` line (docs/extending.md).

A fake kind, "water_audit", is declared as one ResultView and registered with one call, nothing else edited; then
a file of it is read back as its view (typed fields checked, unknown keys kept), recognised by its keys when it
has no ``kind``, refused in one line when its schema is newer, and drawn by ``greentrain report`` (the generic
section: no renderer written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.results import codec
from greentrain.results.view import ResultView, view


@view
class WaterAuditResult(ResultView):
    KIND: ClassVar[str] = "water_audit"
    water_l: float
    site: str
    cooling_towers: int | None = None


DATA = {**WaterAuditResult.head(), "water_l": 1234.5, "site": "eu-north", "note": "kept as given"}


@pytest.fixture
def water_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the kind for one test; the registry's tables are put back afterwards."""
    for name in ("REGISTRY", "VERSIONS", "ALIASES"):
        monkeypatch.setattr(codec, name, dict(getattr(codec, name)))
    monkeypatch.setattr(codec, "SIGNATURES", list(codec.SIGNATURES))
    codec.register(WaterAuditResult.KIND, WaterAuditResult.from_dict, lambda d: "water_l" in d and "site" in d)


def test_a_registered_kind_reads_back_as_its_view(water_audit: None, tmp_path: Path) -> None:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(DATA), encoding="utf-8")
    view = codec.load_result(path)
    assert isinstance(view, WaterAuditResult) and view.water_l == 1234.5 and view.cooling_towers is None
    assert view.to_dict() == DATA  # the key the view does not type is written back
    unstamped = {k: v for k, v in DATA.items() if k not in ("kind", "schema_version")}
    assert codec.kind_of(unstamped) == "water_audit"  # a file written before it stamped its kind
    with pytest.raises(ConfigError, match=r"f\.json: water_l='a lot': must be a finite number"):
        codec.from_dict({**DATA, "water_l": "a lot"}, "f.json")
    with pytest.raises(ConfigError, match=r"schema_version=2: is newer than this greentrain reads"):
        codec.from_dict({**DATA, "schema_version": 2}, "f.json")


def test_report_draws_a_registered_kind_without_a_renderer(water_audit: None, tmp_path: Path) -> None:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(DATA), encoding="utf-8")
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Water audit: audit.json" in page and "eu-north" in page and "water_l" in page


def test_without_its_registration_the_kind_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(DATA), encoding="utf-8")
    assert main(["report", str(path), "-o", str(tmp_path / "report.html")]) == 2
    assert "kind='water_audit': is not a result kind greentrain reads" in capsys.readouterr().err
