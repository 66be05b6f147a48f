"""Barge-in on a scripted timeline, with engine doubles and the real paced track.

The user speaks at 1.0-2.0 s, the reply plays from ~2.6 s, and the user speaks
again at 3.5 s, while the reply still has seconds to go.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from app.config import LlmSettings
from app.engines.llm import OpenAICompatLLM
from app.session import messages as msg
from app.session.history import heard_text
from app.session.refusals import BadTruncation, NoActiveResponse, NothingPlaying, UnknownItem
from app.session.session import Session
from tests.conftest import LlamaServer
from tests.session.fakes import (
    FakeLLM,
    FakeSTT,
    FakeTTS,
    MessageLog,
    Speaker,
    kinds,
    make_session,
    noise,
    silence,
    wait_for,
)

FIRST, SECOND = "what is the first thing", "and the second thing"
# What the confirmed barge-in may still let out: the frame already handed to aiortc.
MAX_LATE_S = 0.04
DISCONNECTED = "Disconnected from client"  # what llama_cpp.server logs


async def play_script(session: Session, script: list[tuple[float, bytes]]) -> None:
    """Feed (start second, audio) pieces to the session in real time, 20 ms at a time."""
    t0 = time.monotonic()
    for start, pcm in script:
        for offset in range(0, len(pcm), 640):
            at = start + offset / 32_000
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            session.push_audio(pcm[offset : offset + 640])


def long_answers() -> tuple[Session, MessageLog, Speaker, FakeLLM]:
    # Cut at once; tests/session/test_interruption.py holds the reply first.
    session, sent, audio, engines = make_session(interrupt_mode="cancel")
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, SECOND]
    engines.llm.echo_question = True
    engines.tts.seconds_per_word = 0.3  # the first reply lasts about 4 s
    return session, sent, audio, engines.llm


SCRIPT = [
    (0.0, silence(1000)),
    (1.0, noise(1000)),
    (2.0, silence(1500)),
    (3.5, noise(800)),
    (4.3, silence(700)),
]


async def test_the_user_interrupts_and_history_keeps_what_was_heard() -> None:
    session, sent, audio, llm = long_answers()
    await play_script(session, SCRIPT)
    await wait_for(sent, msg.ReplyEnded, count=2)

    first_done, _ = sent.at(msg.ReplyEnded)
    cancelled = sent.nth(msg.ReplyEnded)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "turn_detected")
    assert sent.nth(msg.ReplyEnded, 1).status == "completed"

    # The order of what the client was told.
    started, started_at = sent.at(msg.ReplyAudioStarted)
    barge, _ = sent.at(msg.SpeechStarted, 1)
    cleared, cleared_at = sent.at(msg.ReplyAudioCleared)
    assert started < barge < cleared
    assert kinds(sent)[cleared : cleared + 2] == ["ReplyAudioCleared", "ReplyEnded"]
    assert kinds(sent)[first_done + 1 :].count("ReplyStarted") == 1

    # No frame of the first reply went out more than 40 ms after the barge-in.
    _, second_created_at = sent.at(msg.ReplyStarted, 1)
    late = [at for at in audio.voiced_times() if cleared_at + MAX_LATE_S < at < second_created_at]
    assert late == [], f"{len(late)} frames of the interrupted reply went out after the cut"

    # History: the first reply only as far as it was heard, then the second turn.
    messages = session.history.messages()
    assert [(m.role, m.interrupted) for m in messages] == [
        ("user", False), ("assistant", True), ("user", False), ("assistant", False),
    ]  # fmt: skip
    heard = messages[1]
    full = f"About {FIRST}, the answer is long and has many words."
    assert heard.content and full.startswith(heard.content) and heard.content != full
    assert cancelled.heard_ms is not None and cancelled.text == heard.content
    assert heard.content == heard_text(heard.timeline, cancelled.heard_ms)
    # The cut is where the audio stopped, by the playout position of the track.
    assert abs(cancelled.heard_ms - (cleared_at - started_at) * 1000) < 100
    # The second question was answered, and the LLM saw exactly the heard part.
    assert llm.prompts[-1][-2] == {"role": "assistant", "content": heard.content}
    assert llm.prompts[-1][-1] == {"role": "user", "content": SECOND}
    assert SECOND in messages[3].content
    await session.close()


async def test_with_interrupt_response_off_speech_waits_for_the_next_turn() -> None:
    session, sent, _, engines = make_session(interrupt_response=False)
    assert isinstance(engines.tts, FakeTTS) and isinstance(engines.stt, FakeSTT)
    engines.stt.script = [FIRST, SECOND]
    engines.tts.seconds_per_word = 0.15
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1000)), (1.8, noise(600)),
                                (2.4, silence(700))])  # fmt: skip
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=10)
    assert [done.status for done in sent.of(msg.ReplyEnded)] == ["completed", "completed"]
    assert "ReplyAudioCleared" not in kinds(sent)
    # The second turn was heard while the first reply played, and answered after it.
    first_done, _ = sent.at(msg.ReplyEnded)
    assert sent.at(msg.SpeechStarted, 1)[0] < first_done
    assert sent.at(msg.ReplyStarted, 1)[0] > first_done
    await session.close()


@pytest.mark.parametrize(("heard", "cut"), [("", False), ("Mm.", False), ("Stop.", True)])
async def test_a_short_sound_during_a_reply_is_judged_by_its_words(heard: str, cut: bool) -> None:
    """Too short to barge in (120 ms of sound: webrtcvad's hangover makes it ~200 ms), it
    is judged when it ends while the reply plays on: a noise or a backchannel is dropped,
    a word ("stop") cuts the reply and is answered."""
    session, sent, _, engines = make_session(interrupt_min_speech_ms=300)
    assert isinstance(engines.tts, FakeTTS) and isinstance(engines.stt, FakeSTT)
    engines.tts.seconds_per_word = 0.15
    engines.stt.script = ["What time is it?", heard]
    await play_script(session, [(0.0, noise(800)), (0.8, silence(900)), (1.7, noise(120)),
                                (1.82, silence(600))])  # fmt: skip
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    first = sent.nth(msg.ReplyEnded)
    assert first.status == ("cancelled" if cut else "completed")
    assert len(sent.of(msg.InputCommitted)) == (2 if cut else 1)
    await session.close()


async def test_echo_guard_ignores_the_agents_own_voice_but_not_the_user() -> None:
    session, sent, _, engines = make_session(
        echo_guard=True, echo_margin_db=-10.0, interrupt_mode="cancel"
    )
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.seconds_per_word = 0.5  # 4 s of reply from about 1.4 s
    engines.tts.amplitude = 0.9  # the agent plays at -1 dBFS
    # The agent's voice comes back 20 dB down (voiced, but under the margin)...
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1500)), (2.3, noise(600)),
                                (2.9, silence(700))])  # fmt: skip
    assert "ReplyEnded" not in kinds(sent), "the echo did not interrupt the reply"
    # ...while the user, close to the microphone, is heard over it.
    await play_script(session, [(0.0, noise(600, std=12_000)), (0.6, silence(100))])
    assert sent.nth(msg.ReplyEnded).status == "cancelled"
    # The echo never became a turn: had it been queued, it would be transcribed now.
    await asyncio.sleep(0.3)
    assert len(sent.of(msg.UserTranscribed)) == 1
    await session.close()


async def test_client_cancel_clear_and_truncate() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    # The reply's first piece is "Sure," (app/agent/phrases.py): a second of audio, still
    # playing when the client cancels.
    engines.tts.seconds_per_word = 1.0
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.hold_after = 6  # still generating when the client cancels, however late
    # A cancel while the reply plays.
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1100))])
    session.cancel_response()
    done = sent.nth(msg.ReplyEnded)
    assert (done.status, done.reason) == ("cancelled", "client_cancelled")
    assert "ReplyAudioCleared" in kinds(sent)
    await asyncio.sleep(0.05)
    assert engines.llm.closed_early == 1, "the LLM stream was closed"
    # A truncate after the cut may only shrink what was heard, never add to it.
    cut = session.history.messages()[-1]
    heard = cut.content
    with pytest.raises(BadTruncation):
        session.items.truncate(cut.item_id, 99_000)
    assert cut.content == heard
    engines.llm.hold_after = None
    # Nothing left to cancel or clear: refused, and the session goes on.
    with pytest.raises(NoActiveResponse):
        session.cancel_response()
    with pytest.raises(NothingPlaying):
        session.clear_output()

    # A reply that played to the end, truncated afterwards by the client.
    engines.tts.seconds_per_word = 0.05
    await play_script(session, [(0.0, noise(800)), (0.8, silence(700))])
    await wait_for(sent, msg.ReplyEnded, count=2)
    second = sent.nth(msg.ReplyEnded, 1).message
    assert second is not None
    item_id = second.item_id
    message = session.history.find(item_id)
    assert message is not None and not message.interrupted
    session.items.truncate(item_id, 200)
    assert sent[-1] == msg.ItemTruncated(item_id, 200)
    assert message.interrupted and message.content == heard_text(message.timeline, 200)
    # "Sure," whole, then three of the seven words of "here is the answer you asked for."
    # (50 ms a word, each word's share by its letters).
    assert message.content == "Sure, here is the"
    # Bad truncations are refused.
    with pytest.raises(UnknownItem):
        session.items.truncate("item_nope", 10)
    with pytest.raises(BadTruncation):
        session.items.truncate(item_id, 99_999)
    assert audio.readyState == "live"
    await session.close()


async def test_a_barge_in_ends_the_request_on_a_real_openai_compatible_server(
    llama_server: LlamaServer,
) -> None:
    """llama.cpp's server logs a client that went away and frees its one slot."""
    llm = OpenAICompatLLM(LlmSettings(base_url=llama_server.url, model="m", max_tokens=400))
    session, sent, _, engines = make_session(llm=llm)
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.tts, FakeTTS)
    # SmolLM2 goes on for its whole max_tokens (about 6 s here) on this one.
    engines.stt.script = ["Tell me a long story about a dragon.", FIRST]
    engines.tts.seconds_per_word = 0.2
    disconnects = llama_server.log.read_text().count(DISCONNECTED)
    try:
        await play_script(session, [(0.0, noise(800)), (0.8, silence(700))])
        _, created_at = sent.at(msg.ReplyStarted)
        while "ReplyAudioStarted" not in kinds(sent):
            assert time.monotonic() - created_at < 60, "the reply never started"
            await asyncio.sleep(0.05)
        await play_script(session, [(0.1, noise(600)), (0.7, silence(700))])
        assert sent.nth(msg.ReplyEnded).status == "cancelled"
        for _ in range(100):  # the server notices when it next writes to the stream
            if llama_server.log.read_text().count(DISCONNECTED) > disconnects:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("llama.cpp's server never saw the request end")
        # Its only slot is free: the next turn's reply comes back whole.
        await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=120)
        assert sent.nth(msg.ReplyEnded, 1).status == "completed"
    finally:
        await session.close()
        await llm.aclose()


async def test_a_reply_that_crashes_still_ends_with_response_done() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.crash_on = "here is the answer you asked for."  # its second piece
    await play_script(session, [(0.0, noise(800)), (0.8, silence(700))])
    await wait_for(sent, msg.ReplyEnded)
    assert sent.nth(msg.ReplyEnded).status == "failed"
    assert session.reply is None, "nothing left to interrupt"
    assert [problem.code for problem in sent.of(msg.Problem)] == ["internal"]
    await session.close()
