"""The Realtime dialect driving a session (engine doubles, no network): client
events in as JSON text, server events out, each checked against the openai
SDK's own models (openai.types.realtime)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.agent.echo_responder import EchoResponder
from app.agent.responders import Responder
from app.audio import g711
from app.realtime.dialect import RealtimeDialect
from tests.session.fakes import FakeLLM, FakeSTT, FakeTurnModel, make_session, noise, silence
from tests.support.realtime import create_user_text

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)


class Wire(list[dict[str, Any]]):
    """The event channel: what the dialect sent, decoded."""

    max_message_bytes = 64 * 1024

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        self.append(json.loads(text))


class Client:
    """A dialect on a session with engine doubles; sends events as a client would."""

    def __init__(self, responder: Responder | None = None, *, webrtc: bool = True) -> None:
        self.wire = Wire()
        self.dialect = RealtimeDialect(self.wire, model="test-model", webrtc=webrtc)
        self.session, _, self.audio, self.engines = make_session(
            also=self.dialect.deliver, responder=responder, turn_model=FakeTurnModel()
        )
        self.dialect.attach(self.session)

    def send(self, event: dict[str, Any] | str) -> None:
        self.dialect.receive(event if isinstance(event, str) else json.dumps(event))

    def kinds(self) -> list[str]:
        return [event["type"] for event in self.wire]

    def errors(self) -> list[str]:
        return [event["error"]["code"] for event in self.wire if event["type"] == "error"]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.wire if event["type"] == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout_s: float = 6.0) -> None:
        for _ in range(int(timeout_s / 0.02)):
            if self.kinds().count(kind) >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"fewer than {count} {kind}: {self.kinds()}")

    def assert_sdk_parses(self) -> None:
        for event in self.wire:
            SERVER_EVENT.validate_python(event)


async def test_a_text_turn_gets_a_spoken_reply_with_per_response_instructions() -> None:
    client = Client()
    assert isinstance(client.engines.llm, FakeLLM)
    client.dialect.opened()
    created = client.wire[0]
    assert created["type"] == "session.created" and created["session"]["model"] == "test-model"
    client.send(create_user_text("Hello there"))
    client.send({"type": "response.create", "response": {"instructions": "Be kind."}})
    await client.wait_for("response.done")
    assert client.of("response.done")[0]["response"]["status"] == "completed"
    assert client.engines.llm.prompts[0] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hello there"},
    ]
    assert client.audio.writes, "the reply was spoken"
    kinds = client.kinds()
    assert [k for k in kinds if k.startswith(("conversation.item", "response."))][:6] == [
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    deltas = "".join(e["delta"] for e in client.of("response.output_audio_transcript.delta"))
    assert deltas == client.of("response.output_audio_transcript.done")[0]["transcript"]
    client.assert_sdk_parses()
    await client.session.close()


async def test_session_update_changes_voice_instructions_and_turn_detection() -> None:
    client = Client()
    client.send(
        {"type": "session.update",
         "session": {"instructions": "Speak like a pirate.",
                     "audio": {"output": {"voice": "other", "speed": 1.2},
                               "input": {"turn_detection": {"type": "server_vad",
                                                            "silence_duration_ms": 710,
                                                            "threshold": 0.9,
                                                            "create_response": False}}}}}
    )  # fmt: skip
    updated = client.wire[-1]
    assert updated["type"] == "session.updated"
    detection = updated["session"]["audio"]["input"]["turn_detection"]
    assert detection["silence_duration_ms"] == 720, "snapped to 20 ms frames"
    assert detection["threshold"] == 0.75 and detection["create_response"] is False
    assert updated["session"]["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24000}, "voice": "other", "speed": 1.2,
    }  # fmt: skip
    # create_response false: the turn is transcribed and kept, not answered.
    client.session.push_audio(silence(300) + noise(800) + silence(1000))
    await client.wait_for("conversation.item.done")
    await asyncio.sleep(0.2)
    assert "response.created" not in client.kinds() and len(client.session.history) == 1
    # Bad updates change nothing and say why.
    for bad in [{"audio": {"output": {"voice": "nobody"}}},
                {"audio": {"input": {"turn_detection": {"type": "magic_vad"}}}},
                {"audio": {"input": {"format": {"type": "audio/flac"}}}},
                {"instructions": 42},
                {"instructions": "Hush.", "audio": {"output": {"voice": "nobody"}}}]:  # fmt: skip
        client.send({"type": "session.update", "event_id": "evt_bad", "session": bad})
    assert client.errors() == ["invalid_value"] * 5
    refusals = [e["error"] for e in client.of("error")]
    assert refusals[0]["param"] == "session.audio.output.voice"
    assert "available: test, other" in refusals[0]["message"]
    assert {error["event_id"] for error in refusals} == {"evt_bad"}
    options = client.session.options
    assert (options.voice, options.instructions) == ("other", "Speak like a pirate.")
    client.assert_sdk_parses()
    await client.session.close()


async def test_manual_turns_append_commit_clear_and_delete() -> None:
    client = Client()
    assert isinstance(client.engines.stt, FakeSTT)
    client.send(
        {"type": "session.update", "session": {"audio": {"input": {"turn_detection": None}}}}
    )
    speech = np.frombuffer(noise(600), dtype=np.int16)
    chunk = base64.b64encode(np.repeat(speech, 3)[::2].tobytes()).decode()  # ~24 kHz
    client.send({"type": "input_audio_buffer.append", "audio": chunk})
    client.send({"type": "input_audio_buffer.clear"})
    client.send({"type": "input_audio_buffer.commit"})  # nothing left
    assert client.kinds()[-2:] == ["input_audio_buffer.cleared", "error"]
    assert client.errors() == ["input_audio_buffer_commit_empty"]
    client.send({"type": "input_audio_buffer.append", "audio": chunk})
    client.send({"type": "input_audio_buffer.commit"})
    await client.wait_for("response.done")
    assert "input_audio_buffer.speech_started" not in client.kinds(), "no VAD in manual mode"
    assert 550 < client.engines.stt.heard[-1] / 32 < 650, "600 ms committed, resampled to 16 kHz"
    user_item = client.of("input_audio_buffer.committed")[0]["item_id"]
    client.send({"type": "conversation.item.delete", "item_id": user_item})
    deleted = client.wire[-1]
    assert deleted == {"type": "conversation.item.deleted", "event_id": deleted["event_id"],
                       "item_id": user_item}  # fmt: skip
    assert [m.role for m in client.session.history.messages()] == ["assistant"]
    client.assert_sdk_parses()
    await client.session.close()


async def test_bad_client_events_get_clear_errors_and_the_session_goes_on() -> None:
    client = Client()
    bad: list[dict[str, Any] | str] = [
        {"type": "input_audio_buffer.append", "audio": "not base64!"},
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"abc").decode()},
        {"type": "input_audio_buffer.append"},
        {"type": "conversation.item.create", "item": {"type": "function_call_output"}},
        {"type": "conversation.item.create", "item": {"type": "message", "role": "user"}},
        {"type": "conversation.item.delete", "item_id": "item_missing"},
        {"type": "response.cancel"},
        {"type": "output_audio_buffer.clear"},
        {"type": "conversation.item.truncate", "item_id": "item_nope", "audio_end_ms": 10},
        {"type": "session.delete"},
        {"type": 7},
        "{oops",
        "x" * (Wire.max_message_bytes + 1),
    ]
    for event in bad:
        client.send(event)
    assert client.errors() == [
        "invalid_audio", "invalid_audio", "invalid_value", "invalid_value", "invalid_value",
        "item_not_found", "response_cancel_not_active", "output_audio_buffer_empty",
        "item_not_found", "unknown_event", "invalid_event", "invalid_json", "invalid_message",
    ]  # fmt: skip
    assert all(e["error"]["type"] == "invalid_request_error" for e in client.wire)
    assert [e["error"]["param"] for e in client.wire[:3]] == ["audio", "audio", "audio"]
    client.assert_sdk_parses()
    # Still working: a text turn is answered, one response at a time.
    client.send(create_user_text("Still there?"))
    client.send({"type": "conversation.item.create", "item": {
        "id": client.of("conversation.item.added")[0]["item"]["id"], "type": "message",
        "role": "user", "content": [{"type": "input_text", "text": "Again"}]}})  # fmt: skip
    assert client.errors()[-1] == "invalid_value", "an item id is used once"
    client.send({"type": "response.create"})
    client.send({"type": "response.create"})
    await client.wait_for("response.done")
    assert client.errors()[-1] == "conversation_already_has_active_response"
    await client.session.close()


async def test_truncating_and_cancelling_the_reply_being_heard() -> None:
    client = Client()
    client.send(create_user_text("Tell me."))
    client.send({"type": "response.create"})
    await client.wait_for("output_audio_buffer.started")
    reply = client.of("response.created")[0]["response"]["id"]
    item = client.of("response.output_item.added")[0]["item"]["id"]
    client.send({"type": "conversation.item.delete", "item_id": item})
    assert client.errors() == ["invalid_value"], "an item being spoken cannot be deleted"
    client.send({"type": "response.cancel", "response_id": "resp_other"})
    assert client.errors()[-1] == "response_cancel_not_active"
    client.send({"type": "conversation.item.truncate", "item_id": item, "audio_end_ms": 0})
    done = client.of("response.done")[0]["response"]
    assert (done["id"], done["status"]) == (reply, "cancelled")
    assert done["status_details"]["reason"] == "client_cancelled"
    assert client.of("conversation.item.truncated")[0]["audio_end_ms"] == 0
    client.assert_sdk_parses()
    await client.session.close()


async def test_over_a_websocket_the_audio_is_in_the_events_not_on_a_track() -> None:
    client = Client(webrtc=False)
    client.send(create_user_text("Hello there"))
    client.send({"type": "response.create"})
    await client.wait_for("response.done")
    assert not [kind for kind in client.kinds() if kind.startswith("output_audio_buffer.")]
    # What the socket plays is labelled with the reply it belongs to.
    delta = json.loads(client.dialect.audio_delta(b"\x00\x01"))
    created = client.of("response.created")[0]["response"]["id"]
    assert (delta["type"], delta["response_id"], delta["delta"]) == (
        "response.output_audio.delta", created, base64.b64encode(b"\x00\x01").decode(),
    )  # fmt: skip
    SERVER_EVENT.validate_python(delta)
    await client.session.close()


async def test_echo_cannot_answer_text_and_says_so() -> None:
    client = Client(EchoResponder())
    client.send({"type": "response.create"})
    assert client.errors() == ["unsupported_in_echo_mode"]
    # Any voice goes: the echo has none of its own.
    client.send({"type": "session.update", "session": {"audio": {"output": {"voice": "x"}}}})
    assert client.kinds()[-1] == "session.updated"
    await client.session.close()


# What @openai/agents-realtime 0.20 sends by default, plus the optional fields.
SDK_SESSION = {
    "type": "realtime",
    "instructions": "You are a helpful assistant.",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "noise_reduction": None,
            "transcription": {"model": "gpt-4o-mini-transcribe"},
            "turn_detection": {"type": "semantic_vad"},
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "speed": 1},
    },
    "tool_choice": "auto",
    "tools": [],
    "tracing": "auto",
    "prompt": {"id": "pmpt_1", "version": "1"},
    "parallel_tool_calls": False,
    "truncation": "auto",
    "include": [],
    "max_output_tokens": "inf",
}


async def test_every_field_an_sdk_sends_is_accepted_and_unknown_ones_are_named() -> None:
    client = Client()
    client.send({"type": "session.update", "session": SDK_SESSION})
    assert client.errors() == [] and client.kinds() == ["session.updated"]
    described = client.wire[-1]["session"]
    assert (described["max_output_tokens"], described["truncation"]) == ("inf", "auto")
    detection = described["audio"]["input"]["turn_detection"]
    assert detection == {"type": "semantic_vad", "eagerness": "auto", "create_response": True,
                         "interrupt_response": True}  # fmt: skip
    assert client.session.options.vad is not None
    assert client.session.options.vad.silence_ms == 4000, "auto waits at most 4 s"
    for typo in ({"instruction": "x"}, {"audio": {"output": {"volume": 3}}}):
        client.send({"type": "session.update", "session": typo})
    refused = [e["error"] for e in client.of("error")]
    assert [error["param"] for error in refused] == [
        "session.instruction",
        "session.audio.output.volume",
    ]
    assert all("Extra inputs are not permitted" in error["message"] for error in refused)
    client.assert_sdk_parses()
    await client.session.close()


async def test_token_limit_text_replies_and_word_scores() -> None:
    client = Client()
    assert isinstance(client.engines.llm, FakeLLM)
    client.send({"type": "session.update", "session": {
        "max_output_tokens": 42, "output_modalities": ["text"],
        "include": ["item.input_audio_transcription.logprobs"]}})  # fmt: skip
    assert client.wire[-1]["session"]["output_modalities"] == ["text"]
    client.session.push_audio(silence(300) + noise(800) + silence(700))
    await client.wait_for("response.done")
    assert client.engines.llm.max_tokens == [42]
    heard = client.of("conversation.item.input_audio_transcription.completed")[0]
    assert [p["token"] for p in heard["logprobs"]] == heard["transcript"].split()
    deltas = [e["delta"] for e in client.of("response.output_text.delta")]
    done = client.of("response.done")[0]["response"]
    assert done["output_modalities"] == ["text"] and done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == "".join(deltas).strip()
    assert "".join(deltas).strip() == "Sure, here is the answer you asked for."
    assert client.audio.writes == [], "a written reply makes no sound"
    assert not [
        k for k in client.kinds() if k.startswith(("response.output_audio", "output_audio"))
    ]
    # And back to speech, with the server's own token limit.
    client.send({"type": "session.update", "session": {
        "max_output_tokens": "inf", "output_modalities": ["audio"]}})  # fmt: skip
    client.send(create_user_text("Again?"))
    client.send({"type": "response.create"})
    await client.wait_for("response.done", count=2)
    assert client.engines.llm.max_tokens[-1] is None and client.audio.writes
    client.assert_sdk_parses()
    await client.session.close()


async def test_truncation_disabled_fails_a_reply_the_prompt_cannot_hold() -> None:
    client = Client()
    client.send({"type": "session.update", "session": {"truncation": "disabled"}})
    for n in range(21):  # the default llm.max_history_messages is 20
        client.send(create_user_text(f"note {n}"))
    client.send({"type": "response.create"})
    await client.wait_for("response.done")
    assert client.of("response.done")[0]["response"]["status"] == "failed"
    assert client.errors() == ["conversation_too_long"]
    # Dropping an item makes it fit again.
    first = client.of("conversation.item.added")[0]["item"]["id"]
    client.send({"type": "conversation.item.delete", "item_id": first})
    client.send({"type": "response.create"})
    await client.wait_for("response.done", count=2)
    assert client.of("response.done")[1]["response"]["status"] == "completed"
    await client.session.close()


async def test_an_idle_timeout_after_a_reply_makes_the_agent_speak_up() -> None:
    client = Client()
    assert isinstance(client.engines.llm, FakeLLM)
    client.send({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad", "idle_timeout_ms": 1000}}}}})  # fmt: skip
    assert client.wire[-1]["session"]["audio"]["input"]["turn_detection"]["idle_timeout_ms"] == 1000
    client.session.push_audio(silence(300) + noise(800) + silence(700))
    await client.wait_for("response.done")
    await client.wait_for("input_audio_buffer.timeout_triggered", timeout_s=3)
    await client.wait_for("response.done", count=2)
    kinds = client.kinds()
    at = kinds.index("input_audio_buffer.timeout_triggered")
    assert kinds[at : at + 5] == [
        "input_audio_buffer.timeout_triggered", "input_audio_buffer.committed",
        "conversation.item.added", "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
    ]  # fmt: skip
    assert client.engines.llm.prompts[-1][-1]["role"] == "system", "the agent was nudged"
    # Speech in time keeps it quiet; and it can be switched off.
    client.send({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "server_vad", "idle_timeout_ms": None}}}}})  # fmt: skip
    await asyncio.sleep(1.5)
    assert client.kinds().count("input_audio_buffer.timeout_triggered") == 1
    client.assert_sdk_parses()
    await client.session.close()


async def test_items_are_retrieved_as_stored_with_the_users_speech() -> None:
    client = Client()
    client.session.push_audio(silence(300) + noise(800) + silence(700))
    await client.wait_for("response.done")
    user = client.of("input_audio_buffer.committed")[0]["item_id"]
    reply = client.of("response.done")[0]["response"]["output"][0]["id"]
    client.send({"type": "conversation.item.retrieve", "item_id": user, "event_id": "evt_r"})
    retrieved = client.wire[-1]
    assert retrieved["type"] == "conversation.item.retrieved"
    part = retrieved["item"]["content"][0]
    assert part["type"] == "input_audio" and part["transcript"].startswith("question of")
    seconds = len(base64.b64decode(part["audio"])) / 2 / 24_000
    heard_s = client.engines.stt.heard[0] / 32_000  # type: ignore[attr-defined]
    assert abs(seconds - heard_s) < 0.05, "the utterance, as pcm16 at 24 kHz"
    client.send({"type": "conversation.item.retrieve", "item_id": reply})
    assert client.wire[-1]["item"]["content"][0]["transcript"].startswith("Sure")
    client.send({"type": "conversation.item.retrieve", "item_id": "item_nope"})
    assert client.errors() == ["item_not_found"]
    client.assert_sdk_parses()
    await client.session.close()


async def test_g711_in_and_out_on_a_socket() -> None:
    client = Client(webrtc=False)
    client.send({"type": "session.update", "session": {"audio": {
        "input": {"format": {"type": "audio/pcmu"}, "turn_detection": None},
        "output": {"format": {"type": "audio/pcma"}}}}})  # fmt: skip
    described = client.wire[-1]["session"]["audio"]
    assert described["input"]["format"] == {"type": "audio/pcmu"}
    assert described["output"]["format"] == {"type": "audio/pcma"}
    speech = np.frombuffer(noise(600), dtype=np.int16)[::2]  # 8 kHz
    mulaw = base64.b64encode(g711.encode(speech.tobytes(), "ulaw")).decode()
    client.send({"type": "input_audio_buffer.append", "audio": mulaw})
    client.send({"type": "input_audio_buffer.commit"})
    await client.wait_for("response.done")
    heard_ms = client.engines.stt.heard[0] / 32  # type: ignore[attr-defined]
    assert 590 < heard_ms < 610, "600 ms of mu-law, as 16 kHz PCM"
    # Reply audio goes out as A-law at 8 kHz: a third of the samples, a byte each.
    delta = json.loads(client.dialect.audio_delta(bytes(4800)))
    assert abs(len(base64.b64decode(delta["delta"])) - 800) <= 16
    client.assert_sdk_parses()
    await client.session.close()


async def test_an_append_is_bounded_in_seconds_and_fed_in_steps_that_yield() -> None:
    client = Client(webrtc=False)
    client.wire.max_message_bytes = 4 * 1024 * 1024  # a WebSocket's
    manual = {"type": "session.update", "session": {"audio": {"input": {"turn_detection": None}}}}
    client.send(manual)
    pcm = base64.b64encode(bytes(2 * 24_000 * 61)).decode()  # 61 s of 24 kHz pcm16
    client.send({"type": "input_audio_buffer.append", "audio": pcm})
    error = client.of("error")[-1]["error"]
    assert (error["code"], error["param"]) == ("invalid_audio", "audio")
    assert "61.0 s" in error["message"] and "limits.append_audio_s" in error["message"]
    assert client.session.usage.audio_in_samples == 0, "none of it was taken"
    # μ-law is counted by its own rate: 61 s of it is 488 KB, and refused too.
    client.send({"type": "session.update", "session": {"audio": {"input": {
        "format": {"type": "audio/pcmu"}}}}})  # fmt: skip
    ulaw = base64.b64encode(bytes(8_000 * 61)).decode()
    client.send({"type": "input_audio_buffer.append", "audio": ulaw})
    assert client.errors()[-1] == "invalid_audio"
    # What fits is taken a second at a time, the loop let in between the steps.
    ulaw = base64.b64encode(g711.encode(noise(10_000), "ulaw")[: 8_000 * 10]).decode()
    event = json.dumps({"type": "input_audio_buffer.append", "audio": ulaw})
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(ticking())
    await asyncio.sleep(0)
    await client.dialect.receive_in_steps(event)
    ticker.cancel()
    assert ticks >= 9, f"the loop ran {ticks} times during 10 steps"
    assert 9.9 < client.session.usage.audio_in_samples / 16_000 < 10.1
    await client.session.close()


async def test_clearing_the_buffer_or_updating_the_session_is_no_activity() -> None:
    """A client doing only that every few seconds held its slot for ever."""
    client = Client(webrtc=False)
    client.session.last_active_at = 0.0
    client.send({"type": "input_audio_buffer.clear"})
    client.send({"type": "session.update", "session": {"instructions": "Hi"}})
    client.send({"type": "conversation.item.retrieve", "item_id": "nope"})
    client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(
        bytes(4800)).decode()})  # fmt: skip
    assert client.session.last_active_at == 0.0
    client.send(create_user_text("Hello"))
    assert client.session.last_active_at > 0.0, "a message the client adds is activity"
    await client.session.close()


async def test_items_and_the_conversation_have_bounds_in_characters() -> None:
    client = Client()
    client.wire.max_message_bytes = 4 * 1024 * 1024  # a WebSocket's
    limits = client.session._settings.limits  # noqa: SLF001 - the defaults it was made with
    client.send(create_user_text("x" * (limits.item_chars + 1)))
    error = client.of("error")[-1]["error"]
    assert (error["code"], error["param"]) == ("invalid_value", "item.content")
    assert "limits.item_chars" in error["message"]
    for _ in range(limits.history_chars // limits.item_chars):
        client.send(create_user_text("y" * limits.item_chars))
    assert client.errors() == ["invalid_value"], "up to the conversation's bound, taken"
    client.send(create_user_text("one more"))
    assert client.errors()[-1] == "conversation_full"
    # Deleting makes room again.
    first = client.session.history.messages()[0].item_id
    client.send({"type": "conversation.item.delete", "item_id": first})
    client.send(create_user_text("one more"))
    assert client.errors()[-1] == "conversation_full" and client.kinds()[-1] != "error"
    client.assert_sdk_parses()
    await client.session.close()


async def test_noise_reduction_is_set_per_session_and_described_back() -> None:
    client = Client()
    assert client.session.options.noise_reduction == "off", "the server's default"
    for asked, expected in [({"type": "far_field"}, "far_field"), (None, "off"),
                            ({"type": "near_field"}, "near_field")]:  # fmt: skip
        client.send({"type": "session.update",
                     "session": {"audio": {"input": {"noise_reduction": asked}}}})  # fmt: skip
        assert client.session.options.noise_reduction == expected
        described = client.wire[-1]["session"]["audio"]["input"]["noise_reduction"]
        assert described == asked
    # Leaving the field out leaves it as it is; a kind OpenAI does not have is refused.
    client.send({"type": "session.update", "session": {"instructions": "Be brief."}})
    assert client.session.options.noise_reduction == "near_field"
    loud = {"audio": {"input": {"noise_reduction": {"type": "loud"}}}}
    client.send({"type": "session.update", "session": loud})
    assert client.of("error")[-1]["error"]["param"] == "session.audio.input.noise_reduction.type"
    assert client.session.options.noise_reduction == "near_field"
    client.assert_sdk_parses()
    await client.session.close()


async def test_the_transcription_language_is_set_per_session_and_described_back() -> None:
    client = Client()
    assert client.session.options.language == "en", "the server's stt.language"
    for asked, expected, described in [("es", "es", "es"), ("auto", "auto", None)]:
        client.send(_transcription_update({"model": "whisper-1", "language": asked}))
        assert client.session.options.language == expected
        assert client.wire[-1]["session"]["audio"]["input"]["transcription"] == {
            "model": "whisper",
            "language": described,
        }
    # A code Whisper does not know, or a language this server's Whisper cannot hear.
    for bad, why in [("klingon", "unknown language 'klingon'"), ("fr", "hears only")]:
        client.send(_transcription_update({"language": bad}))
        error = client.of("error")[-1]["error"]
        assert error["param"] == "session.audio.input.transcription.language", error
        assert why in error["message"], error
        assert client.session.options.language == "auto"
    client.assert_sdk_parses()
    await client.session.close()


def _transcription_update(transcription: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "session.update",
        "session": {"audio": {"input": {"transcription": transcription}}},
    }
