"""A small spec directory indexed by a real session that publishes to the test store."""

from __future__ import annotations

from pathlib import Path

from benchmarks.seaweed import Seaweed
from catalog.config import Config, PublishConfig, SearchConfig
from catalog.objectstore import ObjectStore
from indexer.publish import Publisher, open_store
from indexer.report import Reporter
from indexer.session import Session
from tests.indexer.helpers import spec_yaml

__all__ = ["PublishingIndexer", "publish_settings", "test_store"]


def publish_settings(seaweed: Seaweed, url: str, **extra: float) -> PublishConfig:
    """``[publish]`` for ``url`` on the test store."""
    return PublishConfig(url=url, endpoint_url=seaweed.endpoint_url, **extra)  # type: ignore[arg-type]


def test_store(seaweed: Seaweed, url: str) -> ObjectStore:
    """A client of ``url`` on the test store."""
    return open_store(publish_settings(seaweed, url))


test_store.__test__ = False  # type: ignore[attr-defined]  # not a test: a helper


class PublishingIndexer:
    """A session over ``tmp/specs`` (two documents, three tools) publishing ``tmp/index``."""

    def __init__(
        self,
        tmp: Path,
        publish: PublishConfig,
        reporter: Reporter,
        *,
        semantic: bool = False,
        publisher: Publisher | None = None,
    ) -> None:
        self.specs = tmp / "specs"
        self.specs.mkdir(parents=True, exist_ok=True)
        self.index = tmp / "index"
        if not any(self.specs.iterdir()):
            (self.specs / "a.yaml").write_text(spec_yaml("A", ["listThings", "getThing"]))
            (self.specs / "b.yaml").write_text(spec_yaml("B", ["listOther"]))
        self.publisher = publisher or Publisher(self.index, publish, reporter, retry_first=0.1)
        self.session = Session(
            self.specs,
            self.index,
            Config(search=SearchConfig(semantic=semantic), publish=publish),
            reporter,
            workers=1,
            heap_bytes=20_000_000,
            publisher=self.publisher,
        )

    def sync(self, timeout: float = 60) -> None:
        """Sync and wait until the result (vectors too, when semantic) is published."""
        self.session.sync()
        assert self.session.wait_for_vectors(timeout)
        assert self.session.wait_for_publish(timeout), self.publisher.failure

    def edit(self, operations: list[str]) -> None:
        """Rewrite ``b.yaml`` with these operations."""
        (self.specs / "b.yaml").write_text(spec_yaml("B", operations))

    def close(self) -> None:
        self.session.close()
