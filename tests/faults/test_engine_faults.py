"""STT and TTS faults on a scripted timeline, with engine doubles and the real paced
track (the LLM's faults run against a real server in test_llm_faults.py, the real
engines' timeouts in tests/engines/test_gate.py)."""

from __future__ import annotations

from app.config import TtsSettings
from app.errors import EngineError
from app.session import messages as msg
from tests.session.fakes import FakeSTT, FakeTTS, make_session, noise, silence, wait_for
from tests.session.test_bargein import play_script

FALLBACK = TtsSettings().fallback_speech
ONE_TURN = [(0.0, silence(300)), (0.3, noise(800)), (1.1, silence(900))]


async def test_a_transcription_that_fails_is_told_answered_with_the_fallback_and_survived() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.stt, FakeSTT)
    engines.stt.fail_with = EngineError("whisper took over 15 s", code="stt_timeout")
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)

    problems = sent.of(msg.Problem)
    assert [(p.code, p.message) for p in problems] == [("stt_timeout", "whisper took over 15 s")]
    (unheard,) = sent.of(msg.TranscriptionFailed)
    assert unheard.code == "stt_timeout" and unheard.item_id == sent.nth(msg.InputCommitted).item_id
    failed = sent.nth(msg.ReplyEnded)
    assert (failed.status, failed.text) == ("failed", FALLBACK)
    assert audio.voiced_times(), "the fallback was heard"

    # The next turn is transcribed and answered as ever.
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=10)
    assert sent.nth(msg.ReplyEnded, 1).status == "completed"
    # History: the unheard item (its audio, no words), what the user heard, then the rest.
    history = [(m.role, m.content) for m in session.history.messages()]
    assert history[:2] == [("user", ""), ("assistant", FALLBACK)] and history[2][0] == "user"
    await session.close()


async def test_a_voice_that_fails_is_told_and_the_next_reply_speaks() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.refuse = {"*"}  # every clause, and the fallback too
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    assert [p.code for p in sent.of(msg.Problem)] == ["tts_failed"]
    failed = sent.nth(msg.ReplyEnded)
    assert (failed.status, failed.text) == ("failed", "")
    assert not audio.voiced_times()

    engines.tts.refuse = set()
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=10)
    spoken = sent.nth(msg.ReplyEnded, 1)
    assert spoken.status == "completed" and spoken.text
    await session.close()
