"""How a reply copes with TTS failures, with engine doubles."""

from __future__ import annotations

from app.session import messages as msg
from tests.session.fakes import FakeTTS, make_session, noise, silence, wait_for


async def test_an_unspeakable_clause_is_skipped_and_the_reply_goes_on() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    # The reply's pieces: "Sure," and "here is the answer you asked for." (the first
    # ends at its mark, app/agent/phrases.py).
    engines.tts.refuse = {"Sure,"}
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    done = sent.nth(msg.ReplyEnded)
    assert done.status == "completed"
    assert done.text == "here is the answer you asked for."
    assert audio.writes
    await session.close()


async def test_a_reply_nothing_of_which_can_be_spoken_fails_with_an_error() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.refuse = {"*"}
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    assert sent.nth(msg.ReplyEnded).status == "failed"
    problems = sent.of(msg.Problem)
    assert problems and "nothing of the reply could be spoken" in problems[0].message
    assert problems[0].code == "tts_failed"
    assert len(session.history) == 1, "the user's words are kept; no assistant message"
    await session.close()
