from __future__ import annotations

import numpy as np
import pytest

from app.audio.vad import (
    SAMPLE_RATE,
    TurnDetector,
    UtteranceEnded,
    UtterancePaused,
    UtteranceResumed,
    UtteranceStarted,
)
from app.config import VadSettings
from tests.support import rooms
from tests.support.speech import have_espeak

RNG = np.random.default_rng(7)


def silence(ms: int) -> np.ndarray:
    return np.zeros(SAMPLE_RATE * ms // 1000, dtype=np.int16)


def noise(ms: int, dbfs: float = -20.0) -> np.ndarray:
    """Broadband noise: webrtcvad calls it speech (digital silence is the non-speech case)."""
    amplitude = 32768 * 10 ** (dbfs / 20)
    samples = RNG.normal(0, amplitude, SAMPLE_RATE * ms // 1000)
    return np.clip(samples, -32768, 32767).astype(np.int16)


def run(detector: TurnDetector, *parts: np.ndarray, chunk: int = 320) -> list:
    pcm = np.concatenate(parts).tobytes()
    events = []
    for offset in range(0, len(pcm), chunk * 2):
        events.extend(detector.push(pcm[offset : offset + chunk * 2]))
    return events


def test_one_utterance_gives_start_then_end_with_prefix_padding() -> None:
    settings = VadSettings(silence_ms=500, prefix_padding_ms=300, start_ms=60, speculative_ms=0)
    # webrtcvad's own hangover keeps ~60-80 ms after speech "voiced".
    events = run(TurnDetector(settings), silence(1000), noise(1200), silence(1000))
    assert [type(e) for e in events] == [UtteranceStarted, UtteranceEnded]
    started, ended = events
    assert isinstance(started, UtteranceStarted) and isinstance(ended, UtteranceEnded)
    assert 960 <= started.audio_start_ms <= 1060
    assert 2200 <= ended.audio_end_ms <= 2300
    assert not ended.forced
    assert ended.silence_ms == 500, "the silence that ended it: the end-of-turn delay"
    seconds = len(ended.audio) / 2 / SAMPLE_RATE
    # 1.2 s of speech + 0.3 s of prefix + the hangover + at most 0.2 s of kept tail.
    assert 1.5 <= seconds <= 1.8
    lead = np.frombuffer(ended.audio, dtype=np.int16)[: SAMPLE_RATE * 250 // 1000]
    assert np.abs(lead).max() == 0, "prefix padding comes from the silence before speech"


def test_a_pause_shorter_than_the_silence_window_does_not_end_the_turn() -> None:
    settings = VadSettings(silence_ms=500, speculative_ms=200)
    events = run(
        TurnDetector(settings), silence(500), noise(600), silence(300), noise(600), silence(800)
    )
    kinds = [type(e) for e in events]
    # The 300 ms pause looked like a possible end (paused), then speech went on.
    assert kinds == [
        UtteranceStarted,
        UtterancePaused,
        UtteranceResumed,
        UtterancePaused,
        UtteranceEnded,
    ]


def test_a_pause_announces_the_audio_the_end_will_carry() -> None:
    settings = VadSettings(silence_ms=500, speculative_ms=200)
    events = run(TurnDetector(settings), silence(500), noise(800), silence(700))
    paused, ended = events[1], events[2]
    assert isinstance(paused, UtterancePaused) and isinstance(ended, UtteranceEnded)
    assert paused.audio_end_ms == ended.audio_end_ms
    # Both keep the same 200 ms tail of silence, so the speculative transcript is the final one.
    assert paused.audio == ended.audio


def test_speculation_outside_the_silence_window_is_off() -> None:
    settings = VadSettings(silence_ms=200, speculative_ms=200)
    events = run(TurnDetector(settings), silence(500), noise(800), silence(700))
    assert [type(e) for e in events] == [UtteranceStarted, UtteranceEnded]


def test_a_click_is_not_speech() -> None:
    events = run(TurnDetector(VadSettings()), silence(500), noise(20), silence(800))
    assert events == []


def test_max_utterance_forces_an_end() -> None:
    settings = VadSettings(max_utterance_s=1.0)
    events = run(TurnDetector(settings), silence(200), noise(2500))
    ends = [e for e in events if isinstance(e, UtteranceEnded)]
    assert ends and ends[0].forced
    assert len(ends[0].audio) / 2 / SAMPLE_RATE == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("chunk", [37, 160, 441, 960])
def test_odd_chunk_sizes_give_the_same_turns(chunk: int) -> None:
    parts = (silence(400), noise(700), silence(700))
    reference = run(TurnDetector(VadSettings()), *parts)
    assert run(TurnDetector(VadSettings()), *parts, chunk=chunk) == reference


def test_settings_must_be_whole_frames() -> None:
    with pytest.raises(ValueError, match="multiple of vad.frame_ms"):
        VadSettings(frame_ms=20, silence_ms=510)


def test_pauses_repeat_while_the_silence_goes_on() -> None:
    """What semantic turn detection asks its model at: 200 ms, then every 300 ms."""
    settings = VadSettings(silence_ms=2000, speculative_ms=0)
    detector = TurnDetector(settings, pause_ms=200, recheck_ms=300)
    events = run(detector, silence(500), noise(800), silence(1500))
    paused = [e for e in events if isinstance(e, UtterancePaused)]
    ends = [e.audio_end_ms for e in paused]
    assert len(paused) == 5 and [b - a for a, b in zip(ends, ends[1:], strict=False)] == [0] * 4
    assert not [e for e in events if isinstance(e, UtteranceEnded)], "2 s of silence not reached"
    # Speech resumes: pauses start over from the first.
    more = run(detector, noise(400), silence(400))
    assert [type(e) for e in more] == [UtteranceResumed, UtterancePaused]


# webrtcvad's longest hangover (kOverHangMax2* in vad_core.c), in ms, by mode and frame.
LONGEST_HANGOVER_MS = {
    mode: {10: 10 * frames[0], 20: 20 * frames[1], 30: 30 * frames[2]}
    for mode, frames in {0: (14, 7, 5), 1: (14, 7, 5), 2: (9, 5, 3), 3: (9, 5, 3)}.items()
}


@pytest.mark.parametrize("aggressiveness", [0, 1, 2, 3])
@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_the_silence_window_is_counted_from_where_the_speech_stopped(
    aggressiveness: int, frame_ms: int
) -> None:
    """webrtcvad calls up to 150 ms after speech "voiced" (its hangover): the turn must
    not wait that out on top of the window, nor end before the window's silence."""
    settings = VadSettings(
        aggressiveness=aggressiveness, frame_ms=frame_ms, silence_ms=480, speculative_ms=240
    )
    detector = TurnDetector(settings)
    run(detector, silence(480), noise(900))
    speech_end_ms = detector.position_ms
    heard = {}
    while UtteranceEnded not in heard:
        for event in run(detector, silence(frame_ms), chunk=SAMPLE_RATE * frame_ms // 1000):
            heard[type(event)] = detector.position_ms - speech_end_ms
    hangover = LONGEST_HANGOVER_MS[aggressiveness][frame_ms]
    assert 480 <= heard[UtteranceEnded] < 480 + hangover, heard
    assert 240 <= heard[UtterancePaused] < 240 + hangover, heard


@pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")
@pytest.mark.parametrize("background_db", [12.0, 0.0])
def test_other_talkers_in_the_room_do_not_hold_the_turn_open(background_db: float) -> None:
    """A question with four other voices behind it, 20 dB down, and going on after it:
    they are speech to the voice detector too, but not the caller's."""
    question = rooms.espeak("What is the capital of France?")
    tail = 2 * SAMPLE_RATE
    room = rooms.babble(len(question) + tail) * rooms.active_rms(question) / 10
    room[: len(question)] += question
    detector = TurnDetector(VadSettings(background_db=background_db))
    events = detector.push(rooms.pcm16(room))
    ended = [e for e in events if isinstance(e, UtteranceEnded)]
    if background_db:
        assert len(ended) == 1, "the turn ended when the caller stopped"
        assert ended[0].audio_end_ms < len(question) * 1000 // SAMPLE_RATE + 300
    else:
        assert not ended, "without the gate the room's talkers hold it open"


@pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")
def test_a_caller_who_opens_softly_and_pauses_is_not_taken_for_the_room() -> None:
    """A soft "Um," (8 dB down), a pause, then the question, its second half 9 dB
    quieter than its first: the pause shows no room of talkers began the turn, so the
    caller is held to the usual line (12 dB under their loudest), not to the room's (4
    dB), which ended the turn at the quieter half (Piper's voice: "How many players
    does a soccer?" + "have on the field.")."""
    um = rooms.trimmed(rooms.espeak("Um")) * 10 ** (-8 / 20)
    first = rooms.trimmed(rooms.espeak("How many players"))
    second = rooms.trimmed(rooms.espeak("does a soccer team have on the field?")) * 10 ** (-9 / 20)
    pause = np.zeros(SAMPLE_RATE // 5)
    question = np.concatenate([pause, um, pause, first, second])
    detector = TurnDetector(VadSettings())
    events = detector.push(rooms.pcm16(np.concatenate([question, np.zeros(SAMPLE_RATE)])))
    ended = [e for e in events if isinstance(e, UtteranceEnded)]
    assert len(ended) == 1, [(e.audio_start_ms, e.audio_end_ms) for e in ended]
    assert ended[0].audio_end_ms >= len(question) * 1000 // SAMPLE_RATE - 300
