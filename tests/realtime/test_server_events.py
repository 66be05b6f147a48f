"""Every session message becomes Realtime server events that the official SDK's
own models accept (openai.types.realtime.RealtimeServerEvent), in the GA order."""

from __future__ import annotations

import typing

import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.engines.stt import WordScore
from app.realtime.server_events import for_message, item_retrieved
from app.session import messages as msg
from app.session.history import Message

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)
TIMINGS = {"stt_done": 120.0, "first_frame_sent": 900.5}
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
    (
        msg.ReplyStarted("resp_1", "item_r", "item_u"),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
        ],
    ),
    (msg.ReplyAudioStarted("resp_1"), ["output_audio_buffer.started"]),
    (msg.ClauseSpoken("resp_1", "item_r", "It is"), ["response.output_audio_transcript.delta"]),
    (msg.ReplyAudioStopped("resp_1"), ["output_audio_buffer.stopped"]),
    (msg.ReplyAudioCleared("resp_1"), ["output_audio_buffer.cleared"]),
    (
        msg.ReplyEnded("resp_1", "item_r", "completed", "It is here.", "item_u", TIMINGS),
        REPLY_DONE,
    ),
    (
        msg.ReplyEnded(
            "resp_2",
            "item_r",
            "cancelled",
            "It",
            "item_u",
            TIMINGS,
            reason="turn_detected",
            heard_ms=310,
        ),
        ["conversation.item.truncated", *REPLY_DONE],
    ),
    (
        msg.ReplyEnded("resp_3", "item_r", "failed", "", "item_u", error="LLM unreachable"),
        REPLY_DONE,
    ),
    (msg.Problem("engine_error", "LLM unreachable"), ["error"]),
    (msg.InputTimedOut("item_q", 4000, 9000), ["input_audio_buffer.timeout_triggered"]),
    (
        msg.UserTranscribed("item_u", "Where", 0.5, (WordScore(" Where", -0.25),)),
        ["conversation.item.input_audio_transcription.completed", "conversation.item.done"],
    ),
    (
        msg.ReplyStarted("resp_t", "item_t", "item_u", "text"),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
        ],
    ),
    (msg.TextWritten("resp_t", "item_t", "Hello"), ["response.output_text.delta"]),
    (
        msg.ReplyEnded("resp_t", "item_t", "completed", "Hello", "item_u", modality="text"),
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


def test_what_the_events_say() -> None:
    (done,) = [e for e in for_message(EXPECTED[15][0]) if e["type"] == "response.done"]
    response = done["response"]
    assert response["status"] == "cancelled"
    assert response["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert response["timings_ms"] == TIMINGS
    assert response["output"][0]["status"] == "incomplete"
    assert response["output"][0]["content"][0]["transcript"] == "It"
    truncated = for_message(EXPECTED[15][0])[0]
    assert (truncated["item_id"], truncated["audio_end_ms"]) == ("item_r", 310)

    (failed,) = [e for e in for_message(EXPECTED[16][0]) if e["type"] == "response.done"]
    details = failed["response"]["status_details"]
    assert details["type"] == "failed" and "reason" not in details, "the SDK knows no such reason"
    assert details["error"] == {"type": "server_error", "message": "LLM unreachable"}

    error = for_message(EXPECTED[17][0])[0]["error"]
    assert error == {"type": "server_error", "message": "LLM unreachable", "code": "engine_error"}

    transcribed = EXPECTED[3][0]
    assert [e["type"] for e in for_message(transcribed, transcription=False)] == [
        "conversation.item.done"
    ]
    item = for_message(transcribed)[1]["item"]
    assert item["content"] == [{"type": "input_audio", "transcript": "Where is it?"}]


def test_written_replies_and_word_scores() -> None:
    logprobs = for_message(EXPECTED[19][0])[0]["logprobs"]
    assert logprobs == [{"token": " Where", "logprob": -0.25, "bytes": list(b" Where")}]
    created = for_message(EXPECTED[20][0])
    assert created[0]["response"]["output_modalities"] == ["text"]
    assert created[1]["item"]["content"] == [{"type": "output_text", "text": ""}]
    assert created[3]["part"] == {"type": "text", "text": ""}
    done = for_message(EXPECTED[22][0])
    assert done[0]["text"] == "Hello" and done[-1]["response"]["output_modalities"] == ["text"]
    assert done[-1]["response"]["output"][0]["content"] == [
        {"type": "output_text", "text": "Hello"}
    ]


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
