"""Server events in the OpenAI Realtime (GA) vocabulary.

Shapes follow the types in the `openai` package (openai.types.realtime) so
typed SDK parsers accept them. Our one addition is `response.timings_ms` on
`response.done`, documented in the README.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
EventSender = Callable[[Event], None]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def _event(type_: str, **fields: Any) -> Event:
    return {"type": type_, "event_id": new_id("event"), **fields}


def session_created(session: dict[str, Any]) -> Event:
    return _event("session.created", session=session)


def speech_started(item_id: str, audio_start_ms: int) -> Event:
    return _event(
        "input_audio_buffer.speech_started", item_id=item_id, audio_start_ms=audio_start_ms
    )


def speech_stopped(item_id: str, audio_end_ms: int) -> Event:
    return _event("input_audio_buffer.speech_stopped", item_id=item_id, audio_end_ms=audio_end_ms)


def transcription_completed(item_id: str, transcript: str, audio_s: float) -> Event:
    return _event(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
        usage={"type": "duration", "seconds": round(audio_s, 3)},
    )


def _response(response_id: str, status: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "realtime.response",
        "status": status,
        "output_modalities": ["audio"],
        **fields,
    }


def response_created(response_id: str) -> Event:
    return _event("response.created", response=_response(response_id, "in_progress", output=[]))


def _of_part(type_: str, response_id: str, item_id: str, **fields: Any) -> Event:
    """An event about a reply's one output item and its one (audio) content part."""
    return _event(
        type_, response_id=response_id, item_id=item_id, output_index=0, content_index=0, **fields
    )


def transcript_delta(response_id: str, item_id: str, delta: str) -> Event:
    return _of_part("response.output_audio_transcript.delta", response_id, item_id, delta=delta)


def transcript_done(response_id: str, item_id: str, transcript: str) -> Event:
    return _of_part(
        "response.output_audio_transcript.done", response_id, item_id, transcript=transcript
    )


def assistant_item(item_id: str, transcript: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_audio", "transcript": transcript}],
    }


def response_done(
    response_id: str,
    status: str,
    *,
    output: list[dict[str, Any]],
    timings_ms: dict[str, float],
    reason: str | None = None,
    error: dict[str, str] | None = None,
) -> Event:
    details: dict[str, Any] | None = None
    if status != "completed":
        details = {"type": status, "reason": reason}
        if error:
            details["error"] = error
    response = _response(response_id, status, output=output, timings_ms=timings_ms)
    if details:
        response["status_details"] = details
    return _event("response.done", response=response)


def output_audio_buffer(state: str, response_id: str) -> Event:
    """WebRTC playout: state is started, stopped or cleared."""
    return _event(f"output_audio_buffer.{state}", response_id=response_id)


def item_truncated(item_id: str, audio_end_ms: int) -> Event:
    return _event(
        "conversation.item.truncated", item_id=item_id, content_index=0, audio_end_ms=audio_end_ms
    )


def user_item(
    item_id: str, *, transcript: str | None = None, text: str | None = None
) -> dict[str, Any]:
    """A user message: spoken (input_audio, transcript once known) or typed (input_text)."""
    content = (
        {"type": "input_text", "text": text}
        if text is not None
        else {"type": "input_audio", "transcript": transcript}
    )
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": "user",
        "status": "completed",
        "content": [content],
    }


def text_item(item_id: str, role: str, text: str) -> dict[str, Any]:
    if role == "user":
        return user_item(item_id, text=text)
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": kind, "text": text}],
    }


def item_added(item: dict[str, Any], previous_item_id: str | None = None) -> Event:
    return _event("conversation.item.added", previous_item_id=previous_item_id, item=item)


def item_done(item: dict[str, Any], previous_item_id: str | None = None) -> Event:
    return _event("conversation.item.done", previous_item_id=previous_item_id, item=item)


def item_deleted(item_id: str) -> Event:
    return _event("conversation.item.deleted", item_id=item_id)


def input_committed(item_id: str, previous_item_id: str | None = None) -> Event:
    return _event(
        "input_audio_buffer.committed", item_id=item_id, previous_item_id=previous_item_id
    )


def input_cleared() -> Event:
    return _event("input_audio_buffer.cleared")


def session_updated(session: dict[str, Any]) -> Event:
    return _event("session.updated", session=session)


def output_item(state: str, response_id: str, item: dict[str, Any]) -> Event:
    """response.output_item.added / .done."""
    return _event(
        f"response.output_item.{state}", response_id=response_id, output_index=0, item=item
    )


def content_part(state: str, response_id: str, item_id: str, transcript: str) -> Event:
    """response.content_part.added / .done."""
    part = {"type": "audio", "transcript": transcript}
    return _of_part(f"response.content_part.{state}", response_id, item_id, part=part)


def audio_delta(response_id: str, item_id: str, pcm: bytes) -> Event:
    """WebSocket reply audio: base64 pcm16 mono at 24 kHz."""
    delta = base64.b64encode(pcm).decode("ascii")
    return _of_part("response.output_audio.delta", response_id, item_id, delta=delta)


def audio_done(response_id: str, item_id: str) -> Event:
    return _of_part("response.output_audio.done", response_id, item_id)


def decode_client_event(
    message: str | bytes, max_bytes: int
) -> tuple[dict[str, Any] | None, Event | None]:
    """A client's message as (event, None), or (None, the error event to answer with)."""
    if isinstance(message, bytes) or len(message) > max_bytes:
        return None, error(
            f"events must be JSON text under {max_bytes // 1024} KiB", code="invalid_message"
        )
    try:
        event = json.loads(message)
    except ValueError as exc:
        return None, error(f"malformed JSON: {exc}", code="invalid_json")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None, error("an event is a JSON object with a string 'type'", code="invalid_event")
    return event, None


def error(message: str, *, type_: str = "invalid_request_error", code: str | None = None) -> Event:
    body: dict[str, Any] = {"type": type_, "message": message}
    if code:
        body["code"] = code
    return _event("error", error=body)
