"""Every session message becomes Realtime server events that the official SDK's
own models accept (openai.types.realtime.RealtimeServerEvent), in the GA order."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.realtime.server_events import for_message, item_retrieved
from app.session import messages as msg
from app.session.history import Message
from app.vocab.speech import WordScore

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)
TIMINGS = {"stt_done": 120.0, "first_frame_sent": 900.5}
MESSAGE = msg.MessageStarted("resp_1", "item_r", "item_u", 0)
TEXT_MESSAGE = msg.MessageStarted("resp_t", "item_t", "item_u", 0, "text")
CALL = msg.FunctionCall("item_f", "call_1", "get_weather", '{"city": "Paris"}', 0, "item_u")
MCP_CALL = msg.FunctionCall(
    "item_m", "call_2", "order_status", '{"order": "42"}', 0, "item_u", server="orders"
)
MCP_DONE = msg.FunctionCall(
    "item_m", "call_2", "order_status", '{"order": "42"}', 0, "item_u", server="orders",
    output="It has shipped.", approval_request_id="item_q",
)  # fmt: skip
MCP_FAILED = msg.FunctionCall(
    "item_m", "call_2", "order_status", '{"order": "42"}', 0, "item_u", server="orders",
    error={"type": "protocol_error", "code": -32001, "message": "no answer within 15 s"},
)  # fmt: skip
APPROVAL = msg.ApprovalRequested(
    "resp_m", "item_q", "orders", "order_status", '{"order": "42"}', 1, "item_m"
)
# How every reply ends, whatever its status.
REPLY_DONE = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]

EXPECTED: list[tuple[msg.SessionMessage, list[str]]] = [
    (msg.SpeechStarted("item_u", 1200), ["input_audio_buffer.speech_started"]),
    (msg.SpeechStopped("item_u", 2400), ["input_audio_buffer.speech_stopped"]),
    (msg.KeyPressed("5", 1_764_460_800.5), ["input_audio_buffer.dtmf_event_received"]),
    (
        msg.InputCommitted("item_u", "item_0"),
        ["input_audio_buffer.committed", "conversation.item.added"],
    ),
    (
        msg.UserTranscribed("item_u", "Where is it?", 1.2),
        ["conversation.item.input_audio_transcription.completed", "conversation.item.done"],
    ),
    (
        msg.TextItemAdded("item_t", "user", "Hi", "item_u"),
        ["conversation.item.added", "conversation.item.done"],
    ),
    (
        msg.TextItemAdded("item_s", "system", "Be kind", None),
        ["conversation.item.added", "conversation.item.done"],
    ),
    (
        msg.TextItemAdded("item_a", "assistant", "Hello", None),
        ["conversation.item.added", "conversation.item.done"],
    ),
    (msg.ItemDeleted("item_t"), ["conversation.item.deleted"]),
    (msg.ItemTruncated("item_a", 250), ["conversation.item.truncated"]),
    (msg.ReplyStarted("resp_1"), ["response.created"]),
    (
        msg.MessageStarted("resp_1", "item_r", "item_u", 0),
        ["response.output_item.added", "conversation.item.added", "response.content_part.added"],
    ),
    (msg.ReplyAudioStarted("resp_1"), ["output_audio_buffer.started"]),
    (msg.ClauseSpoken("resp_1", "item_r", 0, "It is"), ["response.output_audio_transcript.delta"]),
    (msg.ReplyAudioStopped("resp_1"), ["output_audio_buffer.stopped"]),
    (msg.ReplyAudioCleared("resp_1"), ["output_audio_buffer.cleared"]),
    (
        msg.ReplyEnded("resp_1", "completed", "It is here.", MESSAGE, timings_ms=TIMINGS),
        REPLY_DONE,
    ),
    (
        msg.ReplyEnded(
            "resp_2",
            "cancelled",
            "It",
            MESSAGE,
            timings_ms=TIMINGS,
            reason="turn_detected",
            heard_ms=310,
        ),
        ["conversation.item.truncated", *REPLY_DONE],
    ),
    (
        msg.ReplyEnded("resp_3", "failed", "", MESSAGE, error="LLM unreachable"),
        REPLY_DONE,
    ),
    (msg.Problem("engine_error", "LLM unreachable"), ["error"]),
    (
        msg.TranscriptionFailed("item_s", "stt_timeout", "whisper took over 15 s"),
        ["conversation.item.input_audio_transcription.failed", "conversation.item.done"],
    ),
    (msg.InputTimedOut("item_q", 4000, 9000), ["input_audio_buffer.timeout_triggered"]),
    (
        msg.FunctionCallStarted("resp_f", CALL),
        ["response.output_item.added", "conversation.item.added"],
    ),
    (
        msg.FunctionCallArguments("resp_f", "item_f", "call_1", 0, '{"city":'),
        ["response.function_call_arguments.delta"],
    ),
    (
        msg.ReplyEnded("resp_f", "completed", calls=(CALL,)),
        [
            "response.function_call_arguments.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ],
    ),
    (
        msg.ToolsListing("item_l", "orders", "item_u"),
        ["conversation.item.added", "mcp_list_tools.in_progress"],
    ),
    (
        msg.ToolsListed("item_l", "orders", ({"name": "order_status", "input_schema": {}},)),
        ["mcp_list_tools.completed", "conversation.item.done"],
    ),
    (
        msg.ToolsListed("item_l", "orders", error="cannot connect: refused"),
        ["mcp_list_tools.failed", "conversation.item.done"],
    ),
    (
        msg.FunctionCallArguments("resp_m", "item_m", "call_2", 0, '{"order":', "orders"),
        ["response.mcp_call_arguments.delta"],
    ),
    (
        msg.ServerCallRunning("resp_m", MCP_CALL),
        ["response.mcp_call_arguments.done", "response.mcp_call.in_progress"],
    ),
    (
        msg.ServerCallEnded("resp_m", MCP_DONE),
        ["response.mcp_call.completed", "response.output_item.done", "conversation.item.done"],
    ),
    (
        msg.ServerCallEnded("resp_m", MCP_FAILED),
        ["response.mcp_call.failed", "response.output_item.done", "conversation.item.done"],
    ),
    (
        APPROVAL,
        [
            "response.output_item.added",
            "conversation.item.added",
            "response.output_item.done",
            "conversation.item.done",
        ],
    ),  # fmt: skip
    (
        msg.ApprovalAnswered("item_r", "item_q", True, None, "item_q"),
        ["conversation.item.added", "conversation.item.done"],
    ),
    (
        # The call's item was done as it ended; the approval request's, as it was asked.
        msg.ReplyEnded("resp_m", "completed", calls=(MCP_DONE,), approvals=(APPROVAL,)),
        ["response.done"],
    ),
    (
        msg.ReplyEnded("resp_m", "cancelled", calls=(MCP_CALL,), reason="turn_detected"),
        ["response.output_item.done", "conversation.item.done", "response.done"],
    ),
    (
        msg.ToolOutputAdded("item_o", "call_1", '{"sky": "clear"}', "item_f"),
        ["conversation.item.added", "conversation.item.done"],
    ),
    (
        msg.UserTranscribed("item_u", "Where", 0.5, (WordScore(" Where", -0.25),)),
        ["conversation.item.input_audio_transcription.completed", "conversation.item.done"],
    ),
    (
        msg.MessageStarted("resp_t", "item_t", "item_u", 0, "text"),
        ["response.output_item.added", "conversation.item.added", "response.content_part.added"],
    ),
    (msg.TextWritten("resp_t", "item_t", 0, "Hello"), ["response.output_text.delta"]),
    (
        msg.ReplyEnded("resp_t", "completed", "Hello", TEXT_MESSAGE, modality="text"),
        [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
        ],
    ),
]


def test_every_message_type_is_covered() -> None:
    covered = {type(message) for message, _ in EXPECTED}
    assert covered == set(typing.get_args(msg.SessionMessage))


@pytest.mark.parametrize(("message", "types"), EXPECTED)
def test_each_message_becomes_events_the_sdk_accepts(
    message: msg.SessionMessage, types: list[str]
) -> None:
    events = for_message(message)
    assert [event["type"] for event in events] == types
    for event in events:
        parsed = SERVER_EVENT.validate_python(event, strict=True)
        assert parsed.type == event["type"]
    assert len({event["event_id"] for event in events}) == len(events)


def first(kind: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(event for event in events if event["type"] == kind)


def test_what_the_events_say() -> None:
    cut = for_message(
        msg.ReplyEnded(
            "resp_2", "cancelled", "It", MESSAGE, timings_ms=TIMINGS,
            reason="turn_detected", heard_ms=310,
        )
    )  # fmt: skip
    response = first("response.done", cut)["response"]
    assert response["status"] == "cancelled"
    assert response["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert response["timings_ms"] == TIMINGS
    assert response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["content"][0]["transcript"] == "It"
    assert (cut[0]["item_id"], cut[0]["audio_end_ms"]) == ("item_r", 310)

    failed = for_message(msg.ReplyEnded("resp_3", "failed", error="LLM unreachable"))
    assert [event["type"] for event in failed] == ["response.done"], "no words, no item"
    details = failed[0]["response"]["status_details"]
    assert details["type"] == "failed" and "reason" not in details, "the SDK knows no such reason"
    assert details["error"] == {"type": "server_error", "message": "LLM unreachable"}
    assert failed[0]["response"]["output"] == []

    error = for_message(msg.Problem("engine_error", "LLM unreachable"))[0]["error"]
    assert error == {"type": "server_error", "message": "LLM unreachable", "code": "engine_error"}

    transcribed = msg.UserTranscribed("item_u", "Where is it?", 1.2)
    assert [e["type"] for e in for_message(transcribed, transcription=False)] == [
        "conversation.item.done"
    ]
    item = for_message(transcribed)[1]["item"]
    assert item["content"] == [{"type": "input_audio", "transcript": "Where is it?"}]


def test_the_language_heard_is_in_the_transcription_event() -> None:
    spanish = for_message(msg.UserTranscribed("item_u", "¿Dónde está?", 1.0, None, "es"))[0]
    assert spanish["languages"] == [{"code": "es"}]
    assert SERVER_EVENT.validate_python(spanish).languages[0].code == "es"  # type: ignore[union-attr]
    # Nothing made out, or no language told: an empty list, as OpenAI's says it could not.
    assert for_message(msg.UserTranscribed("item_u", "", 1.0, None, "es"))[0]["languages"] == []
    assert for_message(msg.UserTranscribed("item_u", "Hm.", 1.0))[0]["languages"] == []


def test_written_replies_and_word_scores() -> None:
    scored = msg.UserTranscribed("item_u", "Where", 0.5, (WordScore(" Where", -0.25),))
    logprobs = for_message(scored)[0]["logprobs"]
    assert logprobs == [{"token": " Where", "logprob": -0.25, "bytes": list(b" Where")}]
    assert for_message(msg.ReplyStarted("resp_t", "text"))[0]["response"]["output_modalities"] == [
        "text"
    ]
    started = for_message(TEXT_MESSAGE)
    assert started[0]["item"]["content"] == [{"type": "output_text", "text": ""}]
    assert started[2]["part"] == {"type": "text", "text": ""}
    done = for_message(
        msg.ReplyEnded("resp_t", "completed", "Hello", TEXT_MESSAGE, modality="text")
    )
    assert done[0]["text"] == "Hello" and done[-1]["response"]["output_modalities"] == ["text"]
    assert done[-1]["response"]["output"][0]["content"] == [
        {"type": "output_text", "text": "Hello"}
    ]


def test_a_reply_that_speaks_then_calls_a_tool_has_two_output_items() -> None:
    call = msg.FunctionCall("item_f", "call_1", "get_weather", '{"city": "Paris"}', 1, "item_r")
    done = for_message(msg.ReplyEnded("resp_1", "completed", "Let me look.", MESSAGE, (call,)))
    response = first("response.done", done)["response"]
    assert [item["type"] for item in response["output"]] == ["message", "function_call"]
    arguments = first("response.function_call_arguments.done", done)
    assert (arguments["output_index"], arguments["arguments"]) == (1, '{"city": "Paris"}')
    broken = msg.FunctionCall("item_g", "call_2", "get_weather", "{oops", 0, None, complete=False)
    failed = for_message(msg.ReplyEnded("resp_2", "failed", calls=(broken,), error="bad arguments"))
    assert first("response.done", failed)["response"]["output"][0]["status"] == "incomplete"
    for event in [*done, *failed]:
        SERVER_EVENT.validate_python(event, strict=True)


@pytest.mark.parametrize(
    "message",
    [
        Message("user", "Where is it?", "item_1", spoken=True, audio=bytes(3200)),
        Message("user", "Where is it?", "item_1", spoken=True, audio_dropped=True),
        Message("user", "typed", "item_2"),
        Message("system", "Be kind.", "item_3"),
        Message("assistant", "It is", "item_4", interrupted=True, spoken=True),
        Message("assistant", "Written.", "item_5"),
    ],
    ids=["spoken", "audio-dropped", "typed", "system", "reply", "written-reply"],
)
def test_a_retrieved_item_is_as_stored(message: Message) -> None:
    audio = "AAAA" if message.audio is not None else None
    event = item_retrieved(message, audio)
    SERVER_EVENT.validate_python(event, strict=True)
    item = event["item"]
    assert (item["id"], item["role"]) == (message.item_id, message.role)
    part = item["content"][0]
    assert message.content in (part.get("transcript"), part.get("text"))
    assert part.get("audio") == audio
    assert part.get("audio_dropped", False) == message.audio_dropped
    assert item["status"] == ("incomplete" if message.interrupted else "completed")
