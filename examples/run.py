"""``make run``: the demo backend, the indexer (watching) and the server, side by side.

``python -m examples.run --specs DIR --port P --index DIR [--config FILE] [--backend-port B]``
starts

* the demo orders API on 127.0.0.1:B, 8001 by default (``examples/backend.py``),
* ``python -m indexer --specs DIR --index DIR --watch`` (edit a spec: the catalog follows),
* ``python -m server --index DIR --port P`` on 127.0.0.1,

as subprocesses, prints how to connect a client, and stops all three on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import httpx

from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV, demo_token

ROOT: Final = Path(__file__).resolve().parent.parent
DEMO_PORT: Final = 8001
"""The port ``examples/specs/orders.yaml`` names in ``servers``."""
DEMO_SPEC: Final = '[specs."orders.yaml"]'

_CLIENT_SNIPPET: Final = """\
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    TOKEN = "{token}"

    async def main() -> None:
        http = httpx2.AsyncClient(headers={{"Authorization": f"Bearer {{TOKEN}}"}})
        transport = streamable_http_client("{url}", http_client=http)
        async with Client(transport, mode="2026-07-28") as client:
            print(await client.list_tools())
            print(await client.call_tool("search_tools", {{"query": "order"}}))
            print(await client.call_tool("load_tool", {{"name": "list_orders"}}))
            call = {{"name": "list_orders", "arguments": {{}}}}
            print(await client.call_tool("invoke_tool", call))

    anyio.run(main)
"""


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # A session of its own: a terminal's Ctrl-C goes to its whole foreground process
    # group, and reached each child as well as this script, which then sent SIGTERM on
    # top while the indexer was still closing (a traceback, a worker's unexpected exit).
    # Here only this script hears it, and stops each child once.
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, start_new_session=True)


def _wait(url: str, process: subprocess.Popen[bytes], *, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return False


def _with_backend_port(config: Path | None, port: int, state: Path) -> Path | None:
    """The config to run with: ``config`` itself, or a copy aiming the demo at ``port``.

    The demo document names 127.0.0.1:8001 in ``servers``; another port needs the demo's
    spec section to carry a ``base_url``, written into a copy beside the index.
    """
    if port == DEMO_PORT:
        return config
    text = config.read_text(encoding="utf-8") if config is not None else ""
    line = f'base_url = "http://127.0.0.1:{port}"'
    if DEMO_SPEC in text:
        text = text.replace(DEMO_SPEC, f"{DEMO_SPEC}\n{line}", 1)
    else:
        text += f"\n{DEMO_SPEC}\n{line}\n"
    derived = state / "run-config.toml"
    derived.write_text(text, encoding="utf-8")
    return derived


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.run", description=__doc__)
    parser.add_argument("--specs", default="examples/specs")
    parser.add_argument("--index", default=".sezzlee/index")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--config", default="examples/sezzlee.toml")
    parser.add_argument("--backend-port", type=int, default=DEMO_PORT)
    args = parser.parse_args(argv)

    # `timeout`, systemd and CI stop with SIGTERM, a closed terminal with SIGHUP (which,
    # in sessions of their own, the children no longer hear): like Ctrl-C, they stop all.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.setdefault(DEMO_SECRET_ENV, DEMO_SECRET)  # the demo config verifies demo JWTs
    index = Path(args.index)
    index.mkdir(parents=True, exist_ok=True)
    given = Path(args.config) if args.config and Path(args.config).is_file() else None
    chosen = _with_backend_port(given, args.backend_port, index.parent)
    config = ["--config", str(chosen)] if chosen is not None else []

    processes = [
        _spawn(["-m", "examples.backend", "--port", str(args.backend_port)], env),
        _spawn(
            ["-m", "indexer", "--specs", args.specs, "--index", args.index, "--watch", *config], env
        ),
        _spawn(["-m", "server", "--index", args.index, "--port", str(args.port), *config], env),
    ]
    url = f"http://127.0.0.1:{args.port}/mcp"
    try:
        ready = _wait(f"http://127.0.0.1:{args.port}/readyz", processes[2], timeout=60)
        token = demo_token("alice")
        print(
            f"\nsezzlee is {'ready' if ready else 'starting (the index is not ready yet)'}\n"
            f"  MCP endpoint : {url}  (Streamable HTTP, 2026-07-28 and 2025-era clients)\n"
            f"  demo backend : http://127.0.0.1:{args.backend_port}  (specs: {args.specs})\n"
            f"  readiness    : http://127.0.0.1:{args.port}/readyz   metrics: /metrics\n"
            f"  demo token   : Authorization: Bearer <TOKEN below>\n"
            f"                 (alice: orders:read orders:write; other users: "
            f".venv/bin/python -m examples.backend --token bob|admin)\n\n"
            "Connect with the official Python client, run with .venv/bin/python (it has the "
            "mcp package; the token makes alice's operations visible, without it only public "
            "ones are listed):\n\n"
            + _CLIENT_SNIPPET.format(url=url, token=token)
            + "\nEdit a file in the spec directory and the catalog reloads. Ctrl-C stops all.\n",
            flush=True,
        )
        while all(process.poll() is None for process in processes):
            time.sleep(0.5)
        return 1  # one of them died on its own
    except KeyboardInterrupt:
        return 0
    finally:
        # A second Ctrl-C (or the terminal's SIGINT reaching us again) must not cut the
        # shutdown short and leave children running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()  # SIGTERM: every child stops on it gracefully
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    sys.exit(main())
