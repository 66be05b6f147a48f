"""Orchestration of a turn, with small engine doubles: speculation must never leak.

The real engines are exercised end to end in tests/e2e; here the question is
only what the session does, and in which order, around the end of a turn.
"""

from __future__ import annotations

import asyncio

from app.session import messages as msg
from app.session.history import Message
from tests.session.fakes import FakeLLM, FakeSTT, kinds, make_session, noise, silence, wait_for


async def test_a_speculative_reply_stays_silent_until_the_turn_ends() -> None:
    session, sent, audio, engines = make_session()
    session.push_audio(silence(300) + noise(800) + silence(300))  # paused, not ended
    await asyncio.sleep(0.3)  # the speculative reply gets as far as it can
    assert isinstance(engines.stt, FakeSTT) and engines.stt.heard, "STT started during the pause"
    assert isinstance(engines.llm, FakeLLM) and engines.llm.prompts, "and the LLM too"
    assert kinds(sent) == ["SpeechStarted"]
    assert audio.writes == [], "nothing plays before the turn has ended"
    assert len(session.history) == 0

    session.push_audio(silence(300))  # now the silence window is complete
    await wait_for(sent, msg.ReplyEnded)
    assert kinds(sent)[:5] == [
        "SpeechStarted",
        "SpeechStopped",
        "InputCommitted",
        "UserTranscribed",
        "ReplyStarted",
    ]
    assert audio.writes, "the reply plays once the turn ends"
    assert len(engines.stt.heard) == 1, "the speculative transcript was used, not redone"
    done = sent.nth(msg.ReplyEnded)
    assert done.status == "completed"
    assert all(ms >= 0 for ms in done.timings_ms.values())
    assert [m["role"] for m in engines.llm.prompts[0]] == ["system", "user"]
    assert len(session.history) == 2
    assert session.speculation.snapshot() == {"started": 1, "kept": 1, "dropped": 0}
    await session.close()


async def test_words_that_finish_the_last_ones_are_one_message_from_the_start() -> None:
    """Words that stopped short, then the rest after a pause, with no reply heard between
    them (app/session/history.py: continued): the speculative reply reads them as one."""
    session, sent, audio, engines = make_session()
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    session.history.add(Message("user", "How many kilometers are in?", "item_0", spoken=True))
    engines.stt.script = ["10 miles."]
    session.push_audio(silence(300) + noise(800) + silence(300))  # paused, not ended
    await asyncio.sleep(0.3)
    session.push_audio(silence(300))
    await wait_for(sent, msg.ReplyEnded)
    assert session.speculation.snapshot()["kept"] == 1
    asked = [m["content"] for m in engines.llm.prompts[0] if m["role"] == "user"]
    assert len(asked) == 1 and asked[0].startswith("How many kilometers are in 10 miles."), asked
    assert "16.09 kilometers" in asked[0], "and the figure in them is worked out"
    await session.close()


async def test_speech_that_resumes_discards_the_speculative_reply() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    session.push_audio(silence(300) + noise(600) + silence(320))  # paused
    for _ in range(200):  # until the speculative reply is mid-generation
        if engines.llm.prompts:
            break
        await asyncio.sleep(0.005)
    session.push_audio(noise(600))  # the user goes on talking
    await asyncio.sleep(0.2)
    assert engines.llm.closed_early == 1, "the abandoned LLM stream was closed"
    assert audio.writes == []
    assert kinds(sent) == ["SpeechStarted"]

    session.push_audio(silence(700))
    await wait_for(sent, msg.ReplyEnded)
    transcripts = sent.of(msg.UserTranscribed)
    assert len(transcripts) == 1, "one user turn, one transcript"
    # The reply used the whole utterance, not the part before the pause.
    assert engines.stt.heard[-1] > engines.stt.heard[0]
    assert transcripts[0].transcript == f"question of {engines.stt.heard[-1] // 32} ms"
    assert len(session.history) == 2
    # The first pause's reply was dropped; the final silence's was kept.
    assert session.speculation.snapshot() == {"started": 2, "kept": 1, "dropped": 1}
    await session.close()


async def test_without_speculation_work_starts_at_the_end_of_the_turn() -> None:
    session, sent, audio, engines = make_session(speculative_ms=0)
    assert isinstance(engines.stt, FakeSTT)
    session.push_audio(silence(300) + noise(800) + silence(400))
    await asyncio.sleep(0.2)
    assert engines.stt.heard == []
    session.push_audio(silence(200))
    await wait_for(sent, msg.ReplyEnded)
    assert engines.stt.heard and audio.writes
    assert session.speculation.started == 0
    await session.close()


async def test_every_item_follows_the_one_before_it() -> None:
    session, sent, _, _ = make_session()
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    session.push_audio(noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded, count=2)
    user_1, user_2 = sent.of(msg.InputCommitted)
    reply_1, reply_2 = sent.of(msg.MessageStarted)
    assert user_1.previous_item_id is None
    assert reply_1.previous_item_id == user_1.item_id
    assert user_2.previous_item_id == reply_1.item_id
    assert reply_2.previous_item_id == user_2.item_id
    assert [m.item_id for m in session.history.messages()] == [
        user_1.item_id, reply_1.item_id, user_2.item_id, reply_2.item_id,
    ]  # fmt: skip
    await session.close()
