"""Interruptions that can be taken back (vad.interrupt_mode pause), on a scripted timeline
with engine doubles and the real paced track, as tests/session/test_bargein.py.

The user asks at 1.0-2.0 s, the reply (about 4 s of audio) plays from about 2.6 s, and
the user speaks over it at 3.5 s.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

import pytest

from app.agent.echo_responder import EchoResponder
from app.observability.counters import InterruptionStats
from app.session import messages as msg
from app.session.listening.backchannels import hum, no_turn
from app.session.session import Session
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
from tests.session.test_bargein import FIRST, SECOND, play_script

# Room for a loaded machine: the words, not the clock, decide these tests' outcomes.
WINDOW_MS = 3000
OVER_THE_REPLY = [
    (0.0, silence(1000)),
    (1.0, noise(1000)),
    (2.0, silence(1500)),
    (3.5, noise(600)),
    (4.1, silence(1400)),
]
FULL = f"About {FIRST}, the answer is long and has many words."


class Fakes(NamedTuple):
    stt: FakeSTT
    llm: FakeLLM
    tts: FakeTTS


def spoken_over(
    stats: InterruptionStats, said: str, **options: Any
) -> tuple[Session, MessageLog, Speaker, Fakes]:
    """A session whose answer to FIRST (about 4 s of audio, FULL) the user speaks over,
    saying what Whisper hears whole as `said`."""
    session, sent, audio, engines = make_session(
        resume_window_ms=WINDOW_MS, interruptions=stats, **options
    )
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, said]
    engines.llm.echo_question = True
    engines.tts.seconds_per_word = 0.3
    return session, sent, audio, Fakes(engines.stt, engines.llm, engines.tts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mm-hmm.", True),
        ("Uh-huh", True),
        ("Yeah, okay.", True),
        ("I see.", True),
        ("", True),
        (" ... ", True),
        ("Wait, stop.", False),
        ("Yes please", False),
        ("No.", False),
        ("Okay, but what about Rome?", False),
        # A hum or an "uh-huh" as Whisper spells it, whichever way.
        ("Mm hum.", True),
        ("M-M-M", True),
        ("MmMmM", True),
        ("O-ho!", True),
        ("Ooh-huh.", True),
        ("Now.", False),
        ("How?", False),
        ("Oh no.", False),
        ("Mom?", False),
        ("M.M. Home", False),
        ("Mm-hmm, mm-h", True),  # cut off where a brief look's words ran out
        ("Uh, huh, hhh", True),
    ],
)
def test_what_counts_as_no_turn(text: str, expected: bool) -> None:
    assert no_turn(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Mm-hmm.", True), ("Uh-huh", True), ("Mm hum.", True), ("", False),
     ("Right, okay.", False), ("Mm-hmm, right.", False), ("Now.", False)],
)  # fmt: skip
def test_what_is_a_hum(text: str, expected: bool) -> None:
    assert hum(text) is expected


def frames_of(audio: Speaker) -> int:
    """20 ms frames the reply's audio fills, the last one padded."""
    samples = sum(audio.writes) // 2
    return -(-samples // audio.frame_samples)


async def test_a_backchannel_pauses_the_reply_which_then_goes_on_with_no_word_lost() -> None:
    reactions: list[float] = []
    held_at: list[float] = []  # when the reply was held, on the clock the frames keep

    def held(spoken_s: float) -> None:
        reactions.append(spoken_s)
        held_at.append(time.monotonic())

    stats = InterruptionStats(on_reaction=held)
    session, sent, audio, engines = spoken_over(stats, "Mm-hmm.")
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded, timeout_s=15)

    done = sent.nth(msg.ReplyEnded)
    assert (done.status, done.text) == ("completed", FULL)
    assert stats.snapshot() == {"paused": 1, "resumed": 1, "cancelled": 0}
    # Held once the user had spoken the barge-in's 240 ms (in audio time, not the clock).
    assert reactions == [pytest.approx(0.24, abs=0.03)]
    # The client saw the user start and stop, and no item for the backchannel.
    assert len(sent.of(msg.SpeechStarted)) == 2 and len(sent.of(msg.SpeechStopped)) == 2
    assert len(sent.of(msg.InputCommitted)) == 1
    assert "ReplyAudioCleared" not in kinds(sent)
    messages = session.history.messages()
    assert [(m.role, m.content, m.interrupted) for m in messages] == [
        ("user", FIRST, False), ("assistant", FULL, False),
    ]  # fmt: skip
    # Every frame of the reply went out: the pause held the audio, it dropped none.
    voiced = audio.voiced_times()
    assert len(voiced) == frames_of(audio)
    # It was held from the barge-in until a brief transcription of what was said so far
    # heard a backchannel, not until the utterance and the turn's silence window ended;
    # the whole utterance was transcribed at its end all the same, to be sure of it.
    # (The hold itself may be a few ms, no longer than the gaps a busy machine leaves
    # between frames: what counts is that the reply played on before the turn ended.)
    _, stopped_at = sent.at(msg.SpeechStopped, 1)
    assert held_at[0] < stopped_at
    went_on = [at for at in voiced if held_at[0] < at < stopped_at]
    assert went_on, "the reply went on before the turn would have ended"
    assert engines.stt.briefly_heard, "judged briefly"
    assert engines.stt.briefly_heard[0] < engines.stt.heard[1], "on the utterance so far"
    await session.close()


@pytest.mark.parametrize(("more_ms", "a_turn"), [(120, False), (700, True)])
async def test_speech_after_a_backchannel_went_on_holds_the_reply_again_if_it_is_enough(
    more_ms: int, a_turn: bool
) -> None:
    """ "Mm-hmm" lets the reply go on, then a pause, then more: a little more is still the
    same backchannel; words heard at the pause hold the reply again, and the whole
    utterance is judged, and here answered, when it ends."""
    stats = InterruptionStats()
    said = SECOND if a_turn else "Mm-hmm, yeah."
    session, sent, _, engines = spoken_over(stats, said)
    # The backchannel (with the 300 ms before it), then all that was said.
    engines.stt.brief_for = lambda ms: "Mm-hmm." if ms < 1200 else said
    script = [*OVER_THE_REPLY[:3], (3.5, noise(600)), (4.1, silence(300)),
              (4.4, noise(more_ms)), (4.4 + more_ms / 1000, silence(1500))]  # fmt: skip
    await play_script(session, script)
    await wait_for(sent, msg.ReplyEnded, count=2 if a_turn else 1, timeout_s=15)
    first = sent.nth(msg.ReplyEnded)
    if a_turn:
        assert (first.status, first.reason) == ("cancelled", "turn_detected")
        assert sent.nth(msg.ReplyEnded, 1).status == "completed"
        assert stats.snapshot() == {"paused": 2, "resumed": 1, "cancelled": 1}
        assert len(sent.of(msg.InputCommitted)) == 2, "the utterance became a turn"
    else:
        assert (first.status, first.text) == ("completed", FULL)
        assert stats.snapshot() == {"paused": 1, "resumed": 1, "cancelled": 0}
        assert len(sent.of(msg.InputCommitted)) == 1, "no item for the backchannel"
    await session.close()


async def test_words_after_a_start_heard_as_a_backchannel_still_cut_the_reply() -> None:
    """ "Okay" so far lets the reply go on, but the user goes on: looked at again, it is
    "Okay, stop.", and the reply is held again then; the whole utterance, transcribed
    when it ends, is "Okay, stop." too: the reply is cut, and the words are answered."""
    stats = InterruptionStats()
    session, sent, _, engines = spoken_over(stats, "Okay, stop.")
    # At the barge-in (300 ms before the speech and 240 of it), then more of it.
    engines.stt.brief_for = lambda ms: "Okay." if ms < 600 else "Okay, stop."
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)
    first = sent.nth(msg.ReplyEnded)
    assert (first.status, first.reason) == ("cancelled", "turn_detected")
    assert stats.snapshot() == {"paused": 2, "resumed": 1, "cancelled": 1}
    assert len(sent.of(msg.InputCommitted)) == 2, "the utterance became a turn"
    assert [m.content for m in session.history.messages() if m.role == "user"] == [
        FIRST, "Okay, stop.",
    ]  # fmt: skip
    await session.close()


@pytest.mark.parametrize("words", [False, True])
async def test_words_so_far_that_may_begin_a_backchannel_are_heard_again_as_it_goes_on(
    words: bool,
) -> None:
    """The barge-in's brief look hears the start of "Right" as "Ride.": the reply stays
    held, the speech is heard again 100 ms later as "Right.", and the reply goes on while
    the user is still speaking, not at their first pause. "Hold on." is words whatever
    its last word turns out to be: no second look, and the whole utterance decides."""
    stats = InterruptionStats()
    session, sent, _, engines = spoken_over(stats, SECOND if words else "Right.")
    engines.stt.brief_script = ["Hold on."] if words else ["Ride.", "Right."]
    # 900 ms of speech over the reply and no pause in it yet: nothing but a look while it
    # goes on can let the reply go on.
    await play_script(session, [*OVER_THE_REPLY[:3], (3.5, noise(900))])
    if words:
        assert len(engines.stt.briefly_heard) == 1, "looked at once"
        assert stats.snapshot() == {"paused": 1, "resumed": 0, "cancelled": 0}
    else:
        deadline = time.monotonic() + 5
        while stats.resumed == 0 and time.monotonic() < deadline:  # noqa: ASYNC110 - a counter
            await asyncio.sleep(0.01)
        assert stats.snapshot() == {"paused": 1, "resumed": 1, "cancelled": 0}
        first, again, *_ = engines.stt.briefly_heard
        assert again >= first + 100 * 32, "on 100 ms more of the utterance"
    assert len(sent.of(msg.SpeechStopped)) == 1, "the user is still speaking"
    await play_script(session, [(0.0, silence(1400))])
    await wait_for(sent, msg.ReplyEnded, count=2 if words else 1, timeout_s=15)
    first_reply = sent.nth(msg.ReplyEnded)
    if words:
        assert (first_reply.status, first_reply.reason) == ("cancelled", "turn_detected")
    else:
        assert (first_reply.status, first_reply.text) == ("completed", FULL)
    await session.close()


async def test_a_backchannel_heard_whole_as_words_is_heard_again_primed() -> None:
    """ "Mm-hmm" so far lets the reply go on; unprimed, the whole utterance is heard as
    "And then them." (espeak-ng's en-gb voice did so): heard again as its start was,
    primed with backchannels, it is "Mm-hmm." and the reply plays to its end."""
    stats = InterruptionStats()
    session, sent, _, engines = spoken_over(stats, "And then them.")
    engines.stt.brief_script = ["Mm-hmm."]  # so far, at its pause, and whole
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded, timeout_s=15)
    done = sent.nth(msg.ReplyEnded)
    assert (done.status, done.text) == ("completed", FULL)
    assert stats.snapshot() == {"paused": 1, "resumed": 1, "cancelled": 0}
    assert len(sent.of(msg.InputCommitted)) == 1, "no item for the backchannel"
    assert engines.stt.briefly_heard[-1] == engines.stt.heard[-1], "the whole, primed"
    await session.close()


async def test_words_heard_whole_are_not_outweighed_by_primed_words() -> None:
    """Over its own echo, "Wait, stop." so far was heard primed as "Right, okay." and let
    the reply go on; whole and unprimed it is "Wait.", and primed again "Right, okay.":
    the primer's words, not a hum, so the unprimed words stand and the reply is cut."""
    stats = InterruptionStats()
    session, sent, _, engines = spoken_over(stats, "Wait.")
    engines.stt.brief_script = ["Right, okay."]  # so far, at its pause, and whole
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)
    first = sent.nth(msg.ReplyEnded)
    assert (first.status, first.reason) == ("cancelled", "turn_detected")
    assert engines.stt.briefly_heard[-1] == engines.stt.heard[-1], "the whole, primed"
    assert sent.of(msg.UserTranscribed)[-1].transcript == "Wait."
    await session.close()


async def test_a_held_reply_makes_no_more_audio_until_it_resumes() -> None:
    session, sent, audio, engines = make_session(resume_window_ms=WINDOW_MS)
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, "Yeah."]
    engines.stt.brief_script = ["Yeah, and so"]  # the start of it sounds like more to come
    engines.llm.echo_question = True
    engines.llm.hold_after = 6  # the first clause (to its comma), then the rest when released
    engines.tts.seconds_per_word = 0.5
    # Up to the moment the user's speech over the reply is confirmed (and held).
    await play_script(session, [*OVER_THE_REPLY[:3], (3.5, noise(500))])
    assert len(sent.of(msg.ClauseSpoken)) == 1 and len(sent.of(msg.SpeechStarted)) == 2
    writes = len(audio.writes)
    engines.llm.release.set()  # the rest of the reply is there to be synthesized...
    await asyncio.sleep(0.3)
    assert len(audio.writes) == writes, "...but none of it is made while the reply is held"
    await play_script(session, [(0.0, noise(100)), (0.1, silence(1400))])
    await wait_for(sent, msg.ReplyEnded, timeout_s=15)
    assert sent.nth(msg.ReplyEnded).text == FULL
    assert len(audio.writes) > writes, "the rest came after the resume"
    await session.close()


async def test_real_words_cancel_the_held_reply_and_are_answered_once_transcribed() -> None:
    stats = InterruptionStats()
    session, sent, audio, engines = spoken_over(stats, SECOND)
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)

    cancelled, second = sent.of(msg.ReplyEnded)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "turn_detected")
    assert second.status == "completed" and SECOND in second.text
    assert stats.snapshot() == {"paused": 1, "resumed": 0, "cancelled": 1}
    # The utterance was judged once it ended, then answered with that same transcript.
    _, stopped_at = sent.at(msg.SpeechStopped, 1)
    _, cleared_at = sent.at(msg.ReplyAudioCleared)
    assert stopped_at <= cleared_at
    assert len(engines.stt.heard) == 2, "the interruption was transcribed once"
    # Nothing of the first reply went out after the user's barge-in was confirmed...
    _, barge_at = sent.at(msg.SpeechStarted, 1)
    _, second_created_at = sent.at(msg.ReplyStarted, 1)
    held_by = barge_at + 0.24 + 0.1  # interrupt_min_speech_ms, and slack for a busy loop
    late = [t for t in audio.voiced_times() if held_by < t < second_created_at]
    assert late == []
    # ...so history keeps what was heard up to the pause, and the LLM saw just that.
    messages = session.history.messages()
    assert [(m.role, m.interrupted) for m in messages] == [
        ("user", False), ("assistant", True), ("user", False), ("assistant", False),
    ]  # fmt: skip
    heard = messages[1].content
    assert heard and FULL.startswith(heard) and heard != FULL
    assert engines.llm.prompts[-1][-2:] == [
        {"role": "assistant", "content": heard}, {"role": "user", "content": SECOND},
    ]  # fmt: skip
    await session.close()


async def test_a_user_still_talking_when_the_window_closes_cancels_it_then() -> None:
    stats = InterruptionStats()
    session, sent, _, engines = make_session(resume_window_ms=1000, interruptions=stats)
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, SECOND]
    engines.tts.seconds_per_word = 0.3
    await play_script(session, [*OVER_THE_REPLY[:3], (3.5, noise(2500)), (6.0, silence(800))])
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)

    assert sent.nth(msg.ReplyEnded).status == "cancelled"
    # Cut while the user was still talking, well before the utterance ended.
    cut, _ = sent.at(msg.ReplyAudioCleared)
    assert cut < sent.at(msg.SpeechStopped, 1)[0]
    assert stats.snapshot() == {"paused": 1, "resumed": 0, "cancelled": 1}
    assert sent.nth(msg.ReplyEnded, 1).status == "completed"
    await session.close()


async def test_cancel_mode_and_the_echo_agent_do_not_hold_the_reply() -> None:
    # interrupt_mode cancel: cut at the barge-in, before the utterance ends.
    reactions: list[float] = []
    stats = InterruptionStats(on_reaction=reactions.append)
    session, sent, _, engines = make_session(interrupt_mode="cancel", interruptions=stats)
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.seconds_per_word = 0.3
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded)
    assert sent.at(msg.ReplyAudioCleared)[0] < sent.at(msg.SpeechStopped, 1)[0]
    assert stats.snapshot() == {"paused": 0, "resumed": 0, "cancelled": 1}
    assert reactions == [pytest.approx(0.24, abs=0.03)]
    await session.close()

    # The echo agent hears no words to judge by: whatever it held was a turn.
    reactions.clear()
    stats = InterruptionStats(on_reaction=reactions.append)
    session, sent, _, _ = make_session(
        responder=EchoResponder(), resume_window_ms=WINDOW_MS, interruptions=stats
    )
    await play_script(session, [(0.0, noise(3000)), (3.0, silence(600)), (3.6, noise(600)),
                                (4.2, silence(800))])  # fmt: skip
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=10)
    assert sent.nth(msg.ReplyEnded).status == "cancelled"
    assert stats.snapshot() == {"paused": 1, "resumed": 0, "cancelled": 1}
    assert len(reactions) == 1, "one barge-in: held, then cut, is one reaction"
    await session.close()


class SocketLike(Speaker):
    """A transport whose audio plays on the client's side: it cannot hold it."""

    def pause(self) -> bool:
        return False


async def test_a_reply_the_transport_cannot_hold_is_cancelled_at_once() -> None:
    stats = InterruptionStats()
    audio = SocketLike()
    session, sent, _, engines = make_session(audio=audio, interruptions=stats)
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.seconds_per_word = 0.3
    await play_script(session, OVER_THE_REPLY)
    await wait_for(sent, msg.ReplyEnded)
    assert sent.at(msg.ReplyAudioCleared)[0] < sent.at(msg.SpeechStopped, 1)[0]
    assert stats.paused == 0
    await asyncio.sleep(0.1)
    await session.close()


@pytest.mark.parametrize(("brief", "words"), [("Stop.", True), ("Mm.", False)])
async def test_words_too_short_to_barge_in_stop_the_reply_at_their_first_pause(
    brief: str, words: bool
) -> None:
    """120 ms of sound, less than the 300 ms a barge-in needs: a brief transcription at
    its first pause hears "Stop." and holds the reply then, not when the turn's silence
    window has ended; "Mm." leaves it playing. The whole utterance decides, as before."""
    held_at: list[float] = []
    stats = InterruptionStats(on_reaction=lambda _: held_at.append(time.monotonic()))
    session, sent, _, engines = make_session(
        resume_window_ms=WINDOW_MS, interrupt_min_speech_ms=300, interruptions=stats
    )
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, brief]
    engines.stt.brief_script = [brief]
    engines.llm.echo_question = True
    engines.tts.seconds_per_word = 0.3
    script = [*OVER_THE_REPLY[:3], (3.5, noise(120)), (3.62, silence(1400))]
    await play_script(session, script)
    await wait_for(sent, msg.ReplyEnded, count=2 if words else 1, timeout_s=15)
    assert engines.stt.briefly_heard, "judged at its pause"
    first = sent.nth(msg.ReplyEnded)
    if words:
        assert (first.status, first.reason) == ("cancelled", "turn_detected")
        _, stopped_at = sent.at(msg.SpeechStopped, 1)
        assert len(held_at) == 1 and held_at[0] < stopped_at, "held before the turn ended"
        assert len(sent.of(msg.InputCommitted)) == 2, "and answered"
    else:
        assert (first.status, first.text) == ("completed", FULL)
        assert held_at == [] and stats.snapshot()["paused"] == 0
        assert len(sent.of(msg.InputCommitted)) == 1
    await session.close()


@pytest.mark.parametrize("holdable", [True, False])
async def test_words_too_short_to_barge_in_are_looked_at_once_they_begin(holdable: bool) -> None:
    """ "Stop." is looked at once it has begun: a reply that can be held is held while
    the word goes on, before any pause in it. One that cannot (a socket's) is not cut on
    that look: its first pause decides, as before."""
    held_at: list[float] = []
    stats = InterruptionStats(on_reaction=lambda _: held_at.append(time.monotonic()))
    session, sent, _, engines = make_session(
        audio=None if holdable else SocketLike(),
        resume_window_ms=WINDOW_MS,
        interrupt_min_speech_ms=300,
        interruptions=stats,
    )
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.script = [FIRST, "Stop."]
    engines.stt.brief_script = ["Stop."]
    engines.llm.echo_question = True
    engines.tts.seconds_per_word = 0.3
    await play_script(session, [*OVER_THE_REPLY[:3], (3.5, noise(240))])  # no pause yet
    if holdable:
        deadline = time.monotonic() + 5
        while not held_at and time.monotonic() < deadline:  # noqa: ASYNC110 - a callback
            await asyncio.sleep(0.01)
        assert stats.snapshot() == {"paused": 1, "resumed": 0, "cancelled": 0}
    else:
        assert engines.stt.briefly_heard, "looked at"
        assert held_at == [] and not sent.of(msg.ReplyEnded), "not cut on that look"
    assert len(sent.of(msg.SpeechStopped)) == 1, "the user is still speaking"
    await play_script(session, [(0.0, silence(1400))])
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)
    first = sent.nth(msg.ReplyEnded)
    assert (first.status, first.reason) == ("cancelled", "turn_detected")
    await session.close()
