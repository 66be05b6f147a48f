"""semantic_vad with a turn-model double: a finished turn ends at the first pause,
an unfinished one waits for more speech or the eagerness ceiling. The real
Smart Turn model is tested in tests/engines/test_smart_turn.py and end to end."""

from __future__ import annotations

import pytest

from app.session import messages as msg
from app.session.options import OptionChanges, TurnDetectionChange
from app.session.refusals import OptionError
from tests.session.fakes import FakeSTT, FakeTurnModel, kinds, make_session, noise, silence
from tests.session.fakes import wait_for as wait_for_message
from tests.session.test_bargein import play_script

SEMANTIC = OptionChanges(turn_detection=TurnDetectionChange(semantic=True, eagerness="high"))


async def test_a_finished_turn_ends_at_the_first_pause() -> None:
    model = FakeTurnModel(probability=0.9)
    session, sent, _, engines = make_session(turn_model=model)
    session.configure(SEMANTIC)
    assert session.options.vad is not None and session.options.vad.silence_ms == 2000
    # One second of silence: far short of the 2 s ceiling, yet the turn is over.
    await play_script(session, [(0.0, silence(300)), (0.3, noise(800)), (1.1, silence(1000))])
    assert kinds(sent)[:3] == ["SpeechStarted", "SpeechStopped", "InputCommitted"]
    assert len(model.asked) == 1, "one question, at the first pause"
    await wait_for_message(sent, msg.ReplyEnded)
    assert isinstance(engines.stt, FakeSTT) and len(engines.stt.heard) == 1
    # The reply began with the model's answer, not speculatively at the pause.
    assert session.speculation.started == 0


async def test_an_unfinished_turn_waits_and_asks_again_up_to_the_ceiling() -> None:
    model = FakeTurnModel(probability=0.1)
    session, sent, _, engines = make_session(turn_model=model)
    session.configure(SEMANTIC)
    await play_script(session, [(0.0, silence(300)), (0.3, noise(800)), (1.1, silence(1200))])
    assert "SpeechStopped" not in kinds(sent), "1.2 s of silence, but the model says not yet"
    assert len(model.asked) >= 3, "asked at 200 ms, then every 300 ms"
    # No reply is begun on a pause the model calls unfinished: none is thrown away.
    assert isinstance(engines.stt, FakeSTT) and engines.stt.heard == []
    assert session.speculation.snapshot() == {"started": 0, "kept": 0, "dropped": 0}
    await play_script(session, [(0.0, silence(1000))])  # past the 2 s ceiling
    assert "SpeechStopped" in kinds(sent)


async def test_an_answer_that_comes_after_the_user_went_on_is_dropped() -> None:
    model = FakeTurnModel(probability=0.9, delay_s=0.4)
    session, sent, _, _ = make_session(turn_model=model)
    session.configure(SEMANTIC)
    # A 300 ms pause: asked at 200 ms, speech again at 300 ms, the answer at 600 ms.
    await play_script(session, [(0.0, silence(300)), (0.3, noise(600)), (0.9, silence(300)),
                                (1.2, noise(600)), (1.8, silence(100))])  # fmt: skip
    await play_script(session, [(0.0, silence(100))])
    assert "SpeechStopped" not in kinds(sent)
    # The next pause asks again, and that answer ends the turn.
    await play_script(session, [(0.0, silence(800))])
    assert "SpeechStopped" in kinds(sent)


async def test_server_vad_comes_back_with_its_silence_window() -> None:
    session, sent, _, _ = make_session(turn_model=FakeTurnModel())
    session.configure(SEMANTIC)
    session.configure(OptionChanges(turn_detection=TurnDetectionChange(semantic=False)))
    assert session.options.eagerness is None
    assert session.options.vad is not None and session.options.vad.silence_ms == 500
    without = make_session()[0]
    with pytest.raises(OptionError, match="turn model"):
        without.configure(SEMANTIC)


async def test_barge_in_works_the_same() -> None:
    session, sent, _, engines = make_session(turn_model=FakeTurnModel(probability=0.9))
    engines.tts.seconds_per_word = 0.3  # type: ignore[attr-defined]  # a long reply
    session.configure(SEMANTIC)
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1200)), (2.0, noise(600)),
                                (2.6, silence(400))])  # fmt: skip
    await wait_for_message(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert (ended.status, ended.reason) == ("cancelled", "turn_detected")
