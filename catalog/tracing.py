"""Traces for both processes: OpenTelemetry's SDK exporting over OTLP when the standard
``OTEL_*`` environment asks for it, and nothing at all otherwise.

Tracing is on when an OTLP endpoint is named (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) or ``OTEL_TRACES_EXPORTER`` says ``otlp``, and
``OTEL_SDK_DISABLED`` is not ``true``. Everything else (the service name and resource
attributes, the sampler, the batch processor's delays, the exporter's headers, timeout,
compression and protocol) is the SDK's own reading of the same variables. Off, the SDK
is never imported and :func:`span` hands out one shared no-op context, so a search pays
an attribute read per step and no more (``docs/telemetry.md``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "TRACEPARENT",
    "configure",
    "enabled",
    "failed",
    "inject",
    "note",
    "shutdown",
    "span",
]

Kind = Literal["internal", "server", "client"]

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
_ON: Final = {"otlp"}


class _State:
    """The process's provider, set once by :func:`configure` (None: tracing off), and
    what every span needs from it, made once.
    """

    provider: TracerProvider | None = None
    tracer: Tracer | None = None
    propagator: TextMapPropagator | None = None


_state: Final = _State()
_OFF: Final[contextlib.nullcontext[None]] = contextlib.nullcontext()


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` asks for traces (see the module's docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return bool(_ON & {e.strip() for e in exporter.split(",")})
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(service: str, environ: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider with the OTLP/HTTP exporter behind a batch
    processor when ``environ`` (default: this process's) asks for traces; ``service``
    names the process unless ``OTEL_SERVICE_NAME`` does. Returns whether tracing is on.
    Idempotent: a second call keeps the first provider.
    """
    if _state.provider is not None:
        return True
    if not wanted(os.environ if environ is None else environ):
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over these.
    resource = Resource.create({SERVICE_NAME: service})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.tracer = provider.get_tracer("sezzlee")
    _state.propagator = TraceContextTextMapPropagator()
    return True


def enabled() -> bool:
    """Whether this process exports traces."""
    return _state.provider is not None


def shutdown() -> None:
    """Export what is buffered and stop (a process's last step)."""
    if _state.provider is not None:
        _state.provider.shutdown()


def span(
    name: str,
    *,
    kind: Kind = "internal",
    parent: Mapping[str, str] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> contextlib.AbstractContextManager[Span | None]:
    """A span named ``name`` around a ``with`` block, made the current span so that
    spans within are its children: the current span's child, or the child of the W3C
    trace context in ``parent`` (``traceparent`` and ``tracestate``) when that holds a
    valid one. Yields the span (None with tracing off).
    """
    if _state.tracer is None or _state.propagator is None:
        return _OFF
    return _started(_state.tracer, _state.propagator, name, kind, parent, attributes)


def step(name: str) -> contextlib.AbstractContextManager[Span | None]:
    """A span named ``name`` around a ``with`` block that starts no span of its own (a
    leaf: a search step), the current span's child. Cheaper than :func:`span`: it never
    becomes the current span. Yields the span (None with tracing off).
    """
    if _state.tracer is None:
        return _OFF
    return _Step(_state.tracer, name)


class _Step:
    __slots__ = ("_name", "_span", "_tracer")

    def __init__(self, tracer: Tracer, name: str) -> None:
        self._tracer, self._name = tracer, name

    def __enter__(self) -> Span:
        self._span = self._tracer.start_span(self._name)
        return self._span

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _: Any
    ) -> None:
        if error is not None:
            self._span.record_exception(error)
            failed(self._span, type(error).__name__)
        self._span.end()


@contextlib.contextmanager
def _started(
    tracer: Tracer,
    propagator: TextMapPropagator,
    name: str,
    kind: Kind,
    parent: Mapping[str, str] | None,
    attributes: Mapping[str, Any] | None,
) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind

    context = propagator.extract(carrier=dict(parent)) if parent else None
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=SpanKind[kind.upper()],
        attributes=dict(attributes) if attributes else None,
    ) as current:
        yield current


def note(span: Span | None, **attributes: str | int | bool) -> None:
    """Set ``attributes`` on ``span`` (None: tracing off, nothing to do)."""
    if span is not None:
        span.set_attributes(attributes)


def failed(span: Span | None, error_type: str) -> None:
    """Mark ``span`` (from :func:`span`; None: tracing off) as failed with ``error_type``
    (OpenTelemetry's ``error.type``: a short, low-cardinality code).
    """
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR))


def inject(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` with the current span's ``traceparent`` (and ``tracestate``) in place
    of any the list held, so the backend continues the trace; unchanged when tracing is
    off or no span is current.
    """
    if _state.propagator is None:
        return headers
    carrier: dict[str, str] = {}
    _state.propagator.inject(carrier)
    if not carrier:
        return headers
    kept = [(k, v) for k, v in headers if k.lower() not in (TRACEPARENT, TRACESTATE)]
    return [*kept, *carrier.items()]
