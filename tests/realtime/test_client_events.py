"""Every Realtime client event parses into its command, or is refused with the
code, param and message a client can act on. No session, no network."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from openai.types.realtime import RealtimeClientEvent
from pydantic import TypeAdapter

from app.realtime import client_events as cmd
from app.realtime.session_config import SessionConfig, response_changes, to_changes
from app.session.options import TurnDetectionChange
from app.session.refusals import OptionError

CLIENT_EVENT: TypeAdapter[RealtimeClientEvent] = TypeAdapter(RealtimeClientEvent)
AUDIO = base64.b64encode(bytes(4800)).decode()

# One event of each type the server takes, as the official SDK would send it.
EXAMPLES: list[tuple[dict[str, Any], type]] = [
    (
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "instructions": "Be brief.",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "turn_detection": {
                            "type": "server_vad",
                            "threshold": 0.9,
                            "silence_duration_ms": 700,
                        },
                    },
                    "output": {"voice": "test", "speed": 1.5},
                },
                "tools": [],
                "tracing": "auto",
            },
        },
        cmd.SessionUpdate,
    ),  # fmt: skip
    ({"type": "input_audio_buffer.append", "audio": AUDIO}, cmd.InputAudioAppend),
    ({"type": "input_audio_buffer.commit"}, cmd.InputAudioCommit),
    ({"type": "input_audio_buffer.clear"}, cmd.InputAudioClear),
    (
        {
            "type": "conversation.item.create",
            "previous_item_id": None,
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi"}],
            },
        },
        cmd.ItemCreate,
    ),  # fmt: skip
    ({"type": "conversation.item.retrieve", "item_id": "item_1"}, cmd.ItemRetrieve),
    ({"type": "conversation.item.delete", "item_id": "item_1"}, cmd.ItemDelete),
    (
        {
            "type": "conversation.item.truncate",
            "item_id": "item_1",
            "content_index": 0,
            "audio_end_ms": 250,
        },
        cmd.ItemTruncate,
    ),  # fmt: skip
    ({"type": "response.create", "response": {"instructions": "Shout."}}, cmd.ResponseCreate),
    ({"type": "response.create"}, cmd.ResponseCreate),
    ({"type": "response.cancel", "response_id": "resp_1"}, cmd.ResponseCancel),
    ({"type": "output_audio_buffer.clear"}, cmd.OutputAudioClear),
]


@pytest.mark.parametrize(("event", "command"), EXAMPLES)
def test_every_event_type_parses_into_its_command(event: dict[str, Any], command: type) -> None:
    CLIENT_EVENT.validate_python(event)  # the example is one the SDK itself would send
    parsed = cmd.parse({**event, "event_id": "evt_1"})
    assert type(parsed) is command and parsed.event_id == "evt_1"


def test_a_session_update_becomes_option_changes() -> None:
    parsed = cmd.parse(EXAMPLES[0][0])
    assert isinstance(parsed, cmd.SessionUpdate)
    changes = to_changes(parsed.session)
    assert (changes.instructions, changes.voice, changes.speed) == ("Be brief.", "test", 1.5)
    assert changes.turn_detection == TurnDetectionChange(
        semantic=False, silence_ms=700, aggressiveness=3
    )
    semantic = to_changes(SessionConfig.model_validate(
        {"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "low"}}}}
    ))  # fmt: skip
    assert semantic.turn_detection == TurnDetectionChange(semantic=True, eagerness="low")
    assert not changes.manual_turns and changes.transcription is None
    manual = to_changes(SessionConfig.model_validate(
        {"audio": {"input": {"turn_detection": None, "transcription": None}}}
    ))  # fmt: skip
    assert manual.manual_turns and manual.turn_detection is None
    assert manual.transcription is False
    untouched = to_changes(SessionConfig.model_validate({"instructions": "x"}))
    assert not untouched.manual_turns and untouched.turn_detection is None


REFUSED: list[tuple[dict[str, Any], str, str | None]] = [
    ({"type": "session.delete"}, "unknown_event", None),
    ({"type": 7}, "unknown_event", None),
    ({"no": "type"}, "unknown_event", None),
    (
        {"type": "session.update", "session": {"instructions": 42}},
        "invalid_value",
        "session.instructions",
    ),  # fmt: skip
    (
        {
            "type": "session.update",
            "session": {"audio": {"input": {"turn_detection": {"type": "magic_vad"}}}},
        },
        "invalid_value",
        "session.audio.input.turn_detection",
    ),  # fmt: skip
    (
        {
            "type": "session.update",
            "session": {"audio": {"input": {"format": {"type": "audio/flac"}}}},
        },
        "invalid_value",
        "session.audio.input.format",
    ),  # fmt: skip
    (
        {"type": "session.update", "session": {"audio": {"output": {"speed": 3}}}},
        "invalid_value",
        "session.audio.output.speed",
    ),  # fmt: skip
    (
        {
            "type": "session.update",
            "session": {"audio": {"input": {"turn_detection": {"threshold": 2}}}},
        },
        "invalid_value",
        "session.audio.input.turn_detection.threshold",
    ),  # fmt: skip
    ({"type": "input_audio_buffer.append"}, "invalid_value", "audio"),
    (
        {"type": "conversation.item.create", "item": {"type": "function_call"}},
        "invalid_value",
        "item",
    ),
    (
        {"type": "conversation.item.create", "item": {"type": "function_call_output"}},
        "invalid_value",
        "item.call_id",
    ),  # fmt: skip
    (
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user"}},
        "invalid_value",
        "item.content",
    ),  # fmt: skip
    (
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "robot", "content": [{"text": "hi"}]},
        },
        "invalid_value",
        "item.role",
    ),  # fmt: skip
    ({"type": "conversation.item.delete"}, "invalid_value", "item_id"),
    (
        {"type": "conversation.item.truncate", "item_id": "item_1", "audio_end_ms": "soon"},
        "invalid_value",
        "audio_end_ms",
    ),  # fmt: skip
    (
        {"type": "conversation.item.truncate", "item_id": "item_1", "audio_end_ms": -5},
        "invalid_value",
        "audio_end_ms",
    ),  # fmt: skip
    (
        {"type": "response.create", "response": {"instructions": ["no"]}},
        "invalid_value",
        "response.instructions",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("event", "code", "param"), REFUSED)
def test_bad_events_are_refused_with_code_and_param(
    event: dict[str, Any], code: str, param: str | None
) -> None:
    with pytest.raises(cmd.BadEvent) as refused:
        cmd.parse(event)
    assert (refused.value.code, refused.value.param) == (code, param)
    message = str(refused.value)
    assert message and (param is None or message.startswith(param)), message
    if code == "unknown_event":
        assert repr(event.get("type")) in message


def test_refusals_say_what_is_supported() -> None:
    with pytest.raises(cmd.BadEvent, match="type must be server_vad or semantic_vad"):
        cmd.parse(REFUSED[4][0])
    with pytest.raises(cmd.BadEvent, match="audio formats are audio/pcm .* audio/pcma"):
        cmd.parse(REFUSED[5][0])
    supported = "items are of type message, function_call_output or mcp_approval_response"
    with pytest.raises(cmd.BadEvent, match=supported):
        cmd.parse(REFUSED[9][0])
    assert cmd.event_id_of({"event_id": "evt_9"}) == "evt_9"
    assert cmd.event_id_of({"event_id": 9}) is None


def test_a_response_create_with_tools_becomes_changes_for_it_alone() -> None:
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    orders = {"type": "mcp", "server_label": "orders", "server_url": "https://x.example/mcp"}
    command = cmd.parse({"type": "response.create", "response": {"tools": [weather, orders]}})
    assert isinstance(command, cmd.ResponseCreate) and command.response is not None
    changes = response_changes(command.response.tools, command.response.tool_choice)
    assert changes is not None
    assert [t["function"]["name"] for t in changes.tools or ()] == ["get_weather"]
    assert [s.label for s in changes.servers or ()] == ["orders"]
    assert changes.tool_choice == "auto", "not the session's, which may force another"
    assert response_changes(None, None) is None, "nothing of its own: the session's"
    with pytest.raises(OptionError) as refused:
        response_changes(cmd.parse({"type": "response.create", "response": {
            "tools": [orders, orders]}}).response.tools, None)  # type: ignore[union-attr]  # fmt: skip
    assert refused.value.option == "response.tools"
