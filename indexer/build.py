"""Catalog conversion of changed files into ``Conversion`` records, in or out of process.

Reads spec files (and the files they ``$ref``) and calls
``catalog.load.convert_document``; writes nothing to the index. A document that cannot
be converted becomes a ``Conversion`` with ``ok=False`` and its problem (file, location,
reason): other documents are never affected, whatever the converter raises.

Large batches (a full build) run in a process pool so that conversion uses every core;
results cross the process boundary as msgpack bytes, in completion order (the planner
orders everything by source path, so the index is written in the same order whatever
the pool's timing). Their bulk, the tools' encoded documents, does not: each worker
appends it to its own file in the sync's spool directory (``FieldsSpool``), which the
writer reads back, so the parent neither receives nor holds it while converting.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import multiprocessing
import os
import shutil
import signal
import sys
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import BinaryIO, Final

import msgspec

from catalog.backends import declared_origins, namespace_for
from catalog.config import Config, CurationConfig, SpecConfig
from catalog.curation import curate, for_namespace
from catalog.errors import CurationError, NotADocument, SpecError
from catalog.fingerprint import with_version
from catalog.index_schema import visibility_summary
from catalog.load import convert_document
from catalog.model import CatalogTool, Problem, SpecResult
from indexer.conversion import Conversion
from indexer.fields import encode_fields, encode_tools
from indexer.manifest import ToolEntry
from indexer.scan import hash_bytes

__all__ = [
    "POOL_THRESHOLD",
    "Converter",
    "FieldsSpool",
    "config_hash",
    "convert_file",
    "cpu_workers",
    "summarize",
]

POOL_THRESHOLD: Final = 8
"""Batches of fewer files convert in-process: a watch change must not pay the pool's
inter-process hop (or its start-up) on the way to its commit."""

# The codes of the problems a conversion fails with besides those its error carries
# (SpecError.code, CurationError.code): catalog/spec/schema-conversion.md, Problems.
FILE_UNREADABLE: Final = "file-unreadable"
"""Problem code: the document's file cannot be read."""
DOCUMENT_TOO_DEEP: Final = "document-too-deep"
"""Problem code: the document nests deeper than the conversion can follow."""
INTERNAL_ERROR: Final = "internal-error"
"""Problem code: the conversion failed on a fault of its own (a bug to report)."""

_CANONICAL: Final = msgspec.json.Encoder(order="sorted")
_MSGPACK: Final = msgspec.msgpack.Encoder()
_CONVERSION: Final = msgspec.msgpack.Decoder(Conversion)
_NO_CURATION: Final = CurationConfig()


def config_hash(config: Config, source: str) -> str:
    """A hash of every config input the conversion of ``source`` depends on: its
    namespace, its section, and the curation rules that can reach its namespace.
    """
    namespace = namespace_for(source, config)
    return _config_hash(namespace, config.spec(source), for_namespace(config.curation, namespace))


def _config_hash(namespace: str, spec_config: SpecConfig, curation: CurationConfig) -> str:
    # Without rules the hash is what it was before curation existed: an index built then
    # is not re-converted for nothing.
    inputs = (
        [namespace, spec_config] if curation == _NO_CURATION else [namespace, spec_config, curation]
    )
    data = _CANONICAL.encode(inputs)
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _digest(tool: CatalogTool) -> str:
    # Everything published about a tool besides name, version and visibility: a change to
    # tags, search terms, route or security must change the catalog fingerprint.
    data = _CANONICAL.encode(
        (tool.namespace, tool.source, tool.route, tool.security, tool.search, tool.card)
    )
    return hashlib.blake2b(data + bytes([tool.deprecated]), digest_size=8).hexdigest()


def _loader(specs_dir: Path) -> Callable[[str], bytes]:
    root = specs_dir.resolve()

    def load(relative: str) -> bytes:
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise FileNotFoundError(f"{relative}: outside the spec directory")
        return path.read_bytes()

    return load


def convert_file(
    specs_dir: str,
    source: str,
    namespace: str,
    spec_config: SpecConfig,
    curation: CurationConfig | None = None,
    *,
    payload: bool = True,
    spool_dir: str = "",
) -> bytes:
    """Read, convert and curate one document; the msgpack of its :class:`Conversion`.

    Runs in a pool worker, so it takes and returns plain, picklable values. ``curation``
    is ``for_namespace(config.curation, namespace)``. A rule that cannot be applied
    gives a failed conversion with ``curation_error`` set: the session decides whether
    that is the config's fault or the document's.

    ``payload=False`` leaves the tools payload out (a build renames from the fields).
    With ``spool_dir``, the fields go to this process's file there and the conversion
    says where (``fields_file``, ``fields_offset``, ``fields_length``): the bulk of a
    build then never crosses a pipe or the parent's memory before it is written.
    """
    root = Path(specs_dir)
    curation = curation if curation is not None else CurationConfig()
    chash = _config_hash(namespace, spec_config, curation)
    try:
        data = (root / source).read_bytes()
    except OSError as exc:
        problem = Problem(
            file=source, location="", reason=f"cannot read: {exc.strerror}", code=FILE_UNREADABLE
        )
        conv = Conversion(
            source=source,
            content_hash="",
            config_hash=chash,
            namespace=namespace,
            ok=False,
            problems=(problem,),
        )
        return _MSGPACK.encode(conv)
    content_hash = hash_bytes(data)
    try:
        result = convert_document(
            source, data, namespace=namespace, spec_config=spec_config, load=_loader(root)
        )
        if curation != _NO_CURATION:
            result = msgspec.structs.replace(result, tools=curate(result.tools, curation))
        conv = summarize(result, content_hash, chash, namespace, payload=payload)
    except CurationError as exc:
        problem = Problem(file=source, location=exc.rule, reason=exc.reason, code=exc.code)
        failed = _failed(source, content_hash, chash, namespace, problem)
        return _MSGPACK.encode(msgspec.structs.replace(failed, curation_error=True))
    except SpecError as exc:
        problem = Problem(
            file=exc.file or source, location=exc.location, reason=exc.reason, code=exc.code
        )
        failed = _failed(source, content_hash, chash, namespace, problem)
        dependencies = tuple(sorted(set(exc.dependencies) - {source}))
        failed = msgspec.structs.replace(
            failed, fragment=isinstance(exc, NotADocument), dependencies=dependencies
        )
        return _MSGPACK.encode(failed)
    except RecursionError:
        problem = Problem(
            file=source, location="", reason="document nested too deeply", code=DOCUMENT_TOO_DEEP
        )
        return _MSGPACK.encode(_failed(source, content_hash, chash, namespace, problem))
    except Exception as exc:
        problem = Problem(
            file=source,
            location="",
            reason=f"internal error while converting: {exc!r}",
            code=INTERNAL_ERROR,
        )
        return _MSGPACK.encode(_failed(source, content_hash, chash, namespace, problem))
    if spool_dir and conv.fields:
        # Outside the guard above: a spool that cannot be written (a full disk) fails the
        # build, it does not make the document look broken.
        conv = _spool_fields(conv, spool_dir)
    return _MSGPACK.encode(conv)


def _spool_fields(conv: Conversion, spool_dir: str) -> Conversion:
    # One file per worker process, opened per document: nothing stays open once the
    # build's directory is removed.
    name = f"fields-{os.getpid()}"
    with open(os.path.join(spool_dir, name), "ab") as spool:
        offset = spool.tell()
        spool.write(conv.fields)
    return msgspec.structs.replace(
        conv, fields=b"", fields_file=name, fields_offset=offset, fields_length=len(conv.fields)
    )


def summarize(
    result: SpecResult, content_hash: str, chash: str, namespace: str, *, payload: bool = True
) -> Conversion:
    """The :class:`Conversion` of a converted document: per-tool summaries, fields and
    (unless ``payload`` is false) the tools payload.
    """
    tools = [
        tool
        if tool.definition.version
        else msgspec.structs.replace(tool, definition=with_version(tool.definition))
        for tool in result.tools
    ]
    summary = visibility_summary(tools)
    entries = [
        ToolEntry(t.definition.name, t.definition.name, 0, t.definition.version, key, _digest(t))
        for t, key in zip(tools, summary.keys, strict=True)
    ]
    return Conversion(
        source=result.source,
        content_hash=content_hash,
        config_hash=chash,
        namespace=namespace,
        ok=True,
        tools=tuple(entries),
        payload=encode_tools(tools) if payload else b"",
        fields=encode_fields(tools, [e.visibility for e in entries]),
        dependencies=tuple(sorted(set(result.dependencies) - {result.source})),
        problems=tuple(result.warnings),
        policies=summary.policies,
        tags=summary.tags,
        origins=declared_origins(tool.route.base_url for tool in tools),
    )


def _failed(
    source: str, content_hash: str, chash: str, namespace: str, problem: Problem
) -> Conversion:
    return Conversion(
        source=source,
        content_hash=content_hash,
        config_hash=chash,
        namespace=namespace,
        ok=False,
        problems=(problem,),
    )


class Converter:
    """Converts batches of documents; owns the process pool (started on first need)."""

    def __init__(self, specs_dir: Path, *, workers: int = 2) -> None:
        self._specs_dir = str(specs_dir)
        self._workers = workers
        self._pool: Executor | None = None

    def convert(
        self,
        config: Config,
        sources: Sequence[str],
        *,
        payload: bool = True,
        spool: FieldsSpool | None = None,
    ) -> Generator[Conversion, None, None]:
        """Convert ``sources``; yield their conversions as they complete.

        Completion order, not submission order: one slow document must not hold every
        later result in memory (the planner sorts by source path anyway). ``payload``:
        see :func:`convert_file`. With ``spool``, pool workers write the fields into its
        directory (in-process conversions keep them in memory). Closing the generator
        early gives the rest of the batch up.
        """
        rules: dict[str, CurationConfig] = {}
        args: list[tuple[str, str, SpecConfig, CurationConfig]] = []
        for source in sources:
            namespace = namespace_for(source, config)
            if namespace not in rules:
                rules[namespace] = for_namespace(config.curation, namespace)
            args.append((source, namespace, config.spec(source), rules[namespace]))
        if len(sources) < POOL_THRESHOLD or self._workers <= 1:
            for arg in args:
                yield _CONVERSION.decode(convert_file(self._specs_dir, *arg, payload=payload))
            return
        spool_dir = str(spool.directory) if spool is not None else ""
        # Largest first: the longest conversions start at once and overlap everything
        # else, instead of one big document starting last and running alone.
        args.sort(key=lambda a: -self._size(a[0]))
        submit = functools.partial(
            convert_file, self._specs_dir, payload=payload, spool_dir=spool_dir
        )
        for attempt in (1, 2):
            pool = self._ensure_pool()
            consumed = False
            try:
                pending = _submit_all(pool, submit, args)
                for future in as_completed(pending):
                    pending.discard(future)  # drop our reference: the result is consumed once
                    conversion = _CONVERSION.decode(future.result())
                    consumed = True
                    yield conversion
                return
            except BrokenProcessPool:
                self._abandon(pool)
                if consumed or attempt == 2:
                    raise
                # A worker died while the pool sat idle between syncs (the OOM killer, a
                # stray kill): the pool refuses all work from then on, at submission or
                # with the first result. Nothing of this batch was used: it runs again in
                # a new pool, once.
            except BaseException:  # an interrupt, a consumer that stopped
                self._abandon(pool)
                raise

    def _size(self, source: str) -> int:
        try:
            return os.stat(os.path.join(self._specs_dir, source)).st_size
        except OSError:
            return 0

    def _ensure_pool(self) -> Executor:
        if self._pool is None:
            # spawn, not fork: the parent runs tantivy's writer threads, and forking a
            # threaded process can deadlock the child. Not forkserver either: its workers
            # are the server's children, so they could not follow the indexer's death.
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers, mp_context=context, initializer=_start_worker
            )
        return self._pool

    def _abandon(self, pool: Executor) -> None:
        """Stop ``pool``, whose batch is given up, without waiting for it; the next batch
        starts another.
        """
        # Its pending work is cancelled by the pool's own thread, not here: that thread
        # fails every pending future when a worker dies (a SIGTERM to the process group
        # kills them too), and on Python 3.11 it dies of InvalidStateError, with a
        # traceback, on a future cancelled under its feet. Work under way finishes, and
        # the pool is joined at exit.
        if self._pool is pool:
            self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the pool, if one was started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _submit_all(
    pool: Executor, submit: Callable[..., bytes], args: Sequence[tuple[object, ...]]
) -> set[Future[bytes]]:
    """``submit(*a)`` in ``pool`` for each of ``args``."""
    # Workers are spawned by these submissions: with SIGINT blocked, so that one still
    # importing cannot die of a Ctrl-C before _start_worker ignores it (the mask is
    # inherited; the indexer's own handler runs as soon as it is unblocked).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return {pool.submit(submit, *a) for a in args}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _start_worker() -> None:
    """Pool worker start-up: leave Ctrl-C to the indexer, and exit when it dies, even by
    SIGKILL (Linux only).
    """
    # A terminal sends SIGINT to the whole process group: the indexer stops the pool and
    # reports the interruption, where a worker would print a KeyboardInterrupt traceback.
    # (SIGTERM keeps its default: the pool terminates a broken pool's workers with it.)
    # Blocked since the worker was spawned (Converter.convert), a pending one is dropped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


_PR_SET_PDEATHSIG: Final = 1


class FieldsSpool:
    """Document fields parked in files during a large build.

    A full build of 125,000 tools holds every conversion until ordinals are known; their
    fields would cost gigabytes of RSS in memory. Pool workers append them to their own
    files in ``directory`` (see :func:`convert_file`); fields converted in-process go to
    the spool's own file there. The directory belongs to one sync of one indexer (the
    index lock): it is emptied when first used, so a crashed build leaves nothing behind
    for long, and removed when the spool closes. A sync that parks nothing never
    creates it.
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._ready = False
        self._where: dict[str, tuple[str, int, int]] = {}
        self._files: dict[str, BinaryIO] = {}

    @property
    def directory(self) -> Path:
        """The spool's directory, created (empty) on first use."""
        if not self._ready:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory.mkdir(parents=True)
            self._ready = True
        return self._directory

    def park(self, conv: Conversion) -> Conversion:
        """``conv`` without its fields, which are kept on disk."""
        if conv.fields_file:
            where = (conv.fields_file, conv.fields_offset, conv.fields_length)
        elif conv.fields:
            own = self._file(_OWN_FILE)
            offset = own.seek(0, os.SEEK_END)
            own.write(conv.fields)
            where = (_OWN_FILE, offset, len(conv.fields))
        else:
            return conv
        self._where[conv.source] = where
        return msgspec.structs.replace(
            conv, fields=b"", fields_file="", fields_offset=0, fields_length=0
        )

    def fields(self, source: str, data: bytes) -> bytes | memoryview:
        """``data`` if present, else the parked document fields of ``source``: a view of
        the spool file, mapped for as long as the view lives (decode it, or copy it).
        """
        if data or source not in self._where:
            return data
        name, offset, length = self._where[source]
        file = self._file(name)
        file.flush()
        # Mapped, not read: a build's writer reads 1.6 GB of fields twice, and each read()
        # into fresh memory cost a copy and the kernel's zeroing of its pages (2.8 s of
        # the writing thread). One document's window at a time: a whole file mapped at
        # once kept every page read so far in the indexer's RSS.
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        window = mmap.mmap(
            file.fileno(), offset + length - start, access=mmap.ACCESS_READ, offset=start
        )
        return memoryview(window)[offset - start :]

    def _file(self, name: str) -> BinaryIO:
        file = self._files.get(name)
        if file is None:
            file = self._files[name] = open(self.directory / name, "a+b")  # noqa: SIM115
        return file

    def close(self) -> None:
        """Close and remove the spool's files."""
        for file in self._files.values():
            file.close()
        self._files.clear()
        if self._ready:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._ready = False


_OWN_FILE: Final = "fields-spool"


def cpu_workers() -> int:
    """Pool size: every core the process may use."""
    return max(1, len(os.sched_getaffinity(0)))
