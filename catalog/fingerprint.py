"""The version fingerprint of a tool definition.

Pure. 16 hex characters of SHA-256 over the canonical JSON (sorted keys, no spaces) of
name, description, inputSchema, outputSchema and annotations: key order never changes
it, and every replica built from the same documents computes the same value
(docs/decisions.md, Version). ``authUncertain`` is per caller and never part of it.
"""

from __future__ import annotations

import hashlib
from typing import Final

import msgspec

from catalog.model import ToolDefinition

__all__ = ["VERSION_LENGTH", "fingerprint", "with_version"]

VERSION_LENGTH: Final = 16
_CANONICAL: Final = msgspec.json.Encoder(order="sorted")


def fingerprint(definition: ToolDefinition) -> str:
    """The version of ``definition``, ignoring its current ``version`` and
    ``auth_uncertain`` fields.
    """
    body = msgspec.structs.replace(definition, version="", auth_uncertain=False)
    return hashlib.sha256(_CANONICAL.encode(body)).hexdigest()[:VERSION_LENGTH]


def with_version(definition: ToolDefinition) -> ToolDefinition:
    """``definition`` with its ``version`` set to its fingerprint."""
    return msgspec.structs.replace(definition, version=fingerprint(definition))
