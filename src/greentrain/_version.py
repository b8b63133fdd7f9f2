"""The package version: a leaf module (imports nothing), so any layer may read it without the package face."""

__version__ = "0.2.0"  # moves with pyproject.toml's version and CHANGELOG.md (tests/unit/test_version.py)
