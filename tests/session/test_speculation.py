"""Orchestration of a turn, with small engine doubles: speculation must never leak.

The real engines are exercised end to end in tests/e2e; here the question is
only what the session does, and in which order, around the end of a turn.
"""

from __future__ import annotations

import asyncio

from tests.session.fakes import (
    FakeLLM,
    FakeSTT,
    kinds,
    make_session,
    noise,
    silence,
    wait_for,
)


async def test_a_speculative_reply_stays_silent_until_the_turn_ends() -> None:
    session, sent, audio, engines = make_session()
    session.feed_audio(silence(300) + noise(800) + silence(300))  # paused, not ended
    await asyncio.sleep(0.3)  # the speculative reply gets as far as it can
    assert isinstance(engines.stt, FakeSTT) and engines.stt.heard, "STT started during the pause"
    assert isinstance(engines.llm, FakeLLM) and engines.llm.prompts, "and the LLM too"
    assert kinds(sent) == ["input_audio_buffer.speech_started"]
    assert audio.writes == [], "nothing plays before the turn has ended"
    assert len(session.history) == 0

    session.feed_audio(silence(300))  # now the silence window is complete
    await wait_for(sent, "response.done")
    assert kinds(sent)[:7] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
        "response.created",
    ]
    assert audio.writes, "the reply plays once the turn ends"
    assert len(engines.stt.heard) == 1, "the speculative transcript was used, not redone"
    done = sent[-1]["response"]
    assert done["status"] == "completed"
    assert all(ms >= 0 for ms in done["timings_ms"].values())
    assert [m["role"] for m in engines.llm.prompts[0]] == ["system", "user"]
    assert len(session.history) == 2
    await session.close()


async def test_speech_that_resumes_discards_the_speculative_reply() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    session.feed_audio(silence(300) + noise(600) + silence(320))  # paused
    for _ in range(200):  # until the speculative reply is mid-generation
        if engines.llm.prompts:
            break
        await asyncio.sleep(0.005)
    session.feed_audio(noise(600))  # the user goes on talking
    await asyncio.sleep(0.2)
    assert engines.llm.closed_early == 1, "the abandoned LLM stream was closed"
    assert audio.writes == []
    assert kinds(sent) == ["input_audio_buffer.speech_started"]

    session.feed_audio(silence(700))
    await wait_for(sent, "response.done")
    transcripts = [e for e in sent if e["type"].endswith("transcription.completed")]
    assert len(transcripts) == 1, "one user turn, one transcript"
    # The reply used the whole utterance, not the part before the pause.
    assert engines.stt.heard[-1] > engines.stt.heard[0]
    assert transcripts[0]["transcript"] == f"question of {engines.stt.heard[-1] // 32} ms"
    assert len(session.history) == 2
    await session.close()


async def test_without_speculation_work_starts_at_the_end_of_the_turn() -> None:
    session, sent, audio, engines = make_session(speculative_ms=0)
    assert isinstance(engines.stt, FakeSTT)
    session.feed_audio(silence(300) + noise(800) + silence(400))
    await asyncio.sleep(0.2)
    assert engines.stt.heard == []
    session.feed_audio(silence(200))
    await wait_for(sent, "response.done")
    assert engines.stt.heard and audio.writes
    await session.close()


async def test_unknown_client_events_get_an_error_and_the_session_goes_on() -> None:
    session, sent, audio, engines = make_session()
    session.on_client_event({"type": "no.such.event"})
    assert sent[-1]["type"] == "error"
    assert "no.such.event" in sent[-1]["error"]["message"]
    session.feed_audio(silence(300) + noise(800) + silence(600))
    await wait_for(sent, "response.done")
    await session.close()
