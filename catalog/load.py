"""One document in, its tools out: the catalog's single entry point for the indexer.

Pure apart from the injected ``load`` callable, which reads other files of the spec
directory for external ``$ref``s (the indexer passes a filesystem reader; tests pass a
dict lookup).
"""

from __future__ import annotations

from collections.abc import Callable

from catalog.config import SpecConfig
from catalog.convert import DocumentConverter
from catalog.errors import SpecError
from catalog.model import SpecResult
from catalog.openapi import parse_document

__all__ = ["Loader", "convert_document"]

Loader = Callable[[str], bytes]
"""Reads a file by its path relative to the spec directory (forward slashes); raises
``FileNotFoundError`` (or ``OSError``) when it cannot."""


def convert_document(
    source: str,
    data: bytes,
    *,
    namespace: str,
    spec_config: SpecConfig,
    load: Loader,
) -> SpecResult:
    """Convert the document ``source`` (its bytes are ``data``) into tools.

    Args:
        source: the document's path relative to the spec directory, forward slashes.
        data: the document's bytes (YAML or JSON; OpenAPI 3.1, 3.0 or Swagger 2.0).
        namespace: the namespace its tool names get ("" for none).
        spec_config: this document's config section (base URL override, ...).
        load: reads other files for external ``$ref``s.

    Returns:
        The tools (names unique within the document, in document order), the files
        it depends on, and warnings.

    Raises:
        SpecError: the document cannot be used at all (unparseable, unsupported version,
            dangling ``$ref``), naming the file, the location and the reason.
    """
    # Stages (docs/conventions.md §2.10): parse → resolve/normalize/compact per operation → name →
    # fingerprint. The converter is made for this document only: its caches die with it.
    document = parse_document(source, data)
    converter = DocumentConverter(document, namespace=namespace, spec_config=spec_config, load=load)
    try:
        tools = converter.tools()
    except SpecError as exc:
        exc.dependencies = converter.dependencies
        raise
    return SpecResult(
        source=source,
        tools=tuple(tools),
        dependencies=converter.dependencies,
        warnings=tuple(converter.warnings),
    )
