"""Server events in the OpenAI Realtime (GA) vocabulary, built from session messages.

Shapes follow the types in the `openai` package (openai.types.realtime) so
typed SDK parsers accept them. Our one addition is `response.timings_ms` on
`response.done`, documented in docs/reference/realtime-events.md.
"""

from __future__ import annotations

import base64
from typing import Any

from app.ids import new_id
from app.realtime.items import (
    approval_request_item,
    approval_response_item,
    assistant_item,
    call_item,
    function_call_item,
    function_output_item,
    mcp_call_item,
    mcp_list_tools_item,
    stored_item,
    text_item,
    user_item,
)
from app.session import messages as msg
from app.session.history import Message
from app.vocab.speech import WordScore

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
        case msg.UserTranscribed(item_id, transcript, audio_s, words, language):
            done = item_done(user_item(item_id, transcript=transcript))
            if not transcription:
                return [done]
            completed = transcription_completed(item_id, transcript, audio_s, words, language)
            return [completed, done]
        case msg.TranscriptionFailed(item_id, code, message_text):
            done = item_done(user_item(item_id))
            if not transcription:
                return [done]
            return [transcription_failed(item_id, code, message_text), done]
        case msg.KeyPressed(key, at):
            return [
                _event("input_audio_buffer.dtmf_event_received", event=key, received_at=int(at))
            ]
        case msg.TextItemAdded(item_id, role, text, previous):
            item = text_item(item_id, role, text)
            return [item_added(item, previous), item_done(item, previous)]
        case msg.ItemDeleted(item_id):
            return [item_deleted(item_id)]
        case msg.ItemTruncated(item_id, audio_end_ms):
            return [item_truncated(item_id, audio_end_ms)]
        case msg.ReplyStarted(response_id, modality):
            return [response_created(response_id, modality)]
        case msg.MessageStarted(response_id, item_id, previous, index, modality):
            item = assistant_item(item_id, "", "in_progress", modality)
            return [
                output_item("added", response_id, item, index),
                item_added(item, previous),
                content_part("added", response_id, item_id, "", modality, index),
            ]
        case msg.FunctionCallStarted(response_id, call):
            item = call_item(call, "in_progress")
            return [
                output_item("added", response_id, item, call.output_index),
                item_added(item, call.previous_item_id),
            ]
        case msg.FunctionCallArguments(response_id, item_id, _, index, delta, server) if server:
            return [
                _event(
                    "response.mcp_call_arguments.delta",
                    response_id=response_id,
                    item_id=item_id,
                    output_index=index,
                    delta=delta,
                )
            ]
        case msg.FunctionCallArguments(response_id, item_id, call_id, index, delta, _):
            return [
                _event(
                    "response.function_call_arguments.delta",
                    response_id=response_id,
                    item_id=item_id,
                    output_index=index,
                    call_id=call_id,
                    delta=delta,
                )
            ]
        case msg.ServerCallRunning(response_id, call):
            return [
                _event(
                    "response.mcp_call_arguments.done",
                    response_id=response_id,
                    item_id=call.item_id,
                    output_index=call.output_index,
                    arguments=call.arguments,
                ),
                _of_call("response.mcp_call.in_progress", call),
            ]
        case msg.ServerCallEnded(response_id, call):
            item = mcp_call_item(call)
            ended = "failed" if call.error is not None else "completed"
            return [
                _of_call(f"response.mcp_call.{ended}", call),
                output_item("done", response_id, item, call.output_index),
                item_done(item, call.previous_item_id),
            ]
        case msg.ApprovalRequested(response_id, item_id, _, _, _, index, previous):
            item = approval_request_item(message)
            return [
                output_item("added", response_id, item, index),
                item_added(item, previous),
                output_item("done", response_id, item, index),
                item_done(item, previous),
            ]
        case msg.ApprovalAnswered(item_id, request_id, approve, reason, previous):
            item = approval_response_item(item_id, request_id, approve, reason)
            return [item_added(item, previous), item_done(item, previous)]
        case msg.ToolsListing(item_id, server, previous):
            item = mcp_list_tools_item(item_id, server)
            return [
                item_added(item, previous),
                _event("mcp_list_tools.in_progress", item_id=item_id),
            ]
        case msg.ToolsListed(item_id, server, tools, problem):
            if problem is not None:
                return [
                    _event("mcp_list_tools.failed", item_id=item_id),
                    item_done(mcp_list_tools_item(item_id, server), None),
                ]
            item = mcp_list_tools_item(item_id, server, tools)
            return [_event("mcp_list_tools.completed", item_id=item_id), item_done(item, None)]
        case msg.ToolOutputAdded(item_id, call_id, output, previous):
            item = function_output_item(item_id, call_id, output)
            return [item_added(item, previous), item_done(item, previous)]
        case msg.TextWritten(response_id, item_id, index, delta):
            return [
                _of_part("response.output_text.delta", response_id, item_id, index, delta=delta)
            ]
        case msg.ReplyAudioStarted(response_id):
            return [output_audio_buffer("started", response_id)]
        case msg.ClauseSpoken(response_id, item_id, index, delta):
            return [transcript_delta(response_id, item_id, index, delta)]
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
    """The end of each output item of the reply, in order, then response.done."""
    response_id, events, output = ended.response_id, [], []
    if ended.message is not None:
        words, done = _message_ended(ended, ended.message)
        events += words
        output.append(done)
    for call in ended.calls:
        if call.server:
            item = mcp_call_item(call)
            output.append(item)
            if call.output is None and call.error is None:  # cut short while it ran
                events += [
                    output_item("done", response_id, item, call.output_index),
                    item_done(item, call.previous_item_id),
                ]
            continue
        item = function_call_item(call, "completed" if call.complete else "incomplete")
        events += [
            _event(
                "response.function_call_arguments.done",
                response_id=response_id,
                item_id=call.item_id,
                output_index=call.output_index,
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
            ),
            output_item("done", response_id, item, call.output_index),
            item_done(item, call.previous_item_id),
        ]
        output.append(item)
    output += [approval_request_item(request) for request in ended.approvals]
    output.sort(key=_output_index(ended))
    error_ = {"type": "server_error", "message": ended.error} if ended.error else None
    return [
        *events,
        response_done(
            response_id,
            ended.status,
            output=output,
            timings_ms=ended.timings_ms,
            modality=ended.modality,
            reason=ended.reason,
            error=error_,
        ),
    ]


def _output_index(ended: msg.ReplyEnded) -> Any:
    """Where each output item of the reply sits in response.output, by its id."""
    index = {call.item_id: call.output_index for call in ended.calls}
    index.update({request.item_id: request.output_index for request in ended.approvals})
    if ended.message is not None:
        index[ended.message.item_id] = ended.message.output_index
    return lambda item: index.get(item["id"], 0)


def _of_call(type_: str, call: msg.FunctionCall) -> Event:
    return _event(type_, item_id=call.item_id, output_index=call.output_index)


def _message_ended(
    ended: msg.ReplyEnded, message: msg.MessageStarted
) -> tuple[list[Event], dict[str, Any]]:
    response_id, item_id, index, text = (
        ended.response_id,
        message.item_id,
        message.output_index,
        ended.text,
    )
    status = "completed" if ended.status == "completed" else "incomplete"
    item = assistant_item(item_id, text, status, ended.modality)
    if ended.modality == "text":
        content = [_of_part("response.output_text.done", response_id, item_id, index, text=text)]
    else:
        content = [
            _of_part("response.output_audio.done", response_id, item_id, index),
            _of_part(
                "response.output_audio_transcript.done",
                response_id,
                item_id,
                index,
                transcript=text,
            ),
        ]
    cut = [item_truncated(item_id, ended.heard_ms)] if ended.heard_ms is not None else []
    events = [
        *cut,
        *content,
        content_part("done", response_id, item_id, text, ended.modality, index),
        output_item("done", response_id, item, index),
        item_done(item, message.previous_item_id),
    ]
    return events, item


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


def transcription_failed(item_id: str, code: str, message: str) -> Event:
    return _event(
        "conversation.item.input_audio_transcription.failed",
        item_id=item_id,
        content_index=0,
        error={"type": "server_error", "code": code, "message": message, "param": None},
    )


def transcription_completed(
    item_id: str,
    transcript: str,
    audio_s: float,
    words: tuple[WordScore, ...] | None = None,
    language: str = "",
) -> Event:
    event = _event(
        "conversation.item.input_audio_transcription.completed",
        item_id=item_id,
        content_index=0,
        transcript=transcript,
        usage={"type": "duration", "seconds": round(audio_s, 3)},
        # What Whisper heard; an empty list, as OpenAI's, where it could tell nothing.
        languages=[{"code": language}] if language and transcript else [],
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


def _of_part(
    type_: str, response_id: str, item_id: str, output_index: int = 0, **fields: Any
) -> Event:
    """An event about a reply's message item and its one content part."""
    return _event(
        type_,
        response_id=response_id,
        item_id=item_id,
        output_index=output_index,
        content_index=0,
        **fields,
    )


def transcript_delta(response_id: str, item_id: str, output_index: int, delta: str) -> Event:
    return _of_part(
        "response.output_audio_transcript.delta", response_id, item_id, output_index, delta=delta
    )


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


def item_added(item: dict[str, Any], previous_item_id: str | None = None) -> Event:
    return _event("conversation.item.added", previous_item_id=previous_item_id, item=item)


def item_done(item: dict[str, Any], previous_item_id: str | None = None) -> Event:
    return _event("conversation.item.done", previous_item_id=previous_item_id, item=item)


def item_retrieved(message: Message, audio: str | None) -> Event:
    """The item as stored; `audio`: the user's speech, base64 pcm16 at 24 kHz, if kept."""
    return _event("conversation.item.retrieved", item=stored_item(message, audio))


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


def output_item(state: str, response_id: str, item: dict[str, Any], output_index: int = 0) -> Event:
    """response.output_item.added / .done."""
    return _event(
        f"response.output_item.{state}",
        response_id=response_id,
        output_index=output_index,
        item=item,
    )


def content_part(
    state: str,
    response_id: str,
    item_id: str,
    text: str,
    modality: msg.Modality = "audio",
    output_index: int = 0,
) -> Event:
    """response.content_part.added / .done."""
    part = (
        {"type": "text", "text": text}
        if modality == "text"
        else {"type": "audio", "transcript": text}
    )
    return _of_part(f"response.content_part.{state}", response_id, item_id, output_index, part=part)


def audio_delta(response_id: str, item_id: str, output_index: int, audio: bytes) -> Event:
    """WebSocket reply audio, base64, in the session's output format."""
    delta = base64.b64encode(audio).decode("ascii")
    return _of_part("response.output_audio.delta", response_id, item_id, output_index, delta=delta)


MAX_ECHO_CHARS = 128


def error(message: str, *, type_: str = "invalid_request_error", code: str | None = None) -> Event:
    body: dict[str, Any] = {"type": type_, "message": message}
    if code:
        body["code"] = code
    return _event("error", error=body)


def client_error(message: str, code: str, param: str | None, event_id: str | None) -> Event:
    """A client event refused: what was wrong, which field, and which event it was.

    What the client wrote (its type, field names, event id) is echoed only up to a
    point: a hostile client must not get its megabytes sent back to it."""
    event = error(_clip(message, MAX_ECHO_CHARS * 2) or "", code=code)
    event["error"].update(
        param=_clip(param, MAX_ECHO_CHARS), event_id=_clip(event_id, MAX_ECHO_CHARS)
    )
    return event


def _clip(text: str | None, most: int) -> str | None:
    if text is None or len(text) <= most:
        return text
    return f"{text[:most]}... ({len(text)} characters)"
