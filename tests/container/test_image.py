"""The container image and the Kubernetes manifests, run for real with podman.

No image registry is reachable here, so the base image is made by the test itself:
``debootstrap --variant=minbase`` of Debian bookworm (python3, venv, CA certificates),
imported into podman; the image is built from it by ``scripts/image.py`` (wheels made on
the host, installed with ``--no-index``: no network in the build). Containers run with
``--network host`` so that every request stays on 127.0.0.1, with runc and cgroupfs
(``containers.conf`` written by the test) and no rlimit above the host's hard limit.

Marked ``container``: ``make test`` leaves them out, ``make test-container`` (run by
``.ci/run``) installs podman, runc and debootstrap from Debian's packages and runs them.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import resource
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from mcp import Client

from benchmarks.ports import free_port
from benchmarks.seaweed import CREDENTIALS, Seaweed
from catalog.objectstore import ObjectStore
from catalog.published import parse_store_url
from scripts.image import build, prepare, size
from tests.e2e.conftest import ROOT, Recording
from tests.server.loopback import running
from tests.tools import openapi_json

pytestmark = pytest.mark.container

BASE = "localhost/sezzlee-base:bookworm"
IMAGE = "localhost/sezzlee:test"
_TRIMMED = (
    "var/cache/apt",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
)


@pytest.fixture(scope="session")
def podman_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    assert shutil.which("podman"), "podman is not installed: run `make test-container`"
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    conf.write_text(
        # No rlimit above the host's hard limit (kube play takes no --ulimit).
        f'[containers]\ndefault_ulimits = ["nofile={hard}:{hard}", "nproc=32768:32768"]\n'
        '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
    )
    os.environ["CONTAINERS_CONF"] = str(conf)  # scripts.image runs podman too
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def _podman(
    env: dict[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, check=check, timeout=600
    )


def _limits() -> list[str]:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return ["--ulimit", f"nofile={hard}:{hard}", "--ulimit", "nproc=32768:32768"]


@pytest.fixture(scope="session")
def image(podman_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    if _podman(podman_env, "image", "exists", BASE, check=False).returncode != 0:
        rootfs = tmp_path_factory.mktemp("rootfs")
        subprocess.run(
            [
                *("debootstrap", "--variant=minbase"),
                "--include=python3,python3-venv,ca-certificates",
                *("bookworm", str(rootfs)),
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        for trimmed in _TRIMMED:  # caches and docs a runtime never reads
            shutil.rmtree(rootfs / trimmed, ignore_errors=True)
        archive = rootfs.parent / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(rootfs, arcname=".")
        _podman(podman_env, "import", str(archive), BASE)
    context = tmp_path_factory.mktemp("context")
    prepare(context)
    build(context, base=BASE, tag=IMAGE, engine="podman")
    print(f"\n{IMAGE}: {size(IMAGE, engine='podman') / 2**20:.0f} MiB")
    return IMAGE


def _ready(url: str, started: float, timeout: float = 60.0) -> float:
    while time.monotonic() - started < timeout:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} was not ready in {timeout} s")


@pytest.fixture
def backend() -> Iterator[Recording]:
    with running(Recording()) as endpoint:
        yield endpoint


async def _search_load_invoke(url: str) -> float:
    """Search, load and invoke with the official client; when the search was answered."""
    async with Client(url, mode="2026-07-28", cache=None) as client:
        found = _payload(await client.call_tool("search_tools", {"query": "list orders"}))
        answered = time.monotonic()
        assert found["results"][0]["name"] == "orders.list_orders"
        loaded = _payload(await client.call_tool("load_tool", {"name": "orders.list_orders"}))
        call = {"name": "orders.list_orders", "arguments": {}, "version": loaded["version"]}
        assert _payload(await client.call_tool("invoke_tool", call))["status"] == 200
    return answered


async def _hears_the_edit(url: str, spec: Path, edited: str) -> None:
    async with Client(url, mode="2026-07-28", cache=None) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            spec.write_text(edited)
            with anyio.fail_after(30):
                async for event in subscription:
                    assert type(event).__name__ == "ToolsListChanged"
                    break
        found = _payload(await client.call_tool("search_tools", {"query": "ship"}))
        assert found["results"][0]["name"] == "orders.ship_order"


def _payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    block = result.content[0]
    assert block.type == "text"
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


def test_the_image_serves_search_load_invoke_and_follows_a_spec_edit(
    image: str, podman_env: dict[str, str], backend: Recording, tmp_path: Path
) -> None:
    specs, index = tmp_path / "specs", tmp_path / "index"
    specs.mkdir()
    index.mkdir(mode=0o777)
    index.chmod(0o777)  # the container's user (10001) writes it
    spec = specs / "orders.json"
    spec.write_text(openapi_json({"list_orders": "List the orders"}, base=backend.base))
    port = free_port()
    name = f"sezzlee-test-{port}"
    started = time.monotonic()
    _podman(
        podman_env,
        *("run", "-d", "--name", name, "--network", "host", "--read-only", *_limits()),
        *("-v", f"{specs}:/specs:ro", "-v", f"{index}:/index"),
        image,
        *(
            "run",
            "--specs",
            "/specs",
            "--index",
            "/index",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        ready = _ready(url, started)
        first = anyio.run(_search_load_invoke, url + "/mcp") - started
        print(f"\nfirst search {first:.1f} s after start (ready {ready:.1f} s)")
        assert [seen["path"] for seen in backend.seen] == ["/list_orders"]
        # A mounted spec edited: the indexer in the container commits, the server reloads
        # and tells the official client's listen stream.
        edited = openapi_json(
            {"list_orders": "List", "ship_order": "Ship an order"}, base=backend.base
        )
        anyio.run(_hears_the_edit, url + "/mcp", spec, edited)
        assert _podman(podman_env, "exec", name, "id", "-u").stdout.strip() == "10001"
        refused = _podman(podman_env, "exec", name, "touch", "/opt/sezzlee/x", check=False)
        assert refused.returncode != 0
        assert "Read-only file system" in refused.stderr
    finally:
        logs = _podman(podman_env, "logs", name, check=False)
        _podman(podman_env, "rm", "-f", name, check=False)
    assert "Traceback" not in logs.stdout + logs.stderr


def _on_host_loopback(
    documents: list[dict[str, Any]], image: str, backend: Recording, port: int
) -> None:
    """The test's copy of a manifest: this image, the demo spec's backend the test's,
    every pod on the host's network with its server on ``port`` (loopback only)."""
    for document in documents:
        if document["kind"] == "ConfigMap" and "orders.yaml" in document["data"]:
            for key, text in document["data"].items():
                document["data"][key] = text.replace("http://127.0.0.1:8001", backend.base)
        if document["kind"] == "Deployment":
            pod = document["spec"]["template"]["spec"]
            pod["hostNetwork"] = True
            for container in pod["containers"]:
                container["image"] = image
                container.pop("ports", None)  # no port mappings on the host's network
                container["args"] = [str(port) if a == "8000" else a for a in container["args"]]
                for probe in ("readinessProbe", "livenessProbe"):
                    if probe in container:
                        container[probe]["httpGet"]["port"] = port


@contextlib.contextmanager
def _kube_play(
    documents: list[dict[str, Any]], podman_env: dict[str, str], tmp_path: Path
) -> Iterator[None]:
    """``podman kube play`` of ``documents`` for the ``with`` block, then ``kube down``.

    Podman 4.3 reads a secretKeyRef from a podman secret holding the Secret's data map
    (base64 values) and mistakes a Secret in the played file for one: the Secrets are
    made as such first, as a cluster would hold them before the pod starts.
    """
    secrets = [d for d in documents if d["kind"] == "Secret"]
    for secret in secrets:
        data = dict(secret.get("data", {}))
        plain = secret.get("stringData", {})
        data.update({k: base64.b64encode(v.encode()).decode() for k, v in plain.items()})
        content = tmp_path / f"{secret['metadata']['name']}.json"
        content.write_text(json.dumps(data))
        _podman(podman_env, "secret", "rm", secret["metadata"]["name"], check=False)  # a stale one
        _podman(podman_env, "secret", "create", secret["metadata"]["name"], str(content))
    manifest = tmp_path / "kube.yaml"
    manifest.write_text(yaml.safe_dump_all([d for d in documents if d["kind"] != "Secret"]))
    _podman(podman_env, "kube", "play", "--network", "host", str(manifest))
    try:
        yield
    except BaseException:
        # What each pod said, for the failure's report (pytest shows captured output).
        names = _podman(podman_env, "ps", "-a", "--format", "{{.Names}}", check=False)
        for name in names.stdout.split():
            said = _podman(podman_env, "logs", name, check=False)
            print(f"--- {name}\n{said.stdout[-4000:]}{said.stderr[-4000:]}")
        raise
    finally:
        _podman(podman_env, "kube", "down", str(manifest), check=False)
        for secret in secrets:
            _podman(podman_env, "secret", "rm", secret["metadata"]["name"], check=False)


def _manifest(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / name).read_text()))


def test_the_kubernetes_manifests_run_under_podman_kube_play(
    image: str, podman_env: dict[str, str], backend: Recording, tmp_path: Path
) -> None:
    port = free_port()
    documents = _manifest("single-pod.yaml")
    _on_host_loopback(documents, image, backend, port)
    with _kube_play(documents, podman_env, tmp_path):
        url = f"http://127.0.0.1:{port}"
        _ready(url, time.monotonic(), timeout=90)
        anyio.run(_search_load_invoke, url + "/mcp")
        assert [seen["path"] for seen in backend.seen] == ["/orders"]
        metrics = httpx.get(
            url + "/metrics", headers={"authorization": "Bearer change-me"}, timeout=5
        )
        assert "sezzlee_catalog_operations 1" in metrics.text  # the ops token came from the Secret


def test_the_fleet_manifest_follows_a_store_under_podman_kube_play(
    image: str, podman_env: dict[str, str], backend: Recording, seaweed: Seaweed, tmp_path: Path
) -> None:
    # The store is SeaweedFS on the host's loopback; the indexer pod publishes to it and
    # two server pods (podman plays one pod per Deployment: the test plays the servers'
    # Deployment twice, on two ports) follow it into caches of their own.
    documents = _manifest("fleet.yaml")
    (config,) = (d for d in documents if d["metadata"]["name"] == "sezzlee-fleet-config")
    location = parse_store_url("s3://sezzlee-catalog/prod")
    assert location.url in config["data"]["sezzlee.toml"]
    config["data"]["sezzlee.toml"] = config["data"]["sezzlee.toml"].replace(
        "http://seaweedfs-s3:8333", seaweed.endpoint_url
    )
    (secret,) = (d for d in documents if d["kind"] == "Secret")
    secret["stringData"]["store-key-id"] = CREDENTIALS["AWS_ACCESS_KEY_ID"]
    secret["stringData"]["store-secret"] = CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    (servers,) = (d for d in documents if d["metadata"]["name"] == "sezzlee-server")
    servers["spec"]["replicas"] = 1
    second = copy.deepcopy(servers)
    second["metadata"]["name"] = "sezzlee-server-b"
    ports = [free_port(), free_port()]
    _on_host_loopback(documents, image, backend, ports[0])
    _on_host_loopback([second], image, backend, ports[1])
    store = ObjectStore(location, endpoint_url=seaweed.endpoint_url)
    store.create_bucket()
    with _kube_play([*documents, second], podman_env, tmp_path):
        for port in ports:
            base = f"http://127.0.0.1:{port}"
            _ready(base, time.monotonic(), timeout=120)
            anyio.run(_search_load_invoke, base + "/mcp")
        assert store.get(location.head_key) is not None
    assert [seen["path"] for seen in backend.seen] == ["/orders", "/orders"]
