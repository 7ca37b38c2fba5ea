"""The package version: the single source (pyproject.toml reads it at build time)."""

__version__ = "0.2.0"
