"""One document converted (or not): what the build hands the naming and the plan.

Pure data. ``build.py`` makes these (in its pool workers too, whence they cross a
process boundary as msgpack), ``names.py`` publishes their tools under final names and
``plan.py`` merges them into the manifest.
"""

from __future__ import annotations

import msgspec

from catalog.model import Problem, SecurityPolicy
from indexer.manifest import ToolEntry

__all__ = ["Conversion"]


class Conversion(msgspec.Struct, frozen=True, kw_only=True):
    """One document converted (or not): summaries for planning, the tools' documents,
    and the tools themselves when the caller asked for them (``--explain``).
    """

    source: str
    content_hash: str
    config_hash: str
    namespace: str
    ok: bool
    tools: tuple[ToolEntry, ...] = ()  # ordinal 0; name == raw_name until names.assign_names
    payload: bytes = b""  # fields.encode_tools(...) of the tools, in document order; or empty
    fields: bytes = b""  # fields.encode_fields(...) of the same: what the writer adds
    # Or, from a build's pool worker, where in its spool file the fields are instead:
    fields_file: str = ""
    fields_offset: int = 0
    fields_length: int = 0
    dependencies: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()  # the error when not ok, then warnings
    policies: dict[str, SecurityPolicy] = msgspec.field(default_factory=dict)
    tags: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    origins: tuple[str, ...] = ()  # catalog.backends.declared_origins of its tools
    curation_error: bool = False  # not ok because a curation rule cannot be applied
    fragment: bool = False  # not ok because it is no OpenAPI document (NotADocument)
