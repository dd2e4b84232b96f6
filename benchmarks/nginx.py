"""nginx (Debian's package; ``make system-deps`` installs it) as the load balancer in front
of replicas, on loopback: round-robin over their ports, listen streams passed through
unbuffered, and the replica that answered named in an ``X-Upstream`` header, so a test
or a benchmark can tell the replicas' answers apart.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import httpx

from benchmarks.ports import free_port

__all__ = ["nginx_binary", "running_nginx"]

_CONF: Final = """\
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream sezzlee {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://sezzlee;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;            # listen streams (SSE) pass through as sent
            proxy_read_timeout 1h;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    """The nginx executable (Debian installs it under /usr/sbin, often not on PATH)."""
    found = shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not found:
        raise RuntimeError("nginx is not installed: run `make system-deps` (apt-get install nginx)")
    return found


@contextlib.contextmanager
def running_nginx(ports: Sequence[int], directory: Path) -> Iterator[str]:
    """nginx balancing over ``127.0.0.1:<port>`` for each of ``ports``, its files in
    ``directory``; yields its base URL once it answers ``/readyz`` through a replica.

    Raises:
        RuntimeError: nginx exited, or did not answer within 10 s.
    """
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports)
    conf = directory / "nginx.conf"
    conf.write_text(_CONF.format(tmp=directory, servers=servers, port=port))
    error_log = directory / "error.log"
    proxy = subprocess.Popen(
        [nginx_binary(), "-p", str(directory), "-c", str(conf), "-e", str(error_log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while True:
            if proxy.poll() is not None:
                raise RuntimeError(f"nginx exited:\n{error_log.read_text(errors='replace')}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("nginx did not answer within 10 s")
            time.sleep(0.05)
        yield base
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
