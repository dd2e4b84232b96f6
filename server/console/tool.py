"""The Tool page's data: one tool as an agent meets it and as the gateway calls it.

Its card and its definition (exactly what ``load_tool`` returns to a caller who may see
it), its version, method and URL template, its security schemes, which caller
headers and credentials go to which origin (names only: a value never reaches this
module), and who may see it (``catalog/visibility.py`` decides; this page says it in
words). Read from the tool's own card and payload documents: two index lookups.
"""

from __future__ import annotations

from typing import Final

import msgspec
import tantivy

from catalog.backends import Document, origin_of
from catalog.config import SpecConfig
from catalog.index_schema import (
    PAYLOAD,
    InvokeRecord,
    decode_invoke,
    decode_payloads,
    decode_search,
)
from catalog.model import SecurityScheme, ToolDefinition
from catalog.naming import MAX_NAME_LENGTH
from catalog.visibility import PUBLIC_KEY, Audience
from server.console.facts import FactsCache
from server.identity.credentials import carrier
from server.identity.plans import CredentialRoute
from server.state import ServerState
from server.view import CatalogView

__all__ = ["tool_page"]

_PRETTY: Final = msgspec.json.Encoder()


class SchemeRow(msgspec.Struct, frozen=True, kw_only=True):
    """One security scheme the tool's requirement names, and how its credential travels."""

    name: str
    kind: str
    """``http bearer``, ``apiKey``, ``oauth2``, ..."""
    inbound: str
    """The caller's header it is read from; empty when no header can carry it."""
    sent_as: str
    """Where the backend receives it: ``header Authorization``, ``query api_key``, ..."""
    forwarded: bool
    """Whether this document's backend receives that caller header at all (its
    ``forward_headers``, or ``Authorization`` by default for a single-origin catalog)."""


class AlternativeRow(msgspec.Struct, frozen=True, kw_only=True):
    """One alternative of the requirement: every scheme named, with its scopes."""

    uses: tuple[str, ...]


class ToolPage(msgspec.Struct, frozen=True, kw_only=True):
    """The Tool page."""

    name: str
    found: bool
    source: str = ""
    namespace: str = ""
    version: str = ""
    method: str = ""
    path: str = ""
    base_url: str = ""
    base_from: str = ""
    """``config base_url``, ``document servers``, or empty: no backend (invoke fails)."""
    origin: str = ""
    origins: tuple[str, ...] = ()
    """Every origin the tool's document reaches: where its credentials may go."""
    tags: tuple[str, ...] = ()
    key: str = ""
    card: str = ""
    """The card, as search_tools shows it (JSON)."""
    definition: str = ""
    """The definition, as load_tool returns it (JSON)."""
    public: bool = False
    alternatives: tuple[AlternativeRow, ...] = ()
    schemes: tuple[SchemeRow, ...] = ()
    headers: tuple[str, ...] = ()
    """Caller headers forwarded with every call to this document's backend (names)."""
    static_headers: tuple[str, ...] = ()
    """Headers the gateway adds from its environment (names; never the values)."""
    identity: str = ""
    """The spec's ``identity`` (passthrough, token_exchange, static), when set."""
    verified: bool = False
    """Whether a bearer token is verified (its scopes decide), not taken on trust."""
    missing: str = "hide"
    """What a caller without a credential sees (``[visibility] missing_credentials``)."""


def tool_page(state: ServerState, facts: FactsCache, name: str) -> ToolPage:
    """The Tool page of ``name``, or one saying it is not in the catalog."""
    current = facts.current()
    if current is None or len(name) > MAX_NAME_LENGTH:
        return ToolPage(name=name, found=False)
    view, _, found = current
    parts = _parts(view, name)
    if parts is None:
        return ToolPage(name=name, found=False)
    definition, record, tags, card = parts
    spec = state.config.spec(record.source)
    document = found.documents.get(record.source)
    base = spec.base_url or record.route.base_url or ""
    routes = state.secrets.plans.get(state.config, found.documents, view.meta.policies).routes
    route = next((r for r in routes if r.source == record.source), None)
    schemes: dict[str, SecurityScheme] = {}
    for alternative in record.security.alternatives:
        for use in alternative:
            schemes.setdefault(use.scheme.name, use.scheme)
    return ToolPage(
        name=name,
        found=True,
        source=record.source,
        namespace=record.namespace,
        version=definition.version,
        method=record.route.method,
        path=record.route.path,
        base_url=base.rstrip("/"),
        base_from="config base_url" if spec.base_url else ("document servers" if base else ""),
        origin=origin_of(base) or "" if base else "",
        origins=document.origins if isinstance(document, Document) else (),
        tags=tags,
        key=record.visibility_key,
        card=card,
        definition=_indented(_PRETTY.encode(definition)),
        public=record.security.is_public,
        alternatives=tuple(
            AlternativeRow(uses=tuple(_use(u.scheme.name, u.scopes) for u in alternative))
            for alternative in record.security.alternatives
        ),
        schemes=tuple(_scheme_row(s, spec, route) for s in schemes.values()),
        headers=tuple(h for h in route.forwarded if h.lower() not in route.carriers)
        if route is not None
        else (),
        static_headers=tuple(sorted(spec.static_headers)),
        identity=spec.identity or "",
        verified=spec.jwt is not None or state.secrets.resource is not None,
        missing=state.config.visibility.missing_credentials,
    )


def _parts(
    view: CatalogView, name: str
) -> tuple[ToolDefinition, InvokeRecord, tuple[str, ...], str] | None:
    """The definition as load_tool returns it, the routing record, the tags and the card."""
    everyone = Audience(visible=frozenset({PUBLIC_KEY, *view.meta.policies, *view.meta.tags}))
    hits = view.searcher.search(
        tantivy.Query.term_query(view.schema, PAYLOAD, name), 1, count=False
    ).hits
    cards = view.searcher.search(
        tantivy.Query.term_query(view.schema, "id", name), 1, count=False
    ).hits
    if not hits or not cards:
        return None
    data = view.searcher.doc(hits[0][1]).get_first("payloads")
    parts = decode_payloads(data) if isinstance(data, bytes) else ()
    part = next((p for p in parts if p.name == name), None)
    card = view.searcher.doc(cards[0][1]).get_first("card")
    if part is None or not isinstance(card, bytes):
        return None
    definition = view.load(name, everyone)  # the same call load_tool makes
    return (
        definition,
        decode_invoke(part.invoke),
        decode_search(part.search).tags,
        _indented(card),
    )


def _indented(data: bytes) -> str:
    return msgspec.json.format(data, indent=2).decode()


def _use(scheme: str, scopes: tuple[str, ...]) -> str:
    return f"{scheme} (scopes: {', '.join(scopes)})" if scopes else scheme


def _scheme_row(
    scheme: SecurityScheme, spec: SpecConfig, route: CredentialRoute | None
) -> SchemeRow:
    kind = scheme.type + (f" {scheme.scheme}" if scheme.scheme else "")
    if scheme.type == "apiKey":
        sent_as = f"{scheme.location} {scheme.parameter}"
    elif scheme.type == "mutualTLS":
        sent_as = "the gateway's own client certificate (client_cert)"
    else:
        sent_as = "header Authorization"
    inbound = "" if scheme.type == "mutualTLS" else carrier(scheme, spec)
    return SchemeRow(
        name=scheme.name,
        kind=kind,
        inbound=inbound,
        sent_as=sent_as,
        forwarded=route is not None and bool(inbound) and inbound in route.lowered,
    )
