"""The configuration file's root Struct: one optional section per table
(``catalog/config.py`` is the surface callers import; ``docs/config.md`` lists every key).
"""

from __future__ import annotations

from typing import Final

import msgspec

from catalog.config_curation import CurationConfig
from catalog.config_sections import (
    AuthConfig,
    ConsoleConfig,
    InvokeConfig,
    PublishConfig,
    SearchConfig,
    ServerConfig,
    VisibilityConfig,
)
from catalog.config_specs import SpecConfig

__all__ = ["Config"]


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole file. Every section is optional."""

    server: ServerConfig = ServerConfig()
    visibility: VisibilityConfig = VisibilityConfig()
    invoke: InvokeConfig = InvokeConfig()
    search: SearchConfig = SearchConfig()
    specs: dict[str, SpecConfig] = msgspec.field(default_factory=dict)
    curation: CurationConfig = CurationConfig()
    auth: AuthConfig = AuthConfig()
    publish: PublishConfig = PublishConfig()
    console: ConsoleConfig = ConsoleConfig()

    def spec(self, source: str) -> SpecConfig:
        """The settings of the document at ``source`` (relative path), or the defaults."""
        return self.specs.get(source) or _DEFAULT_SPEC


_DEFAULT_SPEC: Final = SpecConfig()
