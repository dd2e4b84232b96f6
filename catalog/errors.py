"""Errors of the catalog domain.

CatalogError
 ├── SpecError        a document cannot be used: names the file, the location, the reason
 │    └── RefError    a $ref that cannot be resolved (dangling, unreadable, outside the tree)
 └── ConfigError      the configuration file is invalid: names the file and the key

Foreign exceptions (YAML, JSON, TOML) are translated into these once, at the boundary,
with ``raise ... from exc``; nothing from a parser library crosses a package boundary.
"""

from __future__ import annotations

__all__ = ["CatalogError", "ConfigError", "RefError", "SpecError"]


class CatalogError(Exception):
    """Base class of every error the catalog domain raises on purpose."""


class SpecError(CatalogError):
    """A document that cannot be converted, with the file, location and reason."""

    def __init__(self, file: str, location: str, reason: str) -> None:
        self.file = file
        self.location = location
        self.reason = reason
        super().__init__(f"{file}: {location}: {reason}" if location else f"{file}: {reason}")


class RefError(SpecError):
    """A ``$ref`` that cannot be resolved."""


class ConfigError(CatalogError):
    """An invalid configuration file, with the file and key named."""

    def __init__(self, file: str, reason: str) -> None:
        self.file = file
        self.reason = reason
        super().__init__(f"{file}: {reason}")
