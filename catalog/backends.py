"""Which backend each document reaches, and which documents a caller's credential may reach.

Pure: the indexer records each document's declared origins (``IndexMeta.origins``), the
server and ``python -m indexer --check`` apply the config here. The normative rules are
``docs/credentials.md``:

* A backend is an *origin*, ``scheme://host:port``. Credentials and forwarded headers
  are bound to one document and the origins it reaches (its ``base_url`` when the config
  sets one, else its ``servers``), never to a namespace label.
* Without ``forward_headers`` a document receives ``Authorization`` only when the whole
  catalog reaches a single origin (:func:`single_origin`).
* Two documents that share a namespace but reach different origins, where either one
  is configured to receive a caller's headers, are refused (:func:`route_conflicts`):
  visibility reads credentials per namespace, so one document's credential would unlock
  the other's operations at a backend that never sees it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import msgspec

from catalog.config import Config, default_namespace

__all__ = [
    "Document",
    "conflicted_namespaces",
    "declared_origins",
    "documents_of",
    "namespace_for",
    "origin_of",
    "route_conflicts",
    "single_origin",
]


def origin_of(url: str) -> str | None:
    r"""``scheme://host:port`` of an absolute http(s) URL, or None.

    A backslash anywhere before the path is refused: WHATWG URL parsers read it as the
    start of the path (``http://h:1\@h2:2/`` is host ``h``), ``urlsplit`` as userinfo
    (host ``h2``). A URL two parsers disagree on must not decide where a credential goes.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or "\\" in parts.netloc:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


def declared_origins(base_urls: Iterable[str | None]) -> tuple[str, ...]:
    """The distinct origins of a document's operations' server URLs, sorted (what the
    indexer records in ``IndexMeta.origins``); a relative or unusable URL names none.
    """
    return tuple(sorted({o for url in base_urls if url and (o := origin_of(url))}))


def namespace_for(source: str, config: Config) -> str:
    """The namespace of the document ``source``: its config section's, or the path slug."""
    namespace = config.spec(source).namespace
    return default_namespace(source) if namespace is msgspec.UNSET else namespace


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """One document of the catalog as credential routing sees it."""

    source: str
    namespace: str
    origins: tuple[str, ...]
    """Where its operations are sent, sorted; empty when it has no usable server URL."""


def documents_of(
    sources: Iterable[str], declared: Mapping[str, Sequence[str]], config: Config
) -> dict[str, Document]:
    """Source → :class:`Document` for ``sources`` (the index meta's ``files``).

    Args:
        sources: the catalog's documents.
        declared: source → the origins its operations' own server URLs name
            (``IndexMeta.origins``).
        config: a spec's ``base_url`` replaces what the document declares.
    """
    documents = {}
    for source in sorted(sources):
        base = config.spec(source).base_url
        if base:
            origin = origin_of(base)
            origins: tuple[str, ...] = (origin,) if origin else ()
        else:
            origins = tuple(sorted(set(declared.get(source, ()))))
        documents[source] = Document(
            source=source, namespace=namespace_for(source, config), origins=origins
        )
    return documents


def single_origin(documents: Mapping[str, Document]) -> bool:
    """Whether the catalog's documents reach exactly one origin between them: the only
    case in which ``Authorization`` is forwarded without ``forward_headers``.
    """
    return len({origin for d in documents.values() for origin in d.origins}) == 1


def route_conflicts(documents: Mapping[str, Document], config: Config) -> list[str]:
    """One message per pair of documents that share a namespace, reach different
    origins, and of which at least one receives a caller's headers by config
    (``forward_headers`` or ``credentials``); the message names both files.
    """
    return [
        f"specs {first.source!r} and {other.source!r} share the namespace {namespace!r} "
        f"but reach different backends ({', '.join(first.origins)} and "
        f"{', '.join(other.origins)}): a caller's credential for one would count for the "
        "other; give them different namespaces"
        for namespace, first, other in _conflicts(documents, config)
    ]


def conflicted_namespaces(documents: Mapping[str, Document], config: Config) -> frozenset[str]:
    """The namespaces :func:`route_conflicts` finds fault with."""
    return frozenset(namespace for namespace, _, _ in _conflicts(documents, config))


def _conflicts(
    documents: Mapping[str, Document], config: Config
) -> Iterator[tuple[str, Document, Document]]:
    by_namespace: dict[str, list[Document]] = {}
    for document in documents.values():
        if document.origins:  # a document with no backend receives nothing
            by_namespace.setdefault(document.namespace, []).append(document)
    for namespace, group in sorted(by_namespace.items()):
        if not any(_routes_credentials(config, d.source) for d in group):
            continue
        first = group[0]
        for other in group[1:]:
            if other.origins != first.origins:
                yield namespace, first, other


def _routes_credentials(config: Config, source: str) -> bool:
    spec = config.spec(source)
    return bool(spec.forward_headers) or bool(spec.credentials)
