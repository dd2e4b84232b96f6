"""``--check`` and ``--explain``: every document converted, curated and named as a full
build would, and nothing written.

``check`` reports each document's problems and the config's (a spec section that
matches no document, a file the server would read that is missing, conflicting
credential routes); ``explain`` prints where one published tool comes from and the
curation rules that shaped it.
"""

from __future__ import annotations

import difflib
import os
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Final

import msgspec

from catalog.backends import documents_of, route_conflicts
from catalog.config import Config, missing_files, with_files_from
from catalog.index_schema import SCHEMA_VERSION
from catalog.model import CatalogTool
from indexer.build import Converter
from indexer.conversion import Conversion
from indexer.curation_faults import blamed_on_documents
from indexer.fields import decode_tools
from indexer.manifest import BROKEN, Manifest
from indexer.names import apply_names, assign_names
from indexer.plan import make_plan
from indexer.report import Reporter
from indexer.scan import ScanResult, scan, unlisted_problem

__all__ = ["check", "explain"]

_JSON: Final = msgspec.json.Encoder(order="sorted")


def _convert_all(
    specs_dir: Path, config: Config, *, workers: int, skip: Path | None
) -> tuple[ScanResult, dict[str, Conversion]]:
    """Every document converted, curated and named as a full build would (``skip``: the
    index directory, whose files are not specs).
    """
    listing = scan(specs_dir, skip=skip)
    converter = Converter(specs_dir, workers=workers)
    try:
        conversions = {c.source: c for c in converter.convert(config, list(listing.files))}
    finally:
        converter.close()
    names = assign_names({}, conversions, ())
    named = {
        s: apply_names(c, names.finals.get(s, ()), names.warnings.get(s, ()))
        for s, c in conversions.items()
    }
    return listing, named


def explain(name: str, specs_dir: Path, config: Config, *, workers: int, skip: Path | None) -> int:
    """Print where the published tool ``name`` comes from and each rule that shaped it."""
    _, named = _convert_all(specs_dir, config, workers=workers, skip=skip)
    published: list[str] = []
    for _, conv in sorted(named.items()):
        if not conv.ok:
            continue
        for i, entry in enumerate(conv.tools):
            published.append(entry.name)
            if entry.name == name:
                print(_explanation(decode_tools(conv.payload)[i], entry.raw_name))
                return 0
    close = difflib.get_close_matches(name, published, n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    print(f"no published tool is named {name!r}{hint}", file=sys.stderr)
    return 1


def _explanation(tool: CatalogTool, raw_name: str) -> str:
    route = tool.route
    lines = [
        f"tool:        {tool.definition.name}",
        f"version:     {tool.definition.version}",
        f"document:    {tool.source}",
        f"pointer:     {tool.pointer}",
        f"operationId: {tool.operation_id or '(none)'}",
        f"route:       {route.method} {route.base_url or '(no base URL)'}{route.path}",
    ]
    if route.fixed_arguments:
        lines.append(f"fixed:       {_JSON.encode(route.fixed_arguments).decode()}")
    if route.default_arguments:
        lines.append(f"defaults:    {_JSON.encode(route.default_arguments).decode()}")
    if raw_name != tool.definition.name:
        lines.append(f"renamed:     from {raw_name} (the name is taken by an earlier document)")
    lines.append("curation:" + ("" if tool.curation else "    none"))
    lines.extend(f"  - {rule}" for rule in tool.curation)
    return "\n".join(lines)


def check(
    specs_dir: Path,
    config: Config,
    reporter: Reporter,
    *,
    workers: int,
    config_path: Path | None,
    skip: Path | None,
) -> int:
    """Convert every document as a build would, report its problems and the config's,
    write nothing.
    """
    started = time.perf_counter()
    listing, named = _convert_all(specs_dir, config, workers=workers, skip=skip)
    scanned = listing.files
    # A rule of the config, not the document, is at fault: each problem names the rule.
    rules_failed = {s: c for s, c in named.items() if c.curation_error}
    named.update(blamed_on_documents(rules_failed, str(config_path)))
    stats = {s: (f.size, f.mtime_ns) for s, f in scanned.items()}
    plan = make_plan(
        Manifest(schema_version=SCHEMA_VERSION), named, (), stats, full=True, now=time.time()
    )
    for source in sorted(named):
        for problem in plan.manifest.files[source].problems:
            reporter.problem(problem)
    # A directory that cannot be listed fails the check: its documents went unchecked.
    for directory, reason in listing.unlisted.items():
        reporter.problem(unlisted_problem(directory, reason))
    broken = sorted(
        [s for s, e in plan.manifest.files.items() if e.state in BROKEN] + list(listing.unlisted)
    )
    config_errors = _check_config(config, config_path, scanned, reporter)
    # The server refuses to start over these too (catalog.backends.route_conflicts).
    documents = documents_of(plan.meta.files, plan.meta.origins, config)
    for conflict in route_conflicts(documents, config):
        where = f"{config_path}: " if config_path is not None else ""
        reporter.event("config_invalid", level="error", message=f"{where}{conflict}")
        config_errors += 1
    failed = bool(broken or config_errors)
    reporter.event(
        "check",
        level="error" if failed else "info",
        documents=len(scanned),
        operations=plan.meta.operations,
        errors=len(broken) + config_errors,
        broken=broken,
        elapsed_s=round(time.perf_counter() - started, 3),
    )
    return 1 if failed else 0


def _check_config(
    config: Config, config_path: Path | None, sources: Collection[str], reporter: Reporter
) -> int:
    """Report what the config names that is not there; the number of errors.

    A spec section that matches no document is a warning (a typo, or a file still to
    come), a missing file the server would read (TLS, JWKS) an error: the server
    refuses to start over it.
    """
    if config_path is None:
        return 0
    for source in sorted(set(config.specs) - set(sources)):
        message = f"{config_path}: specs.{source!r}: matches no spec file"
        reporter.event("config_unmatched", level="warning", message=message)
    # Relative paths are the config file's directory's, as the server reads them.
    resolved = with_files_from(config, str(config_path.parent))
    missing = missing_files(resolved, exists=os.path.isfile)
    for problem in missing:
        reporter.event("config_invalid", level="error", message=f"{config_path}: {problem}")
    return len(missing)
