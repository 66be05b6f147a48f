"""Server events in OpenAI's Live vocabulary (openai.types.live), built from session
messages. A Live session is one timeline: events carry milliseconds from its start."""

from __future__ import annotations

import base64
from typing import Any

from app.events.channel import Event
from app.ids import new_id

MAX_ID_CHARS = 128  # of a client's event id, told back in an error
# Why a session closed, in Live's words, for each of our call endings.
CLOSE_REASONS = {
    "close_requested": "close_requested",
    "hangup": "close_requested",
    "session_expired": "expired",
    "peer_closed": "remote_hangup",
    "connect_timeout": "connection_lost",
    "media_timeout": "connection_lost",
    "idle_timeout": "expired",
    "shutdown": "expired",
}


def _event(type_: str, client_event_id: str | None = None, **fields: Any) -> Event:
    event: Event = {"type": type_, "event_id": new_id("event"), **fields}
    if client_event_id is not None:  # a client's id told back, not its megabytes
        event["client_event_id"] = client_event_id[:MAX_ID_CHARS]
    return event


def started(session: dict[str, Any], client_event_id: str | None = None) -> Event:
    return _event("session.started", client_event_id, session=session)


def updated(session: dict[str, Any], client_event_id: str | None = None) -> Event:
    return _event("session.updated", client_event_id, session=session)


def acknowledged(type_: str, client_event_id: str | None) -> Event:
    """session.input_audio.muted / unmuted."""
    return _event(type_, client_event_id)


def appended(type_: str, at_ms: int, client_event_id: str | None) -> Event:
    """session.{instructions,thinking,commentary}.appended, placed on the timeline."""
    return _event(type_, client_event_id, start_ms=at_ms, end_ms=at_ms)


def input_transcript(delta: str, start_ms: int, end_ms: int) -> Event:
    return _event("session.input_transcript.delta", delta=delta, start_ms=start_ms, end_ms=end_ms)


def output_transcript(delta: str, start_ms: int, end_ms: int) -> Event:
    return _event("session.output_transcript.delta", delta=delta, start_ms=start_ms, end_ms=end_ms)


def output_audio(audio: bytes) -> Event:
    """Reply audio on the primary WebSocket: no id, no timestamps (as Live sends it)."""
    return {"type": "session.output_audio.delta", "delta": base64.b64encode(audio).decode()}


def usage(seconds: float) -> Event:
    return _event("session.usage.updated", usage={"seconds": round(seconds, 3)})


def closed(session: dict[str, Any], reason: str, seconds: float) -> Event:
    return _event(
        "session.closed",
        reason=CLOSE_REASONS.get(reason, "connection_lost"),
        session=session,
        usage={"seconds": round(seconds, 3)},
    )


def dtmf_received(key: str) -> Event:
    return _event("transport.dtmf.received", event=key)


def dtmf_sent(key: str, client_event_id: str | None) -> Event:
    return _event("transport.dtmf.sent", client_event_id, event=key)


def error(
    message: str,
    code: str,
    *,
    type_: str = "invalid_request_error",
    param: str | None = None,
    client_event_id: str | None = None,
) -> Event:
    body: dict[str, Any] = {"type": type_, "code": code, "message": message}
    if param is not None:
        body["param"] = param
    if client_event_id is not None:
        body["client_event_id"] = client_event_id[:MAX_ID_CHARS]
    return _event("error", client_event_id, error=body)


def delegation_created(
    delegation_id: str, target: str, at_ms: int, task: str, response_id: str | None = None
) -> Event:
    """`delegation.task`, what the agent asked for, is ours: Live's event carries none,
    and a client would have to guess it from the transcript."""
    delegation: dict[str, Any] = {"id": delegation_id, "type": "delegation", "target": target,
                                  "task": task}  # fmt: skip
    if response_id is not None:
        delegation["response_id"] = response_id
    return _event("session.delegation.created", delegation=delegation, offset_ms=at_ms)


def response_event(nested: dict[str, Any], delegation_id: str | None) -> Event:
    """A Responses backend's streaming event, in Live's envelope."""
    return _event("response.event", event=nested, delegation_id=delegation_id)
