"""What the indexer publishes to an object store and replicas follow: names and formats.

Pure: the indexer's publisher (``indexer/publish.py``) writes these objects and the
server's follower (``server/follow.py``) reads them, both through
``catalog/objectstore.py``; neither side's layout is spelled anywhere else
(docs/deployment.md).

Under the prefix of ``s3://bucket/prefix``:

* ``objects/<sha256>``: every file of a commit (tantivy segment files, ``meta.json``),
  named by the SHA-256 of its bytes, written once and never changed, so a file two
  commits share is stored (and downloaded) once. The vectors sidecar is stored as its
  parts instead (:func:`sidecar_parts`: cut where a row's text key says, not at fixed
  offsets), so a commit that changed a few tools' rows uploads the few parts holding
  them, whatever rows moved before them. Graphs are not published: a replica builds
  them from the sidecar, as the indexer does;
* ``manifests/<sha256>.json``: one published state of the index: its commit and every
  file with its logical name (the path inside an index directory), size and SHA-256;
  named by the SHA-256 of its own bytes;
* ``head.json``: which manifest is current, moved only by a conditional write (If-Match
  the head the writer last saw), after every object and the manifest are in place: a
  publish killed before it leaves the old head, and a replica never sees a half commit;
* ``lease.json``: who may publish (one writer), renewed by a conditional write.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

import msgspec
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PART_ROWS",
    "Head",
    "Lease",
    "PublishedCommit",
    "PublishedFile",
    "PublishedPart",
    "StoreLocation",
    "StoredManifest",
    "decode_head",
    "decode_lease",
    "decode_manifest",
    "encode",
    "is_store_url",
    "kept_manifests",
    "manifest_sha",
    "parse_store_url",
    "sha_of_manifest_key",
    "sidecar_parts",
    "unreferenced_objects",
]

PUBLISH_FORMAT: Final = 2
"""The layout and manifest format written; a follower refuses a manifest it cannot read."""
READABLE_FORMATS: Final = frozenset({1, 2})
"""Format 1 had no parts (every file one object) and published graphs: still readable."""
PART_ROWS: Final = 512
"""A sidecar part holds this many rows on average (about 210 KB at 416 bytes a row)."""
_PART_MAX: Final = 8  # times PART_ROWS: a part ends there even without a cut point

HEAD_NAME: Final = "head.json"
LEASE_NAME: Final = "lease.json"
_OBJECTS: Final = "objects/"
_MANIFESTS: Final = "manifests/"
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
# A logical name: a file of the index directory or of its vectors/ directory, nothing else.
_NAME: Final = re.compile(r"(vectors/)?[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}")
_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class StoreLocation(msgspec.Struct, frozen=True, kw_only=True):
    """Where one index is published: a bucket and a key prefix ("" or ending in "/")."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        """The ``s3://`` URL of this location, as the operator wrote it."""
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def head_key(self) -> str:
        """The key of the head pointer."""
        return self.prefix + HEAD_NAME

    @property
    def lease_key(self) -> str:
        """The key of the writer's lease."""
        return self.prefix + LEASE_NAME

    @property
    def objects_prefix(self) -> str:
        """The keys of every published file start so."""
        return self.prefix + _OBJECTS

    @property
    def manifests_prefix(self) -> str:
        """The keys of every manifest start so."""
        return self.prefix + _MANIFESTS

    def object_key(self, sha256: str) -> str:
        """The key of the file whose bytes have this SHA-256."""
        return f"{self.prefix}{_OBJECTS}{sha256}"

    def manifest_key(self, sha256: str) -> str:
        """The key of the manifest whose bytes have this SHA-256."""
        return f"{self.prefix}{_MANIFESTS}{sha256}.json"


def is_store_url(value: str) -> bool:
    """Whether ``value`` names an object store location rather than a directory."""
    return value.startswith("s3://")


def parse_store_url(url: str) -> StoreLocation:
    """``s3://bucket/prefix`` as a location (the prefix may be empty).

    Raises:
        ValueError: not an ``s3://`` URL with a valid bucket name, or a prefix with
            ``..``, a query or a fragment.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"{url!r}: not an s3://bucket/prefix URL")
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{url!r}: an s3:// URL takes no query, fragment or user")
    if not _BUCKET.fullmatch(parts.netloc):
        raise ValueError(f"{url!r}: {parts.netloc!r} is not a valid bucket name")
    prefix = parts.path.strip("/")
    if any(segment in ("", ".", "..") for segment in prefix.split("/")) and prefix:
        raise ValueError(f"{url!r}: the prefix has an empty, '.' or '..' segment")
    return StoreLocation(bucket=parts.netloc, prefix=f"{prefix}/" if prefix else "")


class PublishedPart(msgspec.Struct, frozen=True, array_like=True):
    """One stored piece of a file published in parts."""

    sha256: str
    size: int


class PublishedFile(msgspec.Struct, frozen=True, array_like=True):
    """One file of a published commit: one object, or the concatenation of its ``parts``."""

    name: str  # the path inside an index directory ("meta.json", "vectors/<id>.npy")
    sha256: str  # of the whole file, as it is placed
    size: int
    parts: tuple[PublishedPart, ...] = ()

    @property
    def objects(self) -> tuple[str, ...]:
        """The SHA-256 of each object that stores the file."""
        return tuple(p.sha256 for p in self.parts) if self.parts else (self.sha256,)


class PublishedCommit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A manifest: one state of the index, every file of it by content."""

    format: int = PUBLISH_FORMAT
    commit_id: str  # the meta record's commit_id (catalog.index_schema.IndexMeta)
    commit: int
    fingerprint: str
    schema_version: int
    published_at: float  # unix time of the writer
    writer: str  # the lease owner that published it
    vectors_rows: int = 0  # rows of the commit's sidecar (0: none yet)
    vectors_complete: bool = False  # every tool has its vector
    files: tuple[PublishedFile, ...]

    def by_name(self) -> dict[str, PublishedFile]:
        """Each file by its logical name."""
        return {f.name: f for f in self.files}


class Head(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The pointer to the current manifest."""

    format: int = PUBLISH_FORMAT
    manifest: str  # the SHA-256 of the manifest's bytes (its key)
    commit_id: str
    commit: int
    published_at: float
    writer: str


class Lease(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who publishes to a prefix, and until when (renewed while it runs)."""

    owner: str  # random per indexer process
    host: str
    pid: int
    acquired_at: float
    expires_at: float  # unix time, the writer's clock


class StoredManifest(msgspec.Struct, frozen=True, kw_only=True):
    """A manifest as a listing of the store shows it."""

    sha256: str
    modified: float  # unix time the store gives


_ENCODER: Final = msgspec.json.Encoder(order="deterministic")


def encode(value: PublishedCommit | Head | Lease) -> bytes:
    """The JSON bytes of a manifest, head or lease (keys in a fixed order)."""
    return _ENCODER.encode(value)


def manifest_sha(data: bytes) -> str:
    """The SHA-256 a manifest's bytes are named by."""
    return hashlib.sha256(data).hexdigest()


def decode_manifest(data: bytes) -> PublishedCommit:
    """A manifest, its names and hashes checked.

    Raises:
        ValueError: not a manifest of this format, a name outside an index directory
            (``..``, a slash elsewhere than ``vectors/``), a malformed hash or a name twice.
    """
    try:
        manifest = msgspec.json.decode(data, type=PublishedCommit)
    except msgspec.DecodeError as exc:  # ValidationError is one too
        raise ValueError(f"not a manifest: {exc}") from exc
    if manifest.format not in READABLE_FORMATS:
        raise ValueError(
            f"manifest format {manifest.format}; this version reads {sorted(READABLE_FORMATS)}"
        )
    seen: set[str] = set()
    for file in manifest.files:
        if not _NAME.fullmatch(file.name) or ".." in file.name:
            raise ValueError(f"manifest names {file.name!r}: not a file of an index directory")
        if not _SHA256.fullmatch(file.sha256) or file.size < 0:
            raise ValueError(f"manifest entry {file.name!r}: malformed hash or size")
        if file.parts and (
            sum(p.size for p in file.parts) != file.size
            or not all(_SHA256.fullmatch(p.sha256) and p.size > 0 for p in file.parts)
        ):
            raise ValueError(f"manifest entry {file.name!r}: its parts do not make its size")
        if file.name in seen:
            raise ValueError(f"manifest names {file.name!r} twice")
        seen.add(file.name)
    if "meta.json" not in seen:
        raise ValueError("manifest without meta.json")
    return manifest


def decode_head(data: bytes) -> Head:
    """The head pointer.

    Raises:
        ValueError: not a head of this format.
    """
    try:
        head = msgspec.json.decode(data, type=Head)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a head pointer: {exc}") from exc
    if head.format not in READABLE_FORMATS or not _SHA256.fullmatch(head.manifest):
        raise ValueError(f"head of format {head.format} or with a malformed manifest name")
    return head


def decode_lease(data: bytes) -> Lease:
    """The writer's lease.

    Raises:
        ValueError: not a lease.
    """
    try:
        return msgspec.json.decode(data, type=Lease)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a lease: {exc}") from exc


def sha_of_manifest_key(location: StoreLocation, key: str) -> str | None:
    """The SHA-256 in a manifest's key, or None for any other key."""
    name = key.removeprefix(location.manifests_prefix)
    if name == key or not name.endswith(".json"):
        return None
    sha = name.removesuffix(".json")
    return sha if _SHA256.fullmatch(sha) else None


def kept_manifests(
    manifests: Iterable[StoredManifest],
    *,
    head: str | None,
    keep: int,
    min_age_seconds: float,
    now: float,
) -> set[str]:
    """The manifests retention keeps: the head's, the ``keep`` newest others, and every
    one younger than ``min_age_seconds`` (a replica may be reading it now).
    """
    ordered = sorted(manifests, key=lambda m: (m.modified, m.sha256), reverse=True)
    kept = {m.sha256 for m in [m for m in ordered if m.sha256 != head][: max(keep, 0)]}
    kept |= {m.sha256 for m in ordered if now - m.modified < min_age_seconds}
    if head is not None:
        kept.add(head)
    return kept


def unreferenced_objects(
    objects: Mapping[str, float],
    kept: Iterable[PublishedCommit],
    *,
    min_age_seconds: float,
    now: float,
) -> list[str]:
    """The objects (SHA-256 → time stored) no kept manifest names, old enough to delete:
    one younger than ``min_age_seconds`` may belong to a publish still under way.
    """
    named = {sha for manifest in kept for f in manifest.files for sha in f.objects}
    return sorted(
        sha
        for sha, modified in objects.items()
        if sha not in named and now - modified >= min_age_seconds
    )


def sidecar_parts(data_offset: int, row_size: int, keys: NDArray[np.uint8]) -> list[int]:
    """Where a sidecar is cut into parts: the byte offsets that end each part.

    ``keys``: each row's text key (``catalog.vectors.SIDECAR_DTYPE``), as ``(rows, 16)``
    bytes. The header is a part of its own (it changes with the row count); a row ends a
    part when its key's first four bytes are a multiple of :data:`PART_ROWS`, or when the
    part reached eight times that many rows. A key is a hash of the tool's text, so the
    cuts follow the rows, not their positions: rows inserted or deleted change the parts
    that hold them and leave every other part as it was.
    """
    rows = len(keys)
    ends = [data_offset] if data_offset else []
    if not rows:
        return ends
    words = np.ascontiguousarray(keys[:, :4]).view("<u4").ravel()
    cuts = np.flatnonzero(words % PART_ROWS == 0).tolist()
    last = -1
    for cut in [*cuts, rows - 1]:
        while cut - last > PART_ROWS * _PART_MAX:
            last += PART_ROWS * _PART_MAX
            ends.append(data_offset + (last + 1) * row_size)
        if cut > last:
            ends.append(data_offset + (cut + 1) * row_size)
            last = cut
    return ends
