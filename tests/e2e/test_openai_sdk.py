"""The official openai SDK as the client: calls.create / hangup over HTTP, WebRTC media,
and every event it receives parsed by the SDK's own models."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.support.realtime import create_user_text, user_text
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, word_error_rate

pytestmark = pytest.mark.e2e

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)


async def test_sdk_call_with_a_text_turn_and_a_spoken_turn_then_hangup(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    peer = AgentClient(agent_server.url)
    try:
        raw = await sdk.realtime.calls.with_raw_response.create(
            sdp=await peer.offer(),
            session={"type": "realtime", "instructions": "Answer in one short sentence."},
        )
        assert raw.status_code == 201
        location = raw.headers["location"]
        call_id = location.rsplit("/", 1)[-1]
        assert location == f"/v1/realtime/calls/{call_id}"
        answer = raw.parse().text
        assert answer.startswith("v=0")
        await peer.accept({"session_id": call_id, "sdp": answer})
        created = await peer.wait_for("session.created", timeout_s=20)
        assert created["session"]["instructions"] == "Answer in one short sentence."

        # The smoke test every SDK user runs first: text in, speech out.
        peer.send(create_user_text("Say hello."))
        peer.send({"type": "response.create"})
        done = await peer.wait_for("response.done", timeout_s=120)
        assert done["response"]["status"] == "completed"
        spoken = peer.recording.audio(since=peer.event_time("response.created"))
        assert rms_db(spoken) > -50, "the text turn was answered aloud"

        # And a spoken turn.
        peer.mic.say(load_wav(str(speech(QUESTION))))
        done = await peer.wait_for("response.done", count=2, timeout_s=120)
        assert done["response"]["status"] == "completed"
        heard = peer.of_type("conversation.item.input_audio_transcription.completed")
        assert heard and word_error_rate(QUESTION, heard[-1]["transcript"]) <= 0.25

        for _, event in peer.events:
            SERVER_EVENT.validate_python(event)

        await sdk.realtime.calls.hangup(call_id)
        async with httpx.AsyncClient(timeout=5) as http:
            pool = (await http.get(f"{agent_server.url}/v1/pool")).json()
        assert pool["in_use"] == 0, "hanging up freed the slot"
        with pytest.raises(Exception, match="404"):
            await sdk.realtime.calls.hangup(call_id)
    finally:
        await peer.close()
        await sdk.close()


async def test_calls_take_raw_sdp_and_refuse_bad_input(agent_server: ServerProcess) -> None:
    peer = AgentClient(agent_server.url)
    try:
        async with httpx.AsyncClient(base_url=agent_server.url, timeout=20) as http:
            response = await http.post(
                "/v1/realtime/calls",
                content=await peer.offer(),
                headers={"Content-Type": "application/sdp", "Authorization": "Bearer x"},
            )
            assert response.status_code == 201
            assert response.headers["content-type"].startswith("application/sdp")
            call_id = response.headers["location"].rsplit("/", 1)[-1]
            assert (await http.delete(f"/v1/realtime/calls/{call_id}")).status_code == 200

            bad = [
                ({"Content-Type": "text/plain"}, b"v=0"),
                ({"Content-Type": "application/sdp"}, b"hello"),
            ]
            for headers, body in bad:
                response = await http.post("/v1/realtime/calls", content=body, headers=headers)
                assert response.status_code == 400, response.text
                assert response.json()["error"]["type"] == "invalid_request_error"
            response = await http.post(
                "/v1/realtime/calls",
                files={"sdp": (None, await peer.offer()), "session": (None, '{"audio": 5}')},
            )
            assert response.status_code == 400 and "session" in response.json()["error"]["message"]
    finally:
        await peer.close()


async def test_sideband_control_of_a_webrtc_call(agent_server: ServerProcess) -> None:
    """A server-side controller joins a call by its id: it hears the call's events and
    steers it (session.update, response.create, response.cancel) while the peer listens."""
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    peer = AgentClient(agent_server.url)
    try:
        raw = await sdk.realtime.calls.with_raw_response.create(sdp=await peer.offer())
        call_id = raw.headers["location"].rsplit("/", 1)[-1]
        await peer.accept({"session_id": call_id, "sdp": raw.parse().text})
        await peer.wait_for("session.created", timeout_s=20)
        async with sdk.realtime.connect(call_id=call_id) as controller:
            first = await controller.recv()
            assert first.type == "session.created" and first.session.id == call_id  # type: ignore[union-attr]
            await controller.session.update(
                session={"type": "realtime", "instructions": "Answer in three words."}
            )
            while (event := await controller.recv()).type != "session.updated":
                pass
            updated = await peer.wait_for("session.updated", timeout_s=10)
            assert updated["session"]["instructions"] == "Answer in three words."
            # The controller asks; the peer hears the answer on its track.
            await controller.conversation.item.create(item=user_text("Say hello."))
            await controller.response.create()
            seen = []
            while (event := await controller.recv()).type != "response.done":
                seen.append(event.type)
            assert "response.output_audio_transcript.delta" in seen
            assert event.response.status == "completed"  # type: ignore[union-attr]
            done = await peer.wait_for("response.done", timeout_s=30)
            assert done["response"]["id"] == event.response.id  # type: ignore[union-attr]
            spoken = peer.recording.audio(since=peer.event_time("response.created"))
            assert rms_db(spoken) > -50, "the peer heard the answer the controller asked for"
            # A refusal goes to the one who sent it.
            await controller.response.cancel()
            refused = await controller.recv()
            assert refused.type == "error" and refused.error.code == "response_cancel_not_active"  # type: ignore[union-attr]
            await asyncio.sleep(0.2)
            assert not peer.of_type("error")
        async with sdk.realtime.connect(call_id="sess_unknown") as stranger:
            refused = await stranger.recv()
            assert refused.type == "error" and refused.error.code == "call_not_found"  # type: ignore[union-attr]
    finally:
        await peer.close()
        await sdk.close()
