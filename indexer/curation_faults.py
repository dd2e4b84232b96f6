"""Whose fault a curation rule that cannot be applied is: the config's or the document's.

The config is at fault when it changed for a failing document since that document was
indexed (or, for a new document, when no sync has applied this config yet); otherwise
the document changed under rules that used to apply, and it is broken
(``catalog/spec/curation.md`` §7).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from indexer.conversion import Conversion
from indexer.manifest import FileEntry

__all__ = ["blamed_on_documents", "config_faults"]


class ConfigFault(msgspec.Struct, frozen=True, kw_only=True):
    """One rule of the new config that cannot be applied, and the documents it fails."""

    rule: str  # where in the config (the problem's location)
    reason: str
    documents: list[str]


def config_faults(
    failed: Mapping[str, Conversion], files: Mapping[str, FileEntry], *, config_trusted: bool
) -> list[ConfigFault]:
    """The rules of the config at fault among the ``failed`` conversions (``files``: what
    the manifest knows; ``config_trusted``: a sync has applied this config in full).
    """
    faults: dict[tuple[str, str], list[str]] = {}
    for source, conv in sorted(failed.items()):
        entry = files.get(source)
        if entry is None and config_trusted:
            continue
        if entry is not None and entry.config_hash == conv.config_hash:
            continue
        for problem in conv.problems:
            faults.setdefault((problem.location, problem.reason), []).append(source)
    return [
        ConfigFault(rule=rule, reason=reason, documents=documents)
        for (rule, reason), documents in faults.items()
    ]


def blamed_on_documents(
    failed: Mapping[str, Conversion], config_file: str
) -> dict[str, Conversion]:
    """The ``failed`` conversions as broken documents, each problem naming the config rule."""
    return {
        source: msgspec.structs.replace(
            conv,
            problems=tuple(
                msgspec.structs.replace(p, reason=f"{config_file}: {p.location}: {p.reason}")
                for p in conv.problems
            ),
        )
        for source, conv in failed.items()
    }
