"""A spoken conversation with the real default engines, over a real WebRTC connection."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.agent.timings import STAGES
from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.support.metrics import scrape, stage_counts
from tests.support.otlp import OtlpCollector
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, transcribe, word_error_rate, words

pytestmark = pytest.mark.e2e


async def test_a_spoken_question_gets_a_spoken_answer(
    agent_server: ServerProcess,
    speech: Callable[[str], Path],
    whisper,
    otlp_collector: OtlpCollector,
) -> None:  # type: ignore[no-untyped-def]
    metrics_before = await scrape(agent_server.url)
    client = AgentClient(agent_server.url)
    await client.connect()
    try:
        client.mic.say(load_wav(str(speech(QUESTION))))
        done = await client.wait_for("response.done", timeout_s=120)
        assert client.mic.speech_ended_at is not None
        await client.wait_quiet(since=client.mic.speech_ended_at, timeout_s=60)
    finally:
        await client.close()

    heard = client.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert word_error_rate(QUESTION, heard["transcript"]) <= 0.25, heard["transcript"]

    response = done["response"]
    assert response["status"] == "completed"
    timings = response["timings_ms"]
    assert list(timings) == list(STAGES), timings
    assert all(value >= 0 for value in timings.values())
    # From the end of the speech: the turn ends after the silence window, which the
    # stages begun speculatively within it need not wait for; they happen in order.
    assert timings["turn_end"] >= 500
    stages = [value for stage, value in timings.items() if stage != "turn_end"]
    assert stages == sorted(stages), "stages happen in order"

    said = client.of_type("response.output_audio_transcript.done")[0]["transcript"]
    deltas = "".join(
        event["delta"] for event in client.of_type("response.output_audio_transcript.delta")
    )
    assert said and deltas == said

    reply = client.recording.audio(since=client.mic.speech_ended_at)
    assert rms_db(reply) > -50, "reply audio is not silent"
    reply_text = transcribe(whisper, reply)
    assert words(reply_text), "Whisper hears words in the reply audio"

    # /metrics saw this turn in every stage's histogram, and each engine at work.
    metrics = await scrape(agent_server.url)
    stages, stages_before = stage_counts(metrics), stage_counts(metrics_before)
    assert all(stages[stage] >= stages_before.get(stage, 0) + 1 for stage in STAGES), stages
    for histogram in ("end_of_turn", "voice_to_voice"):
        count = (f"voice_agent_{histogram}_seconds_count", ())
        assert metrics[count] >= metrics_before[count] + 1, histogram
    for engine in ("stt", "llm", "tts"):
        busy = ("voice_agent_engine_busy_seconds_total", (("engine", engine),))
        assert metrics[busy] > metrics_before.get(busy, 0.0), engine

    # /v1/usage itemizes the call: what it heard, said, and cost the LLM.
    async with httpx.AsyncClient(timeout=10) as http:
        usage = (await http.get(f"{agent_server.url}/v1/usage")).json()
    (mine,) = [s for s in usage["sessions"] if s["session_id"] == client.session_id]
    assert (mine["transport"], mine["turns"], mine["replies"]) == ("webrtc", 1, 1), mine
    assert mine["audio_in_s"] > 2 and mine["audio_out_s"] > 0.5, mine
    assert mine["llm_tokens_in"] > 10 and mine["llm_tokens_out"] > 0, mine
    assert usage["total"]["turns"] >= 1

    # The collector got the turn's trace: a turn span, and a child per stage in order,
    # whose ends fall where response.done's timings put them, from the end of the speech.
    turn, *children = await otlp_collector.trace_of(response["id"])
    assert turn.attributes["voice_agent.session_id"] == client.session_id
    assert turn.resource["service.name"] == "voice-agent"
    assert [span.name for span in children] == [
        "end_of_turn", "stt", "llm.first_token", "llm.first_clause", "tts.first_audio",
        "send.first_frame", "playout",
    ]  # fmt: skip
    speech_end = children[0].start_s
    for span in children:
        stage = span.attributes.get("voice_agent.stage", "turn_end")
        if span.name != "playout":
            after_ms = (span.end_s - speech_end) * 1000
            assert after_ms == pytest.approx(timings[stage], abs=2), stage
    assert turn.start_s <= min(s.start_s for s in children)
    assert max(s.end_s for s in children) <= turn.end_s


async def test_an_llm_that_is_down_gets_an_error_event_and_the_session_goes_on(
    start_server, speech: Callable[[str], Path]
) -> None:  # type: ignore[no-untyped-def]
    from tests.support.server import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    server = start_server("--llm-base-url", dead, "--llm-model", "absent", "--llm-timeout-s", "2")
    async with httpx.AsyncClient() as http:
        health = (await http.get(f"{server.url}/healthz")).json()
    assert "cannot be reached" in health["engines"]["llm"]["unreachable"], health
    assert "cannot be reached" in server.log() and "VOICE_LLM__MODEL" not in server.log()
    client = AgentClient(server.url)
    await client.connect()
    try:
        for turn in (1, 2):
            client.mic.say(load_wav(str(speech(QUESTION))))
            done = await client.wait_for("response.done", count=turn, timeout_s=60)
            assert done["response"]["status"] == "failed"
            assert "unreachable" in done["response"]["status_details"]["error"]["message"]
        errors = client.of_type("error")
        assert len(errors) == 2 and errors[0]["error"]["code"] == "llm_unavailable"
        # The user was still heard, and the session is still there for the next turn.
        assert len(client.of_type("conversation.item.input_audio_transcription.completed")) == 2
    finally:
        await client.close()
