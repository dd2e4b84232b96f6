"""The console tests' catalog: real spec files, indexed by the real indexer, served by the
real app with the console enabled.

Three documents: the demo's orders API (``examples/specs/orders.yaml``: one public
operation, the rest behind an oauth2 scheme whose JWT scopes decide who sees them), a
public pets API with an apiKey scheme on one operation, and a document that cannot be
read (refused). The config is the demo's (``examples/sezzlee.toml``: the orders JWT
verified with the demo secret), with the console on.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Final

from catalog.config import Config, decode_config
from examples.backend import DEMO_SECRET, DEMO_SECRET_ENV
from indexer.report import Reporter
from indexer.session import Session
from server.identity.secrets import Secrets, resolve_secrets
from tests.server.harness import OPS_TOKEN, TEST_HEAP_BYTES

__all__ = [
    "HIDDEN",
    "HIDDEN_TAGS",
    "OPS_TOKEN",
    "PUBLIC",
    "build_index",
    "console_config",
    "console_secrets",
]

ROOT: Final = Path(__file__).resolve().parents[3]
HIDDEN: Final = (
    "create_order",
    "list_orders",
    "get_order",
    "delete_order",
    "add_order_note",
    "get_invoice",
    "get_order_stats",
    "pets.adopt_pet",
)
"""Tools an anonymous caller never sees (each needs an orders_auth token or a pet key)."""
HIDDEN_TAGS: Final = ("orders", "admin", "order notes", "billing", "adoption")
"""Tags only hidden tools carry."""
PUBLIC: Final = ("get_health", "pets.list_pets", "pets.get_pet")

PETS: Final = """\
openapi: 3.0.3
info: {title: Pets, version: "1"}
servers: [{url: "https://pets.example"}]
components:
  securitySchemes:
    pet_key: {type: apiKey, in: header, name: X-Pet-Key}
paths:
  /pets:
    get:
      operationId: list_pets
      summary: Lists the pets of the shelter.
      tags: [pets]
      parameters:
        - {name: species, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}
  /pets/{id}:
    get:
      operationId: get_pet
      summary: Fetches one pet by id.
      tags: [pets]
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses: {"200": {description: ok}}
    delete:
      operationId: adopt_pet
      summary: Adopts a pet, removing it from the shelter.
      tags: [pets, adoption]
      security: [{pet_key: []}]
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses: {"204": {description: adopted}}
"""

CONSOLE_TOML: Final = """
[server]
ops_token_env = "SEZZLEE_TEST_OPS_TOKEN"

[console]
enabled = true
refresh_seconds = 1
"""


def console_config(path: Path, *, orders_backend: str | None = None) -> Config:
    """The demo's config with the console on, written to ``path``; the orders API sent to
    ``orders_backend`` when given.
    """
    text = (ROOT / "examples" / "sezzlee.toml").read_text() + CONSOLE_TOML
    if orders_backend is not None:
        text = text.replace(
            'namespace = ""\n', f'namespace = ""\nbase_url = "{orders_backend}"\n', 1
        )
    text += '\n[specs."pets.yaml"]\nforward_headers = ["X-Pet-Key"]\n'
    path.write_text(text)
    return decode_config(path.read_bytes(), file=str(path))


def console_secrets(config: Config) -> Secrets:
    return resolve_secrets(
        config,
        environ={DEMO_SECRET_ENV: DEMO_SECRET, "SEZZLEE_TEST_OPS_TOKEN": OPS_TOKEN},
        read_file=lambda name: Path(name).read_bytes(),
    )


def build_index(root: Path, config: Config) -> Path:
    """The spec directory indexed under ``root`` by the real indexer; the index path."""
    specs = root / "specs"
    specs.mkdir(parents=True)
    (specs / "orders.yaml").write_bytes((ROOT / "examples" / "specs" / "orders.yaml").read_bytes())
    (specs / "pets.yaml").write_text(PETS)
    (specs / "broken.yaml").write_text("openapi: 3.0.3\npaths: [not, a, mapping\n")
    index = root / "index"
    session = Session(
        specs,
        index,
        config,
        Reporter(io.StringIO(), json_lines=True),
        workers=1,
        heap_bytes=TEST_HEAP_BYTES,
    )
    try:
        session.sync()
        # With the semantic side on, the vectors are filled after the commit: wait for them.
        if not session.wait_for_vectors(300):
            raise RuntimeError("the tool vectors were not filled in time")
    finally:
        session.close()
    return index
