"""Errors of the catalog domain.

CatalogError
 ├── SpecError        a document cannot be used: names the file, the location, the reason
 │    └── RefError    a $ref that cannot be resolved (dangling, unreadable, outside the tree)
 ├── ConfigError      the configuration file is invalid: names the file and the key
 ├── CurationError    a curation rule cannot be applied: names the rule and the reason
 └── InvalidSearchArguments  search_tools arguments of a kind no clamp can repair

Foreign exceptions (YAML, JSON, TOML) are translated into these once, at the boundary,
with ``raise ... from exc``; nothing from a parser library crosses a package boundary.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CurationError",
    "InvalidSearchArguments",
    "NotADocument",
    "RefError",
    "SpecError",
]


class CatalogError(Exception):
    """Base class of every error the catalog domain raises on purpose."""


class SpecError(CatalogError):
    """A document that cannot be converted, with the file, location and reason.

    ``dependencies`` are the other files the conversion had tried to read by then (set by
    :func:`catalog.load.convert_document`): a missing or broken one may be what failed
    it, so its arrival or repair must convert the document again.

    ``code`` names the kind for the problem the indexer records (one per class,
    ``catalog/spec/schema-conversion.md``, Problems).
    """

    code: str = "document-invalid"

    def __init__(self, file: str, location: str, reason: str) -> None:
        self.file = file
        self.location = location
        self.reason = reason
        self.dependencies: tuple[str, ...] = ()
        super().__init__(f"{file}: {location}: {reason}" if location else f"{file}: {reason}")


class NotADocument(SpecError):
    """The file parses, but holds no ``openapi`` or ``swagger`` field: not a document of
    its own. The indexer treats it as a fragment when other documents ``$ref`` it.
    """

    code = "not-a-document"


class RefError(SpecError):
    """A ``$ref`` that cannot be resolved."""

    code = "ref-unresolved"


class ConfigError(CatalogError):
    """An invalid configuration file, with the file and key named."""

    def __init__(self, file: str, reason: str) -> None:
        self.file = file
        self.reason = reason
        super().__init__(f"{file}: {reason}")


class InvalidSearchArguments(CatalogError):
    """search_tools arguments of the wrong kind (a non-string query, tags that are not a
    list of strings, a limit that is no number); the server answers ``invalid_arguments``.

    Attributes:
        errors: one ``{"path", "message"}`` entry per offending argument.
    """

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))


class CurationError(CatalogError):
    """A curation rule that cannot be applied to the operations it matches.

    ``code`` names the kind for the problem the indexer records.
    """

    code: str = "curation-failed"

    def __init__(self, rule: str, reason: str) -> None:
        self.rule = rule
        self.reason = reason
        super().__init__(f"{rule}: {reason}")
