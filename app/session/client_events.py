"""What a client may ask of its session over the event channel (OpenAI Realtime GA names).

Each handler checks its event's fields and answers with the matching server event
or an `error` (type invalid_request_error, with a code and the offending param);
a bad event never ends the session.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from app import events
from app.session.history import Message
from app.session.options import OptionError

if TYPE_CHECKING:
    from app.session.session import Session

# OpenAI's own cap on one input_audio_buffer.append.
MAX_APPEND_BYTES = 15 * 1024 * 1024
INPUT_RATE = 24_000


class BadEvent(ValueError):
    def __init__(self, message: str, code: str = "invalid_value", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


def handle(session: Session, event: dict[str, Any]) -> None:
    kind = event.get("type")
    handler = HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        session.ctx.send(
            events.error(f"unsupported client event type: {kind!r}", code="unknown_event")
        )
        return
    try:
        handler(session, event)
    except BadEvent as exc:
        session.ctx.send(_error(str(exc), exc.code, exc.param, event))


def _error(message: str, code: str, param: str | None, event: dict[str, Any]) -> events.Event:
    out = events.error(message, code=code)
    out["error"]["param"] = param
    out["error"]["event_id"] = event.get("event_id")
    return out


def session_update(session: Session, event: dict[str, Any]) -> None:
    try:
        session.configure(event.get("session"))  # type: ignore[arg-type]
    except OptionError as exc:
        raise BadEvent(str(exc), param=exc.param) from exc
    session.ctx.send(events.session_updated(session.describe()))


def append_audio(session: Session, event: dict[str, Any]) -> None:
    audio = event.get("audio")
    if not isinstance(audio, str):
        raise BadEvent("audio must be a base64 string of pcm16 mono at 24 kHz", param="audio")
    try:
        pcm = base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadEvent(f"audio is not valid base64: {exc}", "invalid_audio", "audio") from exc
    if len(pcm) > MAX_APPEND_BYTES:
        raise BadEvent(f"audio is over {MAX_APPEND_BYTES} bytes", "invalid_audio", "audio")
    if len(pcm) % 2:
        raise BadEvent(
            "audio has an odd number of bytes: expected pcm16 (2 bytes a sample)",
            "invalid_audio",
            "audio",
        )
    session.append_pcm24k(np.frombuffer(pcm, dtype=np.int16))


def commit_audio(session: Session, event: dict[str, Any]) -> None:
    if not session.commit_input():
        raise BadEvent(
            "the input audio buffer holds no speech to commit", "input_audio_buffer_commit_empty"
        )


def clear_audio(session: Session, event: dict[str, Any]) -> None:
    session.clear_input()
    session.ctx.send(events.input_cleared())


def create_item(session: Session, event: dict[str, Any]) -> None:
    item = event.get("item")
    if not isinstance(item, dict):
        raise BadEvent("item must be an object", param="item")
    if item.get("type") != "message":
        raise BadEvent(
            f"items of type {item.get('type')!r} are not supported (no tools are configured); "
            "send a message",
            param="item.type",
        )
    role = item.get("role")
    if role not in ("user", "assistant", "system"):
        raise BadEvent("item.role must be user, assistant or system", param="item.role")
    content = item.get("content")
    texts = [
        part.get("text") if isinstance(part, dict) else None
        for part in (content if isinstance(content, list) else [None])
    ]
    if not texts or not all(isinstance(text, str) for text in texts):
        raise BadEvent(
            "item.content must be a list of text parts ({type: 'input_text', text: ...})",
            param="item.content",
        )
    item_id = item.get("id") or events.new_id("item")
    if not isinstance(item_id, str) or session.history.find(item_id) is not None:
        raise BadEvent(f"item id {item_id!r} is not a new string id", param="item.id")
    previous = session.history.last_item_id
    text = " ".join(texts)  # type: ignore[arg-type]
    session.history.add(Message(role, text, item_id))
    created = events.text_item(item_id, role, text)
    session.ctx.send(events.item_added(created, previous))
    session.ctx.send(events.item_done(created, previous))


def delete_item(session: Session, event: dict[str, Any]) -> None:
    item_id = event.get("item_id")
    reply = session.ctx.reply
    if reply is not None and reply.item_id == item_id:
        raise BadEvent("that item is still being spoken; cancel the response first")
    if not isinstance(item_id, str) or not session.history.remove(item_id):
        raise BadEvent(f"no item {item_id!r}", "item_not_found", "item_id")
    session.ctx.send(events.item_deleted(item_id))


def truncate_item(session: Session, event: dict[str, Any]) -> None:
    item_id, audio_end_ms = event.get("item_id"), event.get("audio_end_ms")
    if not isinstance(item_id, str) or not isinstance(audio_end_ms, int) or audio_end_ms < 0:
        raise BadEvent(
            "conversation.item.truncate needs item_id (string) and audio_end_ms (integer >= 0)"
        )
    reply = session.ctx.reply
    if reply is not None and reply.item_id == item_id:
        reply.interrupt("client_cancelled", heard_ms=audio_end_ms)
        return
    message = session.history.find(item_id)
    if message is None or message.role != "assistant":
        raise BadEvent(f"no assistant item {item_id!r}", "item_not_found", "item_id")
    if audio_end_ms > message.audio_ms:
        raise BadEvent(
            f"audio_end_ms {audio_end_ms} is past the end of the item's audio "
            f"({message.audio_ms:.0f} ms)",
            param="audio_end_ms",
        )
    session.history.truncate(message, audio_end_ms)
    session.ctx.send(events.item_truncated(item_id, audio_end_ms))


def create_response(session: Session, event: dict[str, Any]) -> None:
    if session.ctx.reply is not None or session.busy:
        raise BadEvent(
            "a response is already in progress", "conversation_already_has_active_response"
        )
    options = event.get("response") or {}
    instructions = options.get("instructions") if isinstance(options, dict) else None
    if instructions is not None and not isinstance(instructions, str):
        raise BadEvent("response.instructions must be a string", param="response.instructions")
    session.request_response(instructions)


def cancel_response(session: Session, event: dict[str, Any]) -> None:
    reply = session.ctx.reply
    wanted = event.get("response_id")
    if reply is None or (wanted and wanted != reply.response_id):
        raise BadEvent("no response in progress to cancel", "response_cancel_not_active")
    reply.interrupt("client_cancelled")


def clear_output(session: Session, event: dict[str, Any]) -> None:
    if not session.interrupt("client_cancelled"):
        raise BadEvent("no audio is playing", "output_audio_buffer_empty")


HANDLERS: dict[str, Callable[[Session, dict[str, Any]], None]] = {
    "session.update": session_update,
    "input_audio_buffer.append": append_audio,
    "input_audio_buffer.commit": commit_audio,
    "input_audio_buffer.clear": clear_audio,
    "conversation.item.create": create_item,
    "conversation.item.delete": delete_item,
    "conversation.item.truncate": truncate_item,
    "response.create": create_response,
    "response.cancel": cancel_response,
    "output_audio_buffer.clear": clear_output,
}
