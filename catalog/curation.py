"""Curation: publish the catalog an agent should see, not just the one documents describe.

Pure: no I/O. The indexer applies :func:`curate` to each document's converted tools, so
a rule change re-indexes incrementally like any other change and bumps the generation.

Theory of operation (normative; the config format is in ``catalog/config.py``):

* Rules match the operation *as converted*, before any curation: its namespace, tags
  (whole folded tags), path glob, method, operationId glob, tool-name glob, deprecated.
* Order: the document's own ``x-sezzlee`` extension first (the team that owns the
  document speaks first), then the config: ``include``, ``exclude``, ``rename_tags``,
  each ``override`` in order, each ``variants`` rule in order.
* A curated name is published in the tool's namespace: ``octocat_repo`` in ``github``
  is ``github.octocat_repo`` (and ``github.octocat_repo`` stays as it is); it cannot
  name another namespace.
* An override reshapes what an agent reads: name, description, declared search terms,
  tags, annotations. A variant publishes the operation again under its own name and
  description with some arguments *fixed* (removed from its inputSchema, stated in its
  description, sent on invoke; passing one is ``invalid_arguments`` because the schema
  forbids additional properties) or *defaulted* (optional, sent when omitted).
* Curation never reaches ``outputSchema``: every variant of one operation publishes the
  operation's own. Each curated tool is fingerprinted again, so its version covers what
  the agent reads after curation (fixed values included, through the description).
* Every tool records the rules that shaped it (``CatalogTool.curation``), which
  ``python -m indexer --explain NAME`` prints.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any, Final

import jsonschema
import msgspec

from catalog.cards import card_description, parameters_line
from catalog.config import (
    AnnotationsOverride,
    CurationConfig,
    Match,
    OperationCuration,
    Override,
    Variant,
    VariantRule,
)
from catalog.errors import CurationError, SpecError
from catalog.fingerprint import with_version
from catalog.fold import fold_tag
from catalog.model import Annotations, CatalogTool
from catalog.naming import qualify, renamed
from catalog.schema_values import is_json_value

__all__ = ["EXTENSION", "apply_extension", "curate", "for_namespace", "matches"]

EXTENSION: Final = "x-sezzlee"
"""The operation extension that carries a document's own curation."""

_NOWHERE: Final = Match(name="")  # no published name is empty
_SKIP_OVERRIDE: Final = Override(match=_NOWHERE)
_SKIP_VARIANTS: Final = VariantRule(match=_NOWHERE)
_JSON: Final = msgspec.json.Encoder(order="sorted")


def matches(match: Match, tool: CatalogTool) -> bool:
    """Whether ``tool`` (as converted) satisfies every condition of ``match``."""
    route = tool.route
    if match.namespace is not None and match.namespace != tool.namespace:
        return False
    if match.deprecated is not None and match.deprecated != tool.deprecated:
        return False
    if match.methods and route.method not in {m.upper() for m in match.methods}:
        return False
    if match.path is not None and not fnmatch.fnmatchcase(route.path, match.path):
        return False
    if match.operation_id is not None and not fnmatch.fnmatchcase(
        tool.operation_id or "", match.operation_id
    ):
        return False
    if match.name is not None and not fnmatch.fnmatchcase(tool.definition.name, match.name):
        return False
    if match.tag is not None:
        wanted = fold_tag(match.tag)
        if wanted not in {fold_tag(t) for t in tool.search.tags}:
            return False
    return True


def apply_extension(tool: CatalogTool, raw: object, *, file: str) -> tuple[CatalogTool, ...]:
    """Apply an operation's ``x-sezzlee`` extension value ``raw`` to its converted tool.

    Returns the published tools: none when it excludes the operation, several when it
    declares variants.

    Raises:
        SpecError: the extension is malformed, naming the file and the operation.
    """
    where = f"{tool.pointer}/{EXTENSION}"
    try:
        rules = msgspec.convert(raw, type=OperationCuration)
    except msgspec.ValidationError as exc:
        raise SpecError(file, where, f"invalid {EXTENSION}: {exc}") from exc
    if rules.exclude:
        return ()
    rule_name = f"{file}#{where}"
    override = Override(
        name=rules.name,
        description=rules.description,
        search_terms=rules.search_terms,
        tags=rules.tags,
        annotations=rules.annotations,
    )
    try:
        tool = _override(tool, override, rule_name)
        if rules.variants:
            return tuple(_variant(tool, v, rule_name) for v in rules.variants)
    except CurationError as exc:
        raise SpecError(file, where, exc.reason) from exc
    return (tool,)


def curate(tools: Iterable[CatalogTool], rules: CurationConfig) -> tuple[CatalogTool, ...]:
    """Apply the config's curation rules to converted tools, in their order.

    Raises:
        CurationError: a rule cannot be applied (it fixes an argument the operation does
            not have, a fixed value fails the argument's schema, ...), naming the rule.
    """
    published: list[CatalogTool] = []
    for tool in tools:
        published.extend(_curate_one(tool, rules))
    return tuple(published)


def for_namespace(rules: CurationConfig, namespace: str) -> CurationConfig:
    """The rules that can reach tools of ``namespace``; curating with them is the same as
    curating with ``rules``. The indexer hashes them into each document's config inputs,
    so a rule about one namespace re-indexes that namespace's documents only.

    Rule names (``curation.variants[3]``) are kept: an index into the full list.
    """

    def reaches(match: Match) -> bool:
        return match.namespace is None or match.namespace == namespace

    include = tuple(m for m in rules.include if reaches(m))
    # No include rule reaches this namespace: none of its tools is published. One rule
    # that never matches here says exactly that.
    return CurationConfig(
        include=include or rules.include[:1],
        exclude=tuple(m for m in rules.exclude if reaches(m)),
        rename_tags=rules.rename_tags,
        override=tuple(o if reaches(o.match) else _SKIP_OVERRIDE for o in rules.override),
        variants=tuple(v if reaches(v.match) else _SKIP_VARIANTS for v in rules.variants),
    )


def _curate_one(original: CatalogTool, rules: CurationConfig) -> Sequence[CatalogTool]:
    if rules.include and not any(matches(m, original) for m in rules.include):
        return ()
    if any(matches(m, original) for m in rules.exclude):
        return ()
    tool = original
    if rules.rename_tags:
        tool = _rename_tags(tool, rules.rename_tags)
    for i, override in enumerate(rules.override):
        if matches(override.match, original):
            tool = _override(tool, override, f"curation.override[{i}]")
    variants: list[CatalogTool] = []
    keep = True
    for i, rule in enumerate(rules.variants):
        if matches(rule.match, original):
            variants += [_variant(tool, v, f"curation.variants[{i}]") for v in rule.tools]
            keep = keep and rule.keep_original
    if not variants:
        return (tool,)
    return [tool, *variants] if keep else variants


def _rename_tags(tool: CatalogTool, renames: dict[str, str]) -> CatalogTool:
    folded = {fold_tag(old): new for old, new in renames.items()}
    tags = tuple(folded.get(fold_tag(t), t) for t in tool.search.tags)
    if tags == tool.search.tags:
        return tool
    moves = [f"{t!r}→{folded[fold_tag(t)]!r}" for t in tool.search.tags if fold_tag(t) in folded]
    return msgspec.structs.replace(
        tool,
        search=msgspec.structs.replace(tool.search, tags=tags),
        curation=(*tool.curation, f"curation.rename_tags: {', '.join(moves)}"),
    )


def _override(tool: CatalogTool, override: Override, rule: str) -> CatalogTool:
    changed: list[str] = []
    name = _name(tool, override.name, rule) if override.name is not None else None
    if name is not None and name != tool.definition.name:
        tool = renamed(tool, name)
        changed.append("name")
    definition = tool.definition
    card = tool.card
    search = tool.search
    if override.description is not None:
        definition = msgspec.structs.replace(definition, description=override.description)
        card = msgspec.structs.replace(
            card, description=card_description(None, override.description)
        )
        search = msgspec.structs.replace(search, description=override.description)
        changed.append("description")
    if override.search_terms is not None:
        search = msgspec.structs.replace(search, terms=override.search_terms)
        changed.append("search_terms")
    if override.tags is not None:
        search = msgspec.structs.replace(search, tags=override.tags)
        changed.append("tags")
    if override.annotations is not None:
        definition = msgspec.structs.replace(
            definition, annotations=_annotations(definition.annotations, override.annotations)
        )
        changed.append("annotations")
    if not changed:
        return tool
    return msgspec.structs.replace(
        tool,
        definition=with_version(definition),
        card=card,
        search=search,
        curation=(*tool.curation, f"{rule}: {', '.join(changed)}"),
    )


def _annotations(current: Annotations | None, change: AnnotationsOverride) -> Annotations | None:
    base = current or Annotations()
    updated = Annotations(
        read_only_hint=_pick(change.read_only, base.read_only_hint),
        destructive_hint=_pick(change.destructive, base.destructive_hint),
        idempotent_hint=_pick(change.idempotent, base.idempotent_hint),
        open_world_hint=_pick(change.open_world, base.open_world_hint),
    )
    return None if updated.is_empty() else updated


def _pick(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def _name(tool: CatalogTool, name: str, rule: str) -> str:
    try:
        return qualify(tool.namespace, name)
    except ValueError as exc:
        raise CurationError(rule, str(exc)) from exc


def _variant(tool: CatalogTool, variant: Variant, rule: str) -> CatalogTool:
    name = _name(tool, variant.name, rule)
    schema: dict[str, Any] = copy.deepcopy(tool.definition.input_schema)
    properties: dict[str, Any] = schema.setdefault("properties", {})
    required: list[str] = list(schema.get("required", ()))
    for argument, value in (*variant.fixed.items(), *variant.defaults.items()):
        if argument not in properties:
            raise CurationError(
                rule,
                f"variant {variant.name!r}: {argument!r} is not an argument of "
                f"{tool.definition.name} (arguments: {', '.join(properties) or 'none'})",
            )
        _check_value(schema, properties[argument], value, rule, variant.name, argument)
    for argument in variant.fixed:
        del properties[argument]
    for argument, value in variant.defaults.items():
        properties[argument] = {**_schema_object(properties[argument]), "default": value}
    required = [r for r in required if r not in variant.fixed and r not in variant.defaults]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    description = variant.description
    if variant.fixed:
        stated = ", ".join(
            f"{k} = {_JSON.encode(v).decode()}" for k, v in sorted(variant.fixed.items())
        )
        description = f"{description.rstrip()} (Fixed: {stated}.)"
    named = renamed(tool, name)
    definition = with_version(
        msgspec.structs.replace(named.definition, description=description, input_schema=schema)
    )
    card = msgspec.structs.replace(
        named.card,
        description=card_description(None, description),
        parameters=parameters_line(schema),
    )
    search = msgspec.structs.replace(
        named.search, description=description, arguments=tuple(properties)
    )
    route = msgspec.structs.replace(
        tool.route,
        fixed_arguments={**tool.route.fixed_arguments, **variant.fixed},
        default_arguments={**tool.route.default_arguments, **variant.defaults},
    )
    return msgspec.structs.replace(
        tool,
        definition=definition,
        card=card,
        search=search,
        route=route,
        curation=(*tool.curation, f"{rule}: variant {name!r} of {tool.definition.name}"),
    )


def _check_value(
    root: dict[str, Any], schema: Any, value: object, rule: str, variant: str, argument: str
) -> None:
    if not is_json_value(value):
        # JSON has no NaN nor infinity (YAML .nan/.inf, TOML nan/inf): encoded, it is
        # null, so the description, the default and the call would all say null.
        raise CurationError(
            rule,
            f"variant {variant!r}: value for {argument!r} is invalid: {value!r} holds a "
            "number JSON cannot hold (NaN or an infinity)",
        )
    # Validate against the argument's schema with the root's $defs in reach, so a fixed
    # value the backend would reject is caught when the rule is written, not on invoke.
    subject = {**_schema_object(schema), "$defs": root["$defs"]} if "$defs" in root else schema
    errors = sorted(
        jsonschema.Draft202012Validator(subject).iter_errors(value), key=lambda e: e.path
    )
    if errors:
        raise CurationError(
            rule, f"variant {variant!r}: value for {argument!r} is invalid: {errors[0].message}"
        )


def _schema_object(schema: dict[str, Any] | bool) -> dict[str, Any]:
    """A schema as an object, so keywords can be added: OpenAPI 3.1 allows the boolean
    schemas ``true`` (anything) and ``false`` (nothing).
    """
    if isinstance(schema, bool):
        return {} if schema else {"not": {}}
    return schema
