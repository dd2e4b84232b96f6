"""The catalog domain, shared by the indexer and the server (``docs/architecture.md``)."""

__version__ = "0.1.0"
"""The product's version, its one source: ``pyproject.toml`` reads it, and the server
names it in ``serverInfo``."""
