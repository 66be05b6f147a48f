"""An OTLP/HTTP trace collector inside the test process: what a server exports lands here.

It decodes the protobuf requests the standard exporter sends (POST /v1/traces), as a
real collector would, and keeps the spans for tests to read.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class CollectedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_s: float
    end_s: float
    attributes: dict[str, Any]
    resource: dict[str, Any] = field(repr=False)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class OtlpCollector:
    def __init__(self) -> None:
        self.spans: list[CollectedSpan] = []
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                collector._keep(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the test output is for the tests

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                resource = _attributes(list(resource_spans.resource.attributes))
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            CollectedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                start_s=span.start_time_unix_nano / 1e9,
                                end_s=span.end_time_unix_nano / 1e9,
                                attributes=_attributes(list(span.attributes)),
                                resource=resource,
                            )
                        )

    async def trace_of(self, response_id: str, timeout_s: float = 30.0) -> list[CollectedSpan]:
        """The spans of the turn answered by `response_id`, its turn span first, once
        exported (the batch processor sends every few seconds)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                turns = [
                    span for span in self.spans
                    if span.attributes.get("voice_agent.response_id") == response_id
                ]  # fmt: skip
                if turns:
                    (turn,) = turns
                    children = [s for s in self.spans if s.parent_span_id == turn.span_id]
                    return [turn, *sorted(children, key=lambda span: span.start_s)]
            await asyncio.sleep(0.2)
        raise TimeoutError(f"no trace for {response_id} within {timeout_s} s")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
