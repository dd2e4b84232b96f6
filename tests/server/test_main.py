"""``python -m server``: flags and config errors fail at start-up, before serving."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from server.__main__ import _load_config

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_names_every_flag() -> None:
    answer = run("--help")
    assert answer.returncode == 0
    for flag in ("--index", "--config", "--host", "--port", "--workers"):
        assert flag in answer.stdout


def refused(tmp_path: Path, config_text: str) -> str:
    """The server's stderr when it refuses to start with this config (exit status 2)."""
    config = tmp_path / "sezzlee.toml"
    config.write_text(config_text, encoding="utf-8")
    answer = run("--index", str(tmp_path / "index"), "--config", str(config))
    assert answer.returncode == 2
    return answer.stderr


def test_a_config_typo_fails_naming_the_key(tmp_path: Path) -> None:
    assert "allowed_hostz" in refused(tmp_path, "[server]\nallowed_hostz = ['x']\n")


def test_an_unset_secret_variable_fails_at_start_up(tmp_path: Path) -> None:
    text = '[specs."a.yaml".jwt]\nhs256_secret_env = "SEZZLEE_TEST_SECRET_THAT_IS_UNSET"\n'
    assert "SEZZLEE_TEST_SECRET_THAT_IS_UNSET" in refused(tmp_path, text)


def test_an_unusable_tls_file_fails_at_start_up(tmp_path: Path) -> None:
    stderr = refused(tmp_path, '[specs."a.yaml"]\nca_bundle = "missing-ca.pem"\n')
    # named by its spec, and looked for next to the config file, not in the working dir
    assert "specs.'a.yaml'" in stderr
    assert str(tmp_path / "missing-ca.pem") in stderr


def test_tls_files_are_read_from_the_config_files_directory(tmp_path: Path) -> None:
    (tmp_path / "sezzlee.toml").write_text(
        '[specs."a.yaml"]\nca_bundle = "ca.pem"\nclient_cert = "/abs/client.pem"\n',
        encoding="utf-8",
    )
    spec = _load_config(str(tmp_path / "sezzlee.toml")).spec("a.yaml")
    assert spec.ca_bundle == str(tmp_path / "ca.pem")
    assert spec.client_cert == "/abs/client.pem"


def test_a_missing_jwks_file_fails_at_start_up_named_as_check_names_it(tmp_path: Path) -> None:
    stderr = refused(tmp_path, '[specs."a.yaml".jwt]\njwks_file = "keys.json"\n')
    assert f"specs.'a.yaml'.jwt.jwks_file: {tmp_path / 'keys.json'}: no such file" in stderr


def test_an_unset_operator_token_variable_fails_at_start_up(tmp_path: Path) -> None:
    text = '[server]\nops_token_env = "SEZZLEE_TEST_OPS_TOKEN_THAT_IS_UNSET"\n'
    assert "SEZZLEE_TEST_OPS_TOKEN_THAT_IS_UNSET" in refused(tmp_path, text)


def test_listen_streams_must_leave_half_the_connections_to_requests(tmp_path: Path) -> None:
    text = "[server]\nmax_connections = 100\nmax_listen_streams = 60\n"
    assert "server.max_connections" in refused(tmp_path, text)


def test_the_open_file_limit_bounds_connections_and_listen_streams() -> None:
    from catalog.config import ServerConfig
    from server.limits import FD_RESERVE, worker_limits

    server = ServerConfig(max_connections=4096, max_listen_streams=1024)
    assert worker_limits(server, 1 << 20).max_connections == 4096
    tight = worker_limits(server, 1024)  # the usual soft default
    assert tight.max_connections == 1024 - FD_RESERVE
    assert tight.max_listen_streams == (1024 - FD_RESERVE) // 2


def test_semantic_search_without_the_pinned_model_refuses_to_start(tmp_path: Path) -> None:
    # A different tokenizer.json shadows the installed one: the pin check names it, exit 2.
    fake = tmp_path / "shadow" / "all_minilm_l6_v2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    with zipfile.ZipFile(fake / "model.zip", "w") as bundle:
        bundle.writestr("tokenizer.json", '{"not": "the pinned tokenizer"}')
    env = {**os.environ, "PYTHONPATH": f"{fake.parent}{os.pathsep}{ROOT}"}
    answer = subprocess.run(
        [sys.executable, "-m", "server", "--index", str(tmp_path / "index")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert answer.returncode == 2
    assert "not the pinned" in answer.stderr
    assert "semantic = false" not in answer.stderr  # a pin mismatch is no missing package
    off_toml = tmp_path / "off.toml"
    off_toml.write_text('[search]\nsemantic = false\n[specs."a.yaml"]\nca_bundle = "gone.pem"\n')
    index = str(tmp_path / "index")
    off = subprocess.run(
        [sys.executable, "-m", "server", "--index", index, "--config", str(off_toml)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    # With the semantic side off the model is not looked at: the next check speaks.
    assert off.returncode == 2
    assert "gone.pem" in off.stderr
    assert "pinned" not in off.stderr
