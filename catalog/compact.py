"""Templates → self-contained JSON Schemas within a size bound: single-use references
inlined, repeated or recursive ones hoisted into root ``$defs``, and what does not fit
cut, largest first.

Pure: no I/O. The rule is stated in ``catalog/spec/schema-conversion.md`` (Compact
definitions, Size bound).

Theory of operation. A :class:`Compactor` serves one document; :meth:`Compactor.schemas`
turns an operation's input and output templates (from ``catalog.normalize``) into the
published inputSchema and outputSchema, sharing one byte budget between them. Each schema
goes through three steps:

1. *plan*: decide which referenced schemas are expanded. Every referenced schema has a
   measured size (its JSON bytes, and the same without ``examples``; cached per
   document). When everything reachable fits, everything is expanded. Otherwise the
   ``examples`` go first (they only illustrate); when that is not enough, the schemas
   are taken in order of importance, each with its ``allOf`` bases as one unit: the
   root's references, then the root's top-level properties (smallest first), then
   breadth-first by nesting level, smallest first within a level, each taken while it
   fits. What is not taken (the largest at each level) is *cut*: published as
   ``{"description": "<name>: not expanded (the schema is too large)"}``.
2. *count* and *emit*: a target used once is inlined in place (keywords written beside
   the ``$ref`` in 3.1 are merged over it, or beside an ``allOf`` of it when merging
   would change what they mean), one used more often becomes
   ``{"$ref": "#/$defs/<name>"}`` with its body emitted once under ``$defs``. Plain
   (reference-free) subtrees are shared, never copied (unless their examples go).
3. *check*: the sizes are measured exactly for plain subtrees and conservatively for
   references, so a plan close to the budget is checked on the encoded result, and
   planned again under a smaller budget if over. Only when even the root and its
   top-level properties cannot fit is the emitted JSON itself shrunk (long texts cut,
   then the largest subschemas replaced by the same note). The bound always holds.

The steps of one schema are ``compact_run.py``'s :class:`~catalog.compact_run.Run`; the
sizes it plans with are ``compact_measure.py``'s, and ``compact_shrink.py`` drops
examples and is the last resort.

Caches (document-wide, on the :class:`Compactor`): the size and references of each
referenced schema; the compacted result of a bare reference (most response bodies): the
uncut one, and a cut one per budget, rounded down to :data:`_QUANTUM`; its uncut size
and its core's; and the emitted body of each referenced target with the decisions it was
emitted under (for every reference met below it: inlined, hoisted under which name, or
cut), reused when those decisions are the same in the schema at hand, which is exactly
when emitting it again would give the same JSON.

``$defs`` names are the last token of the target's JSON pointer (``simple-user``),
made pointer-safe, with ``_2``, ``_3`` for clashes in first-use order: deterministic.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from catalog.compact_measure import measure
from catalog.compact_run import MAX_REF_DEPTH, DocumentSchemas, Run
from catalog.compact_shrink import NOT_EXPANDED, squeezed
from catalog.normalize import Direction, Normalizer, Ref

__all__ = ["MAX_DEFINITION_BYTES", "MAX_REF_DEPTH", "NOT_EXPANDED", "Compactor"]

MAX_DEFINITION_BYTES: Final = 64 * 1024
"""The most bytes of JSON one published tool definition takes (name, description, both
schemas, annotations, version: what load_tool answers)."""

_TRUST: Final = 0.8
"""Below this share of the budget a plan's estimate is taken as it is; above, the result
is measured (estimates are exact for plain subtrees, conservative for references)."""

_ATTEMPTS: Final = 3
_QUANTUM: Final = 1024
"""A bare reference's budget is rounded down to a multiple of this, so that operations
whose budgets differ by a few bytes (their descriptions) share one result."""
_encode = msgspec.json.encode


# -- compacting -------------------------------------------------------------------------


class Compactor:
    """Compacts the schemas of one document's operations; holds the document-wide caches.

    Args:
        normalizer: the document's normalizer (holds the referenced templates).
    """

    __slots__ = ("_bare", "_cores", "_cut", "_needs", "_schemas")

    def __init__(self, normalizer: Normalizer) -> None:
        self._schemas = DocumentSchemas(normalizer.target)
        self._cores: dict[tuple[str, int], int] = {}
        self._needs: dict[tuple[str, Direction], int] = {}
        self._cut: dict[tuple[str, Direction, int], tuple[Any, int]] = {}
        self._bare: dict[tuple[str, Direction], tuple[Any, int, int]] = {}

    def schemas(
        self, arguments: Any, output: Any | None, budget: int
    ) -> tuple[dict[str, Any], Any | None]:
        """The compacted inputSchema and outputSchema of one operation, together within
        ``budget`` bytes of JSON.

        The input gets what it needs, up to what leaves the output the lesser of its own
        need and a quarter of the budget; the output gets what the input leaves. So a
        small input is never cut because the output is large, nor a small output because
        the input is; when both are large the arguments, which a call cannot do without,
        come first. But the output keeps room for its *core* when both cores fit
        together (each root's references and its top-level properties' types, see
        :meth:`Run.core`), or else for its root's references when both roots do: no
        root or top-level property goes while they fit without deeper schemas.
        """
        if output is None:
            return self.schema(arguments, "in", budget)[0], None
        share = budget // 4
        reserve = min(self._need(output, "out", share), share)
        if reserve == share:  # the output needs more than a quarter
            need_in = self._need(arguments, "in", budget)
            if need_in + self._need(output, "out", budget - need_in) > budget:
                for kinds in (2, 1):
                    core_in = Run(self._schemas, "in").core(arguments, kinds)
                    core_out = self._core(output, kinds)
                    if core_in + core_out <= budget:
                        reserve = min(max(reserve, core_out), budget - core_in)
                        break
        input_schema = self.schema(arguments, "in", budget - reserve)[0]
        used = len(_encode(input_schema))  # exact: the output may take all that is left
        return input_schema, self.schema(output, "out", budget - used)[0]

    def schema(self, template: Any, direction: Direction, budget: int) -> tuple[Any, int]:
        """One compacted schema within ``budget`` bytes, and its size (an upper bound).

        Args:
            template: a template from :class:`~catalog.normalize.Normalizer` (a root that
                is itself a bare reference to a repeated schema should be wrapped by the
                caller first, so that ``$defs`` has an object to live in).
            direction: ``"in"`` for request schemas, ``"out"`` for response schemas.
            budget: the most bytes of JSON the schema may take.
        """
        if type(template) is not Ref or template.extra is not None:
            out, size, _ = self._compact(template, direction, budget)
            return out, size
        # A bare reference (most response bodies) is compacted once per document for
        # each budget, to the quantum below: operations returning the same schema share
        # the result, which depends on nothing else.
        budget -= budget % _QUANTUM
        whole = self._bare.get((template.key, direction))
        if whole is not None and self._fits(whole[2], whole[1], budget):
            return whole[0], whole[1]
        slot = (template.key, direction, budget)
        done = self._cut.get(slot)
        if done is None:
            out, size, estimate = self._compact(template, direction, budget)
            if estimate is None:
                done = self._cut[slot] = (out, size)
            else:
                # Nothing cut: the same for every budget that passes the same test.
                self._bare[(template.key, direction)] = (out, size, estimate)
                done = (out, size)
        return done

    def _compact(
        self, template: Any, direction: Direction, budget: int
    ) -> tuple[Any, int, int | None]:
        """A schema within ``budget``, its size, and its estimate when nothing was cut
        and no example dropped (None otherwise).
        """
        plan_budget = budget
        for _ in range(_ATTEMPTS):
            run = Run(self._schemas, direction)
            estimate = run.plan(template, plan_budget)
            out = run.emit_all(template)
            size = estimate if estimate <= budget * _TRUST else len(_encode(out))
            if size <= budget and not run.root_cut:
                if run.whole and not run.lean:
                    return out, len(_encode(out)), estimate
                return out, size, None
            if not run.kept or run.root_cut:
                break  # cutting more cannot help
            plan_budget = plan_budget * budget // size - 64
        if run.root_cut:
            # Even the root's own schemas exceed the budget: they are kept, and shrunk,
            # rather than published as a bare note.
            run = Run(self._schemas, direction)
            run.core(template, 1)
            out = run.emit_all(template)
        out = squeezed(out, budget)
        return out, len(_encode(out)), None

    @staticmethod
    def _fits(estimate: int, size: int, budget: int) -> bool:
        """Whether a whole result passes, under ``budget``, the tests it passed when
        made: its estimate within the budget, and trusted or measured within it.
        """
        return estimate <= budget and (estimate <= budget * _TRUST or size <= budget)

    def _core(self, output: Any, kinds: int) -> int:
        """An output's core size (:meth:`Run.core`), shared for a bare reference."""
        if type(output) is not Ref or output.extra is not None:
            return Run(self._schemas, "out").core(output, kinds)
        slot = (output.key, kinds)
        size = self._cores.get(slot)
        if size is None:
            size = self._cores[slot] = Run(self._schemas, "out").core(output, kinds)
        return size

    def _need(self, template: Any, direction: Direction, cap: int) -> int:
        """About the bytes a schema takes without cuts (with its examples gone), or more
        than ``cap`` when that is more.
        """
        if type(template) is Ref and template.extra is None:
            # Shared: measured up to the largest budget, it answers any smaller cap
            # alike (the need itself, or more than the cap).
            slot = (template.key, direction)
            need = self._needs.get(slot)
            if need is None:
                need = self._needs[slot] = self._closure(template, direction, MAX_DEFINITION_BYTES)
            return need
        return self._closure(template, direction, cap)

    def _closure(self, template: Any, direction: Direction, cap: int) -> int:
        refs: list[str] = []
        total = measure(template, refs)[1]
        seen: set[str] = set()
        while refs and total <= cap:
            key = refs.pop()
            if key not in seen:
                seen.add(key)
                shape = self._schemas.shape(key, direction)
                total += shape.lean
                refs.extend(shape.refs)
        return total
