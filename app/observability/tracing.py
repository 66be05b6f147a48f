"""OpenTelemetry traces: one span per turn, with a child span per stage of its reply.

Off unless server.otlp_endpoint is set. Spans are written when the reply ends, from
the moments its TurnTimings stamped, so the hot path pays for a few clock reads and
nothing else; the SDK's batch processor exports them over OTLP/HTTP from its own
thread. The standard OTEL_EXPORTER_OTLP_* variables (headers, timeout, certificates)
apply to the exporter as usual.
"""

from __future__ import annotations

import socket

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Status, StatusCode

from app.observability.build import package_version
from app.session import messages as msg

# Each stage's span runs from the moment the stage before it was reached (the first
# from the reply's start) to its own: the reply's critical path, segment by segment.
STAGE_SPANS = {
    "stt_done": "stt",
    "llm_first_token": "llm.first_token",
    "first_clause": "llm.first_clause",
    "tts_first_audio": "tts.first_audio",
    "first_frame_sent": "send.first_frame",
}


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class TurnTracer:
    def __init__(self, exporter: SpanExporter, *, replica: str = "") -> None:
        resource = Resource.create(
            {
                "service.name": "voice-agent",
                "service.version": package_version(),
                "service.instance.id": replica or socket.gethostname(),
            }
        )
        self._provider = TracerProvider(resource=resource)
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("voice-agent", package_version())

    @classmethod
    def over_otlp(cls, endpoint: str, *, replica: str = "") -> TurnTracer:
        return cls(OTLPSpanExporter(endpoint=endpoint), replica=replica)

    def saw(self, session_id: str, message: msg.SessionMessage) -> None:
        if isinstance(message, msg.ReplyEnded) and message.stamps:
            self._turn(session_id, message)

    def _turn(self, session_id: str, ended: msg.ReplyEnded) -> None:
        at = ended.stamps
        begin = min(at["created"], at.get("speech_end", at["created"]))
        turn = self._tracer.start_span(
            "turn",
            start_time=_ns(begin),
            attributes={
                "voice_agent.session_id": session_id,
                "voice_agent.response_id": ended.response_id,
                "voice_agent.status": ended.status,
                "voice_agent.reason": ended.reason or "",
                "voice_agent.modality": ended.modality,
                # The reply's work began in a pause, before the turn was over.
                "voice_agent.speculative": at["created"] < at.get("turn_end", at["created"]),
            },
        )
        if ended.voice_to_voice_ms is not None:
            turn.set_attribute("voice_agent.voice_to_voice_ms", ended.voice_to_voice_ms)
        if ended.status == "failed":
            turn.set_status(Status(StatusCode.ERROR, ended.error or "failed"))
        inside = trace.set_span_in_context(turn)

        def child(name: str, start: float, end: float, stage: str = "") -> None:
            span = self._tracer.start_span(name, context=inside, start_time=_ns(start))
            if stage:
                span.set_attribute("voice_agent.stage", stage)
            span.end(end_time=_ns(max(start, end)))

        if "speech_end" in at:
            # The user's silence until the turn was judged over.
            child("end_of_turn", at["speech_end"], at["turn_end"])
        previous = at["created"]
        for stage, name in STAGE_SPANS.items():
            if stage in at:
                child(name, previous, at[stage], stage)
                previous = max(previous, at[stage])
        if "first_frame_sent" in at:
            child("playout", at["first_frame_sent"], at["now"])
        turn.end(end_time=_ns(at["now"]))

    def shutdown(self) -> None:
        """Export what is left and stop (blocks up to the exporter's timeout)."""
        self._provider.shutdown()
