"""The document being converted, as every part of an operation's conversion reads it.

:class:`ConvertContext` is what ``convert.py``'s per-document worker shares with the
modules that convert an operation's parts (``convert_parameters.py``,
``convert_bodies.py``, ``convert_outputs.py``, ``convert_annotations.py``,
``convert_security.py``): the tree and its version, the resolver and the normalizer
(whose caches make every component schema normalized once per direction), and the
warnings they add.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from catalog.model import Problem
from catalog.normalize import Normalizer
from catalog.openapi import Document
from catalog.refs import Resolver

__all__ = ["ConvertContext", "text_of"]


class ConvertContext:
    """One document, its resolver and normalizer, and the warnings of its conversion."""

    __slots__ = ("namespace", "normalizer", "resolver", "source", "tree", "v2", "v31", "warnings")

    def __init__(self, document: Document, *, namespace: str, load: Callable[[str], bytes]) -> None:
        self.source = document.source
        self.tree = document.tree
        self.v2 = document.version == "2.0"
        self.v31 = document.version == "3.1"
        self.namespace = namespace
        self.resolver = Resolver(document.source, document.tree, load)
        self.normalizer = Normalizer(self.resolver, document.version)
        self.warnings: list[Problem] = []

    def warn(self, location: str, reason: str, code: str) -> None:
        """A warning of this document's conversion (``code``: its problem code)."""
        self.warnings.append(
            Problem(
                file=self.source, location=location, reason=reason, severity="warning", code=code
            )
        )


def text_of(value: Any) -> str:
    """A description-like field's text, stripped ("" for anything but a string)."""
    return value.strip() if isinstance(value, str) else ""
