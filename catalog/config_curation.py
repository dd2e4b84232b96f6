"""What an operator changes in the published catalog: ``[curation]``, its include and
exclude rules, overrides and variants.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = [
    "AnnotationsOverride",
    "CurationConfig",
    "Match",
    "OperationCuration",
    "Override",
    "Variant",
    "VariantRule",
]


class Match(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which operations a curation rule applies to: every given condition must hold.

    Globs use ``fnmatch`` syntax (``*``, ``?``, ``[...]``); ``tag`` compares whole folded
    tags, as the search_tools ``tags`` filter does.
    """

    namespace: str | None = None
    """Glob over the tool's namespace."""
    tag: str | None = None
    """A tag the operation carries (whole, folded)."""
    path: str | None = None
    """Glob over the operation's path template (``/orders/{id}``)."""
    methods: tuple[str, ...] = ()
    """HTTP methods, any case; empty: every method."""
    operation_id: str | None = None
    """Glob over the document's ``operationId``."""
    name: str | None = None
    """Glob over the tool name as converted (before any override renames it)."""
    deprecated: bool | None = None
    """true: only deprecated operations; false: only the others."""

    def is_empty(self) -> bool:
        return self == _EMPTY_MATCH


_EMPTY_MATCH: Final = Match()


class AnnotationsOverride(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hints to set (true) or clear (false); an absent hint keeps its converted value."""

    read_only: bool | None = None
    """``readOnlyHint``: the tool changes nothing."""
    destructive: bool | None = None
    """``destructiveHint``: the tool may delete or overwrite."""
    idempotent: bool | None = None
    """``idempotentHint``: calling it twice does what calling it once does."""
    open_world: bool | None = None
    """``openWorldHint``: the tool reaches things outside the API's own data."""


class Variant(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool published from an operation, with some arguments fixed or defaulted."""

    name: str
    """The variant's tool name (within the operation's namespace)."""
    description: str
    """What the agent reads about the variant."""
    fixed: dict[str, object] = msgspec.field(default_factory=dict)
    """Removed from the variant's inputSchema, stated in its description, sent on invoke."""
    defaults: dict[str, object] = msgspec.field(default_factory=dict)
    """Become the argument's default (and it becomes optional); sent when omitted."""


class Override(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Reshape what an agent reads about matching operations (outputSchema never)."""

    match: Match = _EMPTY_MATCH
    """Which operations it reshapes."""
    name: str | None = None
    """The tool's new name (one matching operation only)."""
    description: str | None = None
    """Replaces the tool's description."""
    search_terms: tuple[str, ...] | None = None
    """Extra words the tool is found by."""
    tags: tuple[str, ...] | None = None
    """Replaces the tool's tags."""
    annotations: AnnotationsOverride | None = None
    """Hints set or cleared."""


class VariantRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Publish each matching operation as the listed variants."""

    match: Match = _EMPTY_MATCH
    """Which operations it applies to."""
    tools: tuple[Variant, ...] = ()
    """The variants each matching operation is published as."""
    keep_original: bool = False
    """Publish the operation itself too, besides its variants."""


class CurationConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Curation rules, applied by the indexer in this order: include, exclude,
    rename_tags, override (in order), variants (in order).
    """

    include: tuple[Match, ...] = ()
    """When any is given, only operations matching one of them are published."""
    exclude: tuple[Match, ...] = ()
    """Operations matching any of them are not published."""
    rename_tags: dict[str, str] = msgspec.field(default_factory=dict)
    """Tag → the tag it becomes (``"Issue Tracking" = "issues"``)."""
    override: tuple[Override, ...] = ()
    """Reshape what agents read about matching operations, in order."""
    variants: tuple[VariantRule, ...] = ()
    """Publish matching operations as variants with arguments fixed, in order."""


class OperationCuration(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="kebab"
):
    """The ``x-sezzlee`` extension on an operation, for teams that own their documents."""

    exclude: bool = False
    name: str | None = None
    description: str | None = None
    search_terms: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    annotations: AnnotationsOverride | None = None
    variants: tuple[Variant, ...] = ()
