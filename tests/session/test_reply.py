"""How a reply copes with TTS failures, with engine doubles."""

from __future__ import annotations

from tests.session.fakes import FakeTTS, make_session, noise, silence, wait_for


async def test_an_unspeakable_clause_is_skipped_and_the_reply_goes_on() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.refuse = {"answer you asked for."}
    session.feed_audio(silence(300) + noise(800) + silence(600))
    await wait_for(sent, "response.done")
    done = sent[-1]["response"]
    assert done["status"] == "completed"
    said = [e for e in sent if e["type"] == "response.output_audio_transcript.done"][0]
    assert said["transcript"] == "Sure, here is the"
    assert audio.writes
    await session.close()


async def test_a_reply_nothing_of_which_can_be_spoken_fails_with_an_error() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.refuse = {"*"}
    session.feed_audio(silence(300) + noise(800) + silence(600))
    await wait_for(sent, "response.done")
    assert sent[-1]["response"]["status"] == "failed"
    errors = [e for e in sent if e["type"] == "error"]
    assert errors and "nothing of the reply could be spoken" in errors[0]["error"]["message"]
    assert len(session.history) == 1, "the user's words are kept; no assistant message"
    await session.close()
