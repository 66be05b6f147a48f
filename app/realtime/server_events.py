"""Server events in the OpenAI Realtime (GA) vocabulary, built from session messages.

Shapes follow the types in the `openai` package (openai.types.realtime) so
typed SDK parsers accept them. Our one addition is `response.timings_ms` on
`response.done`, documented in the README.
"""

from __future__ import annotations

import base64
from typing import Any

from app.engines.stt import WordScore
from app.ids import new_id
from app.session import messages as msg
from app.session.history import Message

Event = dict[str, Any]


def for_message(message: msg.SessionMessage, *, transcription: bool = True) -> list[Event]:
    """The events that tell a Realtime client about `message`, in order.

    `transcription`: the session reports the user's transcripts.
    """
    match message:
        case msg.SpeechStarted(item_id, audio_start_ms):
            return [speech_started(item_id, audio_start_ms)]
        case msg.SpeechStopped(item_id, audio_end_ms):
            return [speech_stopped(item_id, audio_end_ms)]
        case msg.InputTimedOut(item_id, audio_start_ms, audio_end_ms):
            return [input_timed_out(item_id, audio_start_ms, audio_end_ms)]
        case msg.InputCommitted(item_id, previous):
            return [input_committed(item_id, previous), item_added(user_item(item_id), previous)]
        case msg.UserTranscribed(item_id, transcript, audio_s, words):
            done = item_done(user_item(item_id, transcript=transcript))
            if not transcription:
                return [done]
            return [transcription_completed(item_id, transcript, audio_s, words), done]
        case msg.TextItemAdded(item_id, role, text, previous):
            item = text_item(item_id, role, text)
            return [item_added(item, previous), item_done(item, previous)]
        case msg.ItemDeleted(item_id):
            return [item_deleted(item_id)]
        case msg.ItemTruncated(item_id, audio_end_ms):
            return [item_truncated(item_id, audio_end_ms)]
        case msg.ReplyStarted(response_id, item_id, previous, modality):
            item = assistant_item(item_id, "", "in_progress", modality)
            return [
                response_created(response_id, modality),
                output_item("added", response_id, item),
                item_added(item, previous),
                content_part("added", response_id, item_id, "", modality),
            ]
        case msg.TextWritten(response_id, item_id, delta):
            return [_of_part("response.output_text.delta", response_id, item_id, delta=delta)]
        case msg.ReplyAudioStarted(response_id):
            return [output_audio_buffer("started", response_id)]
        case msg.ClauseSpoken(response_id, item_id, delta):
            return [transcript_delta(response_id, item_id, delta)]
        case msg.ReplyAudioStopped(response_id):
            return [output_audio_buffer("stopped", response_id)]
        case msg.ReplyAudioCleared(response_id):
            return [output_audio_buffer("cleared", response_id)]
        case msg.ReplyEnded():
            return reply_ended(message)
        case msg.Problem(code, message_text):
            return [error(message_text, type_="server_error", code=code)]
    raise TypeError(f"no Realtime event for {message!r}")


def reply_ended(ended: msg.ReplyEnded) -> list[Event]:
    response_id, item_id, text = ended.response_id, ended.item_id, ended.text
    status = "completed" if ended.status == "completed" else "incomplete"
    item = assistant_item(item_id, text, status, ended.modality)
    if ended.modality == "text":
        content = [_of_part("response.output_text.done", response_id, item_id, text=text)]
    else:
        content = [
            audio_done(response_id, item_id),
            transcript_done(response_id, item_id, text),
        ]
    cut = [item_truncated(item_id, ended.heard_ms)] if ended.heard_ms is not None else []
    return [
        *cut,
        *content,
        content_part("done", response_id, item_id, text, ended.modality),
        output_item("done", response_id, item),
        item_done(item, ended.previous_item_id),
        response_done(
            response_id,
            ended.status,
            output=[item],
            timings_ms=ended.timings_ms,
            modality=ended.modality,
            reason=ended.reason,
            error={"type": "server_error", "message": ended.error} if ended.error else None,
        ),
    ]


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


def transcription_completed(
    item_id: str, transcript: str, audio_s: float, words: tuple[WordScore, ...] | None = None
) -> Event:
    event = _event(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
        usage={"type": "duration", "seconds": round(audio_s, 3)},
    )
    if words is not None:  # asked for with include: Whisper's words, not its tokens
        event["logprobs"] = [
            {"token": w.word, "logprob": w.logprob, "bytes": list(w.word.encode())} for w in words
        ]
    return event


def input_timed_out(item_id: str, audio_start_ms: int, audio_end_ms: int) -> Event:
    return _event(
        "input_audio_buffer.timeout_triggered",
        item_id=item_id,
        audio_start_ms=audio_start_ms,
        audio_end_ms=audio_end_ms,
    )


def _response(
    response_id: str, status: str, modality: msg.Modality = "audio", **fields: Any
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "realtime.response",
        "status": status,
        "output_modalities": [modality],
        **fields,
    }


def response_created(response_id: str, modality: msg.Modality = "audio") -> Event:
    response = _response(response_id, "in_progress", modality, output=[])
    return _event("response.created", response=response)


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


def assistant_item(
    item_id: str, text: str, status: str, modality: msg.Modality = "audio"
) -> dict[str, Any]:
    content = (
        {"type": "output_text", "text": text}
        if modality == "text"
        else {"type": "output_audio", "transcript": text}
    )
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [content],
    }


def response_done(
    response_id: str,
    status: str,
    *,
    output: list[dict[str, Any]],
    timings_ms: dict[str, float],
    modality: msg.Modality = "audio",
    reason: str | None = None,
    error: dict[str, str] | None = None,
) -> Event:
    details: dict[str, Any] | None = None
    if status != "completed":
        details = {"type": status}
        if reason:
            details["reason"] = reason
        if error:
            details["error"] = error
    response = _response(response_id, status, modality, output=output, timings_ms=timings_ms)
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


def item_retrieved(message: Message, audio: str | None) -> Event:
    """An item as stored; `audio`: the user's speech, base64 pcm16 at 24 kHz, if kept."""
    if message.role == "assistant" and message.spoken:
        item = assistant_item(message.item_id, message.content, _status(message))
    elif message.role == "assistant":
        item = assistant_item(message.item_id, message.content, _status(message), "text")
    elif message.spoken:
        item = user_item(message.item_id, transcript=message.content)
        part = item["content"][0]
        if audio is not None:
            part["audio"] = audio
        elif message.audio_dropped:
            part["audio_dropped"] = True  # ours: the speech is no longer kept
    else:
        item = text_item(message.item_id, message.role, message.content)
    return _event("conversation.item.retrieved", item=item)


def _status(message: Message) -> str:
    return "incomplete" if message.interrupted else "completed"


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


def content_part(
    state: str, response_id: str, item_id: str, text: str, modality: msg.Modality = "audio"
) -> Event:
    """response.content_part.added / .done."""
    part = (
        {"type": "text", "text": text}
        if modality == "text"
        else {"type": "audio", "transcript": text}
    )
    return _of_part(f"response.content_part.{state}", response_id, item_id, part=part)


def audio_delta(response_id: str, item_id: str, pcm: bytes) -> Event:
    """WebSocket reply audio: base64 pcm16 mono at 24 kHz."""
    delta = base64.b64encode(pcm).decode("ascii")
    return _of_part("response.output_audio.delta", response_id, item_id, delta=delta)


def audio_done(response_id: str, item_id: str) -> Event:
    return _of_part("response.output_audio.done", response_id, item_id)


def error(message: str, *, type_: str = "invalid_request_error", code: str | None = None) -> Event:
    body: dict[str, Any] = {"type": type_, "message": message}
    if code:
        body["code"] = code
    return _event("error", error=body)


def client_error(message: str, code: str, param: str | None, event_id: str | None) -> Event:
    """A client event refused: what was wrong, which field, and which event it was."""
    event = error(message, code=code)
    event["error"].update(param=param, event_id=event_id)
    return event
