"""Curated variants end to end: the indexer CLI over GitHub's description with variant
rules, the real server, and a loopback backend that records what it received.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from catalog.config import decode_config
from server.app import create_app
from server.identity.secrets import resolve_secrets
from server.invoke.invoker import Invoker
from tests.e2e.conftest import Agent, run_indexer
from tests.server.harness import ServerThread, serve

CONFIG = """
# Curation is the subject: the 1,223 tools' vectors (a minute on one worker) are not.
[search]
semantic = false

[specs."github.json"]
namespace = "gh"
base_url = "http://127.0.0.1:{port}"

[[curation.variants]]
match = {{ operation_id = "repos/get" }}
[[curation.variants.tools]]
name = "octocat_repo"
description = "A repository owned by octocat."
fixed = {{ owner = "octocat" }}
[[curation.variants.tools]]
name = "github_repo"
description = "A repository owned by GitHub."
fixed = {{ owner = "github" }}
defaults = {{ repo = "docs" }}
"""


class Recorder(ThreadingHTTPServer):
    """A loopback backend answering every GET with JSON; ``paths`` is what it received."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        body = json.dumps({"full_name": self.path.removeprefix("/repos/")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    backend = Recorder()
    thread = threading.Thread(target=backend.serve_forever, daemon=True)
    thread.start()
    try:
        yield backend
    finally:
        backend.shutdown()
        backend.server_close()


@pytest.fixture(scope="module")
def server(
    recorder: Recorder, github_spec_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerThread]:
    workdir = tmp_path_factory.mktemp("curation-e2e")
    specs = workdir / "specs"
    specs.mkdir()
    shutil.copy(github_spec_path, specs / "github.json")
    config_path = workdir / "sezzlee.toml"
    config_path.write_text(CONFIG.format(port=recorder.server_address[1]))
    config = decode_config(config_path.read_bytes(), file=str(config_path))
    run_indexer(specs, workdir / "index", config_path)
    secrets = resolve_secrets(config, environ={}, read_file=lambda name: b"")
    invoker = Invoker(config=config, secrets=secrets)
    app = create_app(workdir / "index", config=config, secrets=secrets, invoker=invoker)
    with serve(app) as thread:
        thread.wait_ready()
        yield thread


def test_invoking_a_variant_sends_its_fixed_value(server: ServerThread, recorder: Recorder) -> None:
    agent = Agent(server.url, None)
    answer = agent.invoke("gh.octocat_repo", {"repo": "hello-world"})
    assert answer == {"status": 200, "body": {"full_name": "octocat/hello-world"}}
    assert recorder.paths[-1] == "/repos/octocat/hello-world"
    answer = agent.invoke("gh.github_repo", {})  # repo has the default "docs"
    assert answer["body"] == {"full_name": "github/docs"}
    assert recorder.paths[-1] == "/repos/github/docs"
    agent.invoke("gh.github_repo", {"repo": "linguist"})
    assert recorder.paths[-1] == "/repos/github/linguist"


def test_a_fixed_argument_cannot_be_overridden(server: ServerThread, recorder: Recorder) -> None:
    agent = Agent(server.url, None)
    sent = len(recorder.paths)
    failed, payload = agent.call(
        "invoke_tool",
        {"name": "gh.octocat_repo", "arguments": {"owner": "someone", "repo": "x"}},
    )
    assert failed
    assert payload["error"]["code"] == "invalid_arguments"
    assert len(recorder.paths) == sent  # nothing reached the backend


def test_variants_are_searchable_and_load_with_the_same_output_schema(
    server: ServerThread,
) -> None:
    agent = Agent(server.url, None)
    found = agent.ok("search_tools", {"query": "repository owned by octocat", "limit": 10})
    assert "gh.octocat_repo" in [r["name"] for r in found["results"]]
    octocat = agent.ok("load_tool", {"name": "gh.octocat_repo"})
    github = agent.ok("load_tool", {"name": "gh.github_repo"})
    assert octocat["outputSchema"] == github["outputSchema"]
    assert octocat["version"] != github["version"]
    assert "owner" not in octocat["inputSchema"]["properties"]
    assert github["inputSchema"]["properties"]["repo"]["default"] == "docs"
    failed, payload = agent.call("load_tool", {"name": "gh.repos_get"})
    assert failed
    assert payload["error"]["code"] == "unknown_tool"
