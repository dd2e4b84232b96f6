"""``python -m examples.oauth``: an authorization server for trying the gateway's OAuth
flow (``examples/oauth/README.md``). For demos and tests only.

It is ``oidc-provider`` (npm, pinned in ``benchmarks/oauth_server.py``) run by Node 22,
both installed into ``~/.cache/sezzlee`` on first use. It offers what an MCP client needs
to run the flow unaided: dynamic client registration, the authorization-code grant with
PKCE, tokens for the gateway's resource URL, and the scopes the gateway advertises. Its
login page accepts any login and password and its consent page approves whatever is
asked; keys and registrations live in memory and are gone when it stops.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Final

from benchmarks.oauth_server import AuthorizationServer

RESOURCE: Final = "http://127.0.0.1:8000/mcp"
"""``[auth].resource`` in ``examples/oauth/sezzlee.toml``."""
SCOPES: Final = "orders:read orders:write orders:admin"
"""The scopes the gateway advertises for ``examples/specs/orders.yaml``."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.oauth", description=__doc__)
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--resource", default=RESOURCE, help="the gateway's resource URL")
    parser.add_argument("--scopes", default=SCOPES, help="the scopes it advertises")
    args = parser.parse_args(argv)
    server = AuthorizationServer(port=args.port, authorization_code={args.resource: args.scopes})
    try:
        print(
            f"authorization server: {server.issuer} (log: {server.log})\n"
            f"  tokens for {args.resource}, scopes: {args.scopes}\n"
            "  sign in with any login and password; Ctrl-C stops it",
            flush=True,
        )
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        server.process.wait()  # until Ctrl-C or SIGTERM, or the server dies on its own
        print(f"the authorization server exited: {server.log.read_text()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
