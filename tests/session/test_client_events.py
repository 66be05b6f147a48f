"""Client events on a session with engine doubles; every server event is checked
against the openai SDK's own models (openai.types.realtime)."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from tests.session.fakes import EventLog, FakeLLM, FakeSTT, kinds, make_session, noise, silence
from tests.session.test_bargein import wait_for_count
from tests.support.realtime import create_user_text

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)


def assert_sdk_parses(sent: EventLog) -> None:
    for event in sent:
        SERVER_EVENT.validate_python(event)


def errors(sent: EventLog) -> list[str]:
    return [e["error"]["code"] for e in sent if e["type"] == "error"]


async def test_a_text_turn_gets_a_spoken_reply_with_per_response_instructions() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.on_events_open()
    session.on_client_event(create_user_text("Hello there"))
    session.on_client_event({"type": "response.create", "response": {"instructions": "Be kind."}})
    await wait_for_count(sent, "response.done", 1)
    assert sent[sent.at("response.done")[0]]["response"]["status"] == "completed"
    assert engines.llm.prompts[0] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hello there"},
    ]
    assert audio.writes, "the reply was spoken"
    assert [k for k in kinds(sent) if k.startswith(("conversation.item", "response."))][:6] == [
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    assert_sdk_parses(sent)
    await session.close()


async def test_session_update_changes_voice_instructions_and_turn_detection() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.on_client_event(
        {"type": "session.update",
         "session": {"instructions": "Speak like a pirate.",
                     "audio": {"output": {"voice": "test", "speed": 1.2},
                               "input": {"turn_detection": {"type": "server_vad",
                                                            "silence_duration_ms": 710,
                                                            "threshold": 0.9,
                                                            "create_response": False}}}}}
    )  # fmt: skip
    updated = sent[-1]
    assert updated["type"] == "session.updated"
    detection = updated["session"]["audio"]["input"]["turn_detection"]
    assert detection["silence_duration_ms"] == 720, "snapped to 20 ms frames"
    assert detection["threshold"] == 0.75 and detection["create_response"] is False
    assert updated["session"]["audio"]["output"]["speed"] == 1.2
    assert session.history.prompt()[0]["content"] == "Speak like a pirate."
    # create_response false: the turn is transcribed and kept, not answered.
    session.feed_audio(silence(300) + noise(800) + silence(1000))
    await wait_for_count(sent, "conversation.item.done", 1)
    await asyncio.sleep(0.2)
    assert "response.created" not in kinds(sent) and len(session.history) == 1
    # Bad updates change nothing and say why.
    for bad in [{"audio": {"output": {"voice": "nobody"}}},
                {"audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}},
                {"audio": {"input": {"format": {"type": "audio/pcmu"}}}},
                {"instructions": 42}]:  # fmt: skip
        session.on_client_event({"type": "session.update", "session": bad})
    assert errors(sent) == ["invalid_value"] * 4
    params = [e["error"]["param"] for e in sent if e["type"] == "error"]
    assert params[0] == "session.audio.output.voice"
    assert session.options.voice == "test" and session.options.instructions.startswith("Speak")
    assert_sdk_parses(sent)
    await session.close()


async def test_manual_turns_append_commit_clear_and_delete() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.stt, FakeSTT)
    session.on_client_event(
        {"type": "session.update", "session": {"audio": {"input": {"turn_detection": None}}}}
    )
    speech = np.frombuffer(noise(600), dtype=np.int16)
    chunk = base64.b64encode(np.repeat(speech, 3)[::2].tobytes()).decode()  # ~24 kHz
    session.on_client_event({"type": "input_audio_buffer.append", "audio": chunk})
    session.on_client_event({"type": "input_audio_buffer.clear"})
    session.on_client_event({"type": "input_audio_buffer.commit"})  # nothing left
    assert kinds(sent)[-2:] == ["input_audio_buffer.cleared", "error"]
    assert errors(sent) == ["input_audio_buffer_commit_empty"]
    session.on_client_event({"type": "input_audio_buffer.append", "audio": chunk})
    session.on_client_event({"type": "input_audio_buffer.commit"})
    await wait_for_count(sent, "response.done", 1)
    assert "input_audio_buffer.speech_started" not in kinds(sent), "no VAD in manual mode"
    assert 550 < engines.stt.heard[-1] / 32 < 650, "600 ms committed, resampled to 16 kHz"
    user_item = sent[sent.at("input_audio_buffer.committed")[0]]["item_id"]
    session.on_client_event({"type": "conversation.item.delete", "item_id": user_item})
    assert sent[-1] == {"type": "conversation.item.deleted", "event_id": sent[-1]["event_id"],
                        "item_id": user_item}  # fmt: skip
    assert [m.role for m in session.history.messages()] == ["assistant"]
    assert_sdk_parses(sent)
    await session.close()


async def test_bad_client_events_get_clear_errors_and_the_session_goes_on() -> None:
    session, sent, _, _ = make_session()
    bad = [
        {"type": "input_audio_buffer.append", "audio": "not base64!"},
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"abc").decode()},
        {"type": "input_audio_buffer.append"},
        {"type": "conversation.item.create", "item": {"type": "function_call_output"}},
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user"}},
        {"type": "conversation.item.delete", "item_id": "item_missing"},
        {"type": "response.cancel"},
        {"type": "session.delete"},
        {"type": 7},
    ]
    for event in bad:
        session.on_client_event(event)
    assert errors(sent) == [
        "invalid_audio", "invalid_audio", "invalid_value", "invalid_value", "invalid_value",
        "item_not_found", "response_cancel_not_active", "unknown_event", "unknown_event",
    ]  # fmt: skip
    assert all(e["error"]["type"] == "invalid_request_error" for e in sent)
    assert_sdk_parses(sent)
    # Still working: a text turn is answered.
    session.on_client_event(create_user_text("Still there?"))
    session.on_client_event({"type": "response.create"})
    session.on_client_event({"type": "response.create"})  # one at a time
    await wait_for_count(sent, "response.done", 1)
    assert errors(sent)[-1] == "conversation_already_has_active_response"
    await session.close()
