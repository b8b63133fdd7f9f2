"""The package version: a leaf module (imports nothing), so any layer may read it without the package face."""

__version__ = "0.1.0"
