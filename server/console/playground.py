"""The Search playground's data: ``search_tools`` run as a chosen caller, the page that
caller's agent gets, and the evidence behind its ranking (``ranking.py``).

The search is the agent's own path, ``server.tools.call_tool`` with the same view,
budget and semantic side, so what the page shows is what the agent gets, byte for byte.
The caller is anonymous, whoever a pasted credential makes them (read by the MCP
endpoint's own ``caller_from_headers``), or a caller whose verified token carries a set
of scopes for every scheme. A pasted credential lives in this module's local variables
for one request: it is in no Struct, no page, no log line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from catalog.backends import Document
from catalog.visibility import Presented, partition
from server.console.facts import FactsCache
from server.console.ranking import Ranking, ranking
from server.errors import ToolError
from server.identity.caller import Caller, caller_from_headers
from server.search.explain import Recording
from server.state import ServerState
from server.tools import ToolContext, call_tool
from server.view import CatalogView

__all__ = ["run_playground"]

Mode = Literal["anonymous", "token", "scopes"]
_ANSWER: Final = msgspec.json.Decoder(dict[str, Any])
_SPLIT: Final = re.compile(r"[\s,]+")


class PlaygroundForm(msgspec.Struct, frozen=True, kw_only=True):
    """The playground's form, as the page shows it again (never the credential)."""

    query: str = ""
    tags: str = ""
    """Comma-separated."""
    limit: int = 10
    detail: str = "card"
    caller: Mode = "anonymous"
    header: str = "Authorization"
    """The caller header a pasted credential is sent in."""
    scopes: str = ""
    """Space- or comma-separated, for ``caller = "scopes"``."""


class CallerSummary(msgspec.Struct, frozen=True, kw_only=True):
    """Who the search ran as, without any credential value."""

    mode: str
    authenticated: bool
    presented: tuple[str, ...]
    """``namespace: scheme`` for each scheme the caller presented a credential for."""
    scopes: tuple[str, ...] = ()


class ResultCard(msgspec.Struct, frozen=True, kw_only=True):
    """One result of the answer."""

    name: str
    description: str
    parameters: str
    uncertain: bool


class PlaygroundPage(msgspec.Struct, frozen=True, kw_only=True):
    """The playground: its form, and after a run, the answer and its ranking."""

    form: PlaygroundForm
    headers: tuple[str, ...]
    """Caller headers some document reads: where a pasted credential can go."""
    ran: bool = False
    caller: CallerSummary | None = None
    refused: str = ""
    """Why the MCP endpoint would refuse this caller before any search (HTTP 401)."""
    answer: str = ""
    """The search_tools result text as the agent receives it (indented)."""
    error: bool = False
    """Whether the answer is an error envelope (``isError``)."""
    total: int | None = None
    tags: tuple[str, ...] | None = None
    notice: str = ""
    cards: tuple[ResultCard, ...] = ()
    ranking: Ranking | None = None


def form_of(values: dict[str, str]) -> PlaygroundForm:
    """The form from posted fields (unknown or malformed ones fall back to defaults)."""
    caller = values.get("caller", "anonymous")
    limit = values.get("limit", "10").strip()
    return PlaygroundForm(
        query=values.get("query", ""),
        tags=values.get("tags", ""),
        limit=int(limit) if limit.isdigit() and len(limit) < 6 else 10,
        detail="schema" if values.get("detail") == "schema" else "card",
        caller=caller if caller in ("token", "scopes") else "anonymous",  # type: ignore[arg-type]
        header=values.get("header", "Authorization").strip() or "Authorization",
        scopes=values.get("scopes", ""),
    )


def empty_page(state: ServerState, facts: FactsCache, form: PlaygroundForm) -> PlaygroundPage:
    """The playground before a run."""
    return PlaygroundPage(form=form, headers=_headers(state, facts))


async def run_playground(
    state: ServerState, facts: FactsCache, form: PlaygroundForm, credential: str
) -> PlaygroundPage:
    """Run the form's search as its caller (``credential``: the pasted value, used for
    ``caller = "token"`` only, and dropped when this returns).
    """
    headers = _headers(state, facts)
    current = facts.current()
    if current is None:
        return PlaygroundPage(form=form, headers=headers, ran=True, refused="no catalog loaded")
    view, _, found = current
    caller, summary = _caller(state, view, found.documents, form, credential)
    del credential
    if caller.rejected:
        reason = "the token is invalid, expired, or not issued for this server: HTTP 401"
        return PlaygroundPage(form=form, headers=headers, ran=True, caller=summary, refused=reason)
    arguments: dict[str, Any] = {"query": form.query, "limit": form.limit, "detail": form.detail}
    tags = [t.strip() for t in form.tags.split(",") if t.strip()]
    if tags:
        arguments["tags"] = tags
    record = Recording()
    context = ToolContext(
        view=view,
        caller=caller,
        budget=state.config.server.response_budget_bytes,
        semantic=state.semantic,
        client="console",
        record=record,
    )
    try:
        payload = await call_tool("search_tools", arguments, context)
    except ToolError as exc:
        envelope = state.encoder.encode(exc.envelope())
        return PlaygroundPage(
            form=form,
            headers=headers,
            ran=True,
            caller=summary,
            answer=_indented(envelope),
            error=True,
        )
    answer = _ANSWER.decode(payload)
    results = [r for r in answer.get("results", ()) if isinstance(r, dict)]
    cards = tuple(
        ResultCard(
            name=str(r.get("name", "")),
            description=str(r.get("description", "")),
            parameters=str(r.get("parameters", "")),
            uncertain=bool(r.get("authUncertain", False)),
        )
        for r in results
    )
    evidence = ranking(view, record, shown=frozenset(c.name for c in cards))
    vocabulary = answer.get("tags")
    return PlaygroundPage(
        form=form,
        headers=headers,
        ran=True,
        caller=summary,
        answer=_indented(payload),
        total=int(answer.get("total", 0)),
        tags=tuple(str(t) for t in vocabulary) if isinstance(vocabulary, list) else None,
        notice=str(answer.get("notice", "")),
        cards=cards,
        ranking=evidence,
    )


def _indented(data: bytes) -> str:
    return msgspec.json.format(data, indent=2).decode()


def _headers(state: ServerState, facts: FactsCache) -> tuple[str, ...]:
    current = facts.current()
    if current is None:
        return ("Authorization",)
    view, _, found = current
    plan = state.secrets.plans.get(state.config, found.documents, view.meta.policies)
    names = {name for route in plan.routes for name in route.forwarded}
    return tuple(sorted(names | {"Authorization"}, key=str.lower))


def _caller(
    state: ServerState,
    view: CatalogView,
    documents: Mapping[str, Document],
    form: PlaygroundForm,
    credential: str,
) -> tuple[Caller, CallerSummary]:
    """The caller the form describes, and what the page may say about it."""
    if form.caller == "scopes":
        scopes = frozenset(s for s in _SPLIT.split(form.scopes) if s)
        granted = Presented(verified=True, scopes=scopes)
        presented: dict[str, dict[str, Presented]] = {}
        for policy in view.meta.policies.values():
            for alternative in policy.alternatives:
                for use in alternative:
                    presented.setdefault(policy.namespace, {})[use.scheme.name] = granted
        audience = partition(
            view.meta.policies, presented, missing=state.config.visibility.missing_credentials
        )
        summary = CallerSummary(
            mode="a verified token with these scopes, for every scheme",
            authenticated=True,
            presented=(),
            scopes=tuple(sorted(scopes)),
        )
        return Caller(audience=audience, authenticated=True), summary
    headers: dict[str, str] = {}
    if form.caller == "token" and credential.strip():
        value = credential.strip()
        if form.header.lower() == "authorization" and " " not in value:
            value = f"Bearer {value}"  # a bare token is what people paste
        headers[form.header] = value
    caller = caller_from_headers(
        headers,
        config=state.config,
        documents=documents,
        policies=view.meta.policies,
        secrets=state.secrets,
    )
    summary = CallerSummary(
        mode="anonymous" if not headers else f"a credential in {form.header}",
        authenticated=caller.authenticated,
        presented=tuple(
            f"{namespace or '(no namespace)'}: {scheme}"
            for namespace, schemes in sorted(caller.presented.items())
            for scheme in sorted(schemes)
        ),
    )
    return caller, summary
