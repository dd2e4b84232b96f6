"""With ``[console] enabled`` false (the default), the console does not exist: no route
answers under /console, and nothing of it (Jinja2, a template, a script) is loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from catalog.config import Config, decode_config
from catalog.errors import ConfigError
from server.app import create_app
from tests.server.conftest import demo_tools
from tests.server.console.catalog import OPS_TOKEN
from tests.server.harness import serve, write_index

ROOT = Path(__file__).resolve().parents[3]


def test_no_console_route_exists_when_it_is_off(tmp_path: Path) -> None:
    write_index(tmp_path / "index", demo_tools())
    app = create_app(tmp_path / "index", config=Config(), ops_token=OPS_TOKEN)
    assert not [r.path for r in app.routes if r.path.startswith("/console")]
    with serve(app) as server:
        server.wait_ready()
        for path in ("/console", "/console/", "/console/login", "/console/static/console.css"):
            answer = httpx.get(server.base + path, headers={"authorization": f"Bearer {OPS_TOKEN}"})
            assert answer.status_code == 404, path


def test_nothing_of_the_console_is_loaded_when_it_is_off(tmp_path: Path) -> None:
    # A fresh interpreter: this one has imported the console for the other tests.
    write_index(tmp_path / "index", demo_tools())
    script = (
        "import sys\n"
        "from litestar.testing import TestClient\n"
        "from server.app import create_app\n"
        f"app = create_app({str(tmp_path / 'index')!r})\n"
        "with TestClient(app, base_url='http://127.0.0.1') as client:\n"
        "    assert client.get('/readyz').status_code == 200\n"
        "    assert client.get('/console').status_code == 404\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('jinja2', 'server.console')))\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_console_needs_the_ops_token() -> None:
    with pytest.raises(ConfigError, match=r"console\.enabled: set server\.ops_token_env"):
        decode_config(b"[console]\nenabled = true\n", file="sezzlee.toml")
    config = decode_config(
        b'[server]\nops_token_env = "T"\n[console]\nenabled = true\n', file="sezzlee.toml"
    )
    assert config.console.enabled
    assert not Config().console.enabled
