"""The S3 client both sides use: the indexer's publisher and the server's follower.

A thin layer over boto3 (README, dependency table: the AWS SDK, maintained by AWS, with
the standard credential chain and conditional writes): the calls the layout of
``catalog/published.py`` needs, each store failure turned into :class:`StoreError`, a
lost conditional write into :class:`PreconditionFailed`. boto3 is imported when a store
is first opened, so neither process pays for it unless it publishes or follows.

Credentials come only from boto3's standard chain (``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE`` and the shared files, a role), never from the
config file. The one I/O module of ``catalog/``: both processes import it, and
``indexer`` and ``server`` never import each other (docs/conventions.md §2.1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from catalog.published import StoreLocation

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "MissingObject",
    "ObjectStore",
    "PreconditionFailed",
    "StoreError",
    "sha256_of",
]

_CHUNK: Final = 1 << 20
_MISSING: Final = frozenset({"NoSuchKey", "404", "NotFound"})
_PRECONDITION: Final = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})


class StoreError(Exception):
    """The store could not be reached, refused the request, or answered nonsense."""


class PreconditionFailed(StoreError):
    """A conditional write lost: the object is not what the writer last saw."""


class MissingObject(StoreError):
    """The store answered, and holds no object under that key."""


class StoredObject:
    """One key of a listing: its size and when the store wrote it (unix time)."""

    __slots__ = ("key", "modified", "size")

    def __init__(self, key: str, size: int, modified: float) -> None:
        self.key = key
        self.size = size
        self.modified = modified


def _code(exc: Exception) -> str:
    response: dict[str, Any] = getattr(exc, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


class ObjectStore:
    """One bucket and prefix of an S3-compatible store."""

    def __init__(
        self,
        location: StoreLocation,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        timeout_seconds: float = 10.0,
        attempts: int = 3,
    ) -> None:
        """Open a client (no request is sent yet).

        Args:
            location: the bucket and prefix.
            endpoint_url: another store than AWS S3 (SeaweedFS, MinIO, R2, ...).
            region: the bucket's region (boto3's own default when None).
            timeout_seconds: connect and read timeout of each request.
            attempts: tries per request (boto3's standard retry mode).
        """
        import boto3
        from botocore.config import Config as BotoConfig

        self.location = location
        self.endpoint_url = endpoint_url
        self._client: S3Client = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            config=BotoConfig(
                connect_timeout=timeout_seconds,
                read_timeout=timeout_seconds,
                retries={"max_attempts": attempts, "mode": "standard"},
                # Path-style: a bucket name needs no DNS name of its own (stores on a
                # private network, loopback in tests).
                s3={"addressing_style": "path"},
                # Only the checksums every S3-compatible store accepts.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    @property
    def url(self) -> str:
        """The location's ``s3://`` URL (for messages)."""
        return self.location.url

    def _fail(self, what: str, key: str, exc: Exception) -> StoreError:
        code = _code(exc)
        detail = f"{type(exc).__name__}: {exc}"
        message = f"{self.url}: {what} {key}: {detail}"
        if code in _PRECONDITION:
            return PreconditionFailed(message)
        return StoreError(message)

    def get(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, or None when there is no such key.

        Raises:
            StoreError: the store failed or could not be reached.
        """
        try:
            answer = self._client.get_object(Bucket=self.location.bucket, Key=key)
            return answer["Body"].read(), answer["ETag"]
        except Exception as exc:  # botocore's errors share no useful base with OSError
            if _code(exc) in _MISSING:
                return None
            raise self._fail("cannot read", key, exc) from exc

    def download(self, key: str, target: IO[bytes]) -> str:
        """Stream the object into ``target``; the SHA-256 of what was written.

        Raises:
            MissingObject: there is no such key.
            StoreError: the store failed or could not be reached.
            OSError: ``target`` cannot be written (a full disk).
        """
        digest = hashlib.sha256()
        try:
            body = self._client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
        except Exception as exc:
            if _code(exc) in _MISSING:
                raise MissingObject(f"{self.url}: no object {key}") from exc
            raise self._fail("cannot read", key, exc) from exc
        while True:
            try:
                chunk = body.read(_CHUNK)
            except Exception as exc:  # the connection broke mid-body
                raise self._fail("cannot read", key, exc) from exc
            if not chunk:
                break
            digest.update(chunk)
            target.write(chunk)  # an OSError here is the target's (a full disk)
        return digest.hexdigest()

    def exists(self, key: str) -> bool:
        """Whether the key holds an object.

        Raises:
            StoreError: the store failed or could not be reached.
        """
        try:
            self._client.head_object(Bucket=self.location.bucket, Key=key)
        except Exception as exc:
            if _code(exc) in _MISSING:
                return False
            raise self._fail("cannot look up", key, exc) from exc
        return True

    def put(
        self,
        key: str,
        body: bytes | IO[bytes],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Write the object; its new ETag. ``if_none_match``: only when the key is free;
        ``if_match``: only when the object still has that ETag.

        Raises:
            PreconditionFailed: the condition did not hold (another writer was first).
            StoreError: the store failed or could not be reached.
        """
        extra: dict[str, str] = {}
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        try:
            answer = self._client.put_object(
                Bucket=self.location.bucket,
                Key=key,
                Body=body,
                **extra,  # type: ignore[arg-type]  # the stubs' TypedDict of optional keys
            )
        except Exception as exc:
            raise self._fail("cannot write", key, exc) from exc
        return answer["ETag"]

    def upload(self, key: str, path_or_stream: Path | IO[bytes], size: int) -> None:
        """Write the object from a file: its path, or a stream open at its start.

        Raises:
            StoreError: the store failed or could not be reached.
        """
        if isinstance(path_or_stream, Path):
            with open(path_or_stream, "rb") as stream:
                self.upload(key, stream, size)
            return
        try:
            self._client.put_object(
                Bucket=self.location.bucket, Key=key, Body=path_or_stream, ContentLength=size
            )
        except Exception as exc:
            raise self._fail("cannot write", key, exc) from exc

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Delete the object (``if_match``: only while it has that ETag).

        Raises:
            PreconditionFailed: the object changed since.
            StoreError: the store failed or could not be reached.
        """
        try:
            if if_match is None:
                self._client.delete_object(Bucket=self.location.bucket, Key=key)
            else:
                self._client.delete_object(Bucket=self.location.bucket, Key=key, IfMatch=if_match)
        except Exception as exc:
            raise self._fail("cannot delete", key, exc) from exc

    def delete_many(self, keys: list[str]) -> None:
        """Delete the objects, a thousand per request.

        Raises:
            StoreError: the store failed, or refused one of them.
        """
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            try:
                answer = self._client.delete_objects(
                    Bucket=self.location.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
            except Exception as exc:
                raise self._fail("cannot delete", batch[0], exc) from exc
            errors = answer.get("Errors", [])
            if errors:
                raise StoreError(f"{self.url}: cannot delete {errors[0].get('Key')}: {errors[0]}")

    def list(self, prefix: str) -> Iterator[StoredObject]:
        """Every object whose key starts with ``prefix``.

        Raises:
            StoreError: the store failed or could not be reached.
        """
        token: str | None = None
        while True:
            try:
                if token is None:
                    page = self._client.list_objects_v2(Bucket=self.location.bucket, Prefix=prefix)
                else:
                    page = self._client.list_objects_v2(
                        Bucket=self.location.bucket, Prefix=prefix, ContinuationToken=token
                    )
            except Exception as exc:
                raise self._fail("cannot list", prefix, exc) from exc
            for item in page.get("Contents", []):
                yield StoredObject(
                    item["Key"], int(item.get("Size", 0)), item["LastModified"].timestamp()
                )
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def create_bucket(self) -> None:
        """Create the bucket if it is missing (tests and benchmarks; an operator makes it).

        Raises:
            StoreError: the store failed or could not be reached.
        """
        try:
            self._client.create_bucket(Bucket=self.location.bucket)
        except Exception as exc:
            if _code(exc) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                return
            raise self._fail("cannot create bucket", self.location.bucket, exc) from exc


def sha256_of(stream: IO[bytes]) -> str:
    """The SHA-256 of a stream from its start (left at its end)."""
    stream.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()
