"""Silero VAD (from the pipecat-ai wheel) on espeak-ng speech and on noise made in code."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from pydantic import ValidationError

from app.audio.vad import SAMPLE_RATE, TurnDetector, UtteranceEnded, UtteranceStarted
from app.cli import settings_from_args
from app.config import Settings, VadSettings
from app.engines.silero_vad import SileroVad
from app.errors import EngineError
from app.runtime import Runtime
from tests.support.rooms import active_rms, babble, espeak, mixed, pcm16, pink_noise
from tests.support.speech import QUESTION, have_espeak

FRAME = SAMPLE_RATE * 20 // 1000 * 2  # bytes in 20 ms


@pytest.fixture(scope="module")
def model() -> SileroVad:
    return SileroVad(VadSettings())


@pytest.fixture(scope="module")
def question() -> np.ndarray:
    """QUESTION after 1 s of silence, 2 s of silence after it (16 kHz, -1..1)."""
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    return np.concatenate([np.zeros(SAMPLE_RATE), espeak(QUESTION), np.zeros(2 * SAMPLE_RATE)])


def speech_end_ms(samples: np.ndarray) -> int:
    """Where the speech stops: the end of its last 20 ms frame within 40 dB of its loudest."""
    frames = samples[: len(samples) // 320 * 320].reshape(-1, 320)
    power = np.mean(frames**2, axis=1)
    return (int(np.nonzero(power > power.max() / 10_000)[0][-1]) + 1) * 20


def frames_heard(model: SileroVad, samples: np.ndarray) -> np.ndarray:
    detector, pcm = model.detector(), pcm16(samples)
    return np.array([detector.is_speech(pcm[i : i + FRAME]) for i in range(0, len(pcm), FRAME)])


def test_speech_is_heard_and_the_silence_around_it_is_not(
    model: SileroVad, question: np.ndarray
) -> None:
    heard = frames_heard(model, question)
    voiced_ms = np.nonzero(heard)[0] * 20
    assert heard.sum() * 20 > 1000, "most of the 2 s question"
    assert voiced_ms[0] >= 1000, "nothing in the silence before"
    assert voiced_ms[-1] <= speech_end_ms(question) + 200, "nor long after"


@pytest.mark.parametrize("dbfs", [-40, -25, -10])
def test_pink_noise_alone_is_no_speech(model: SileroVad, dbfs: float) -> None:
    noise = pink_noise(5 * SAMPLE_RATE) * 10 ** (dbfs / 20)
    assert not frames_heard(model, noise).any()


@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_a_question_in_pink_noise_at_5_db_is_one_utterance(
    model: SileroVad, question: np.ndarray, frame_ms: int
) -> None:
    # 5 dB SNR: webrtcvad misses some questions at this level (vad.detector).
    audio = pcm16(mixed(question, pink_noise(len(question)), snr_db=5))
    settings = VadSettings(frame_ms=frame_ms, silence_ms=600, speculative_ms=0)
    detector = TurnDetector(settings, voice=model.detector())
    events = [
        event for i in range(0, len(audio), FRAME) for event in detector.push(audio[i : i + FRAME])
    ]
    assert [type(event) for event in events] == [UtteranceStarted, UtteranceEnded]
    ended = events[1]
    assert isinstance(ended, UtteranceEnded) and not ended.forced
    assert 1000 <= ended.audio_start_ms <= 1200
    assert ended.silence_ms == 600
    # Its hangover is counted in at its least; in noise its "unvoiced" comes later
    # (~170 ms after the speech at 5 dB here), so a turn ends late rather than early.
    end_ms = speech_end_ms(question)
    assert end_ms - 40 <= ended.audio_end_ms <= end_ms + 250


def turns(model: SileroVad, samples: np.ndarray) -> list[UtteranceEnded]:
    detector = TurnDetector(VadSettings(), voice=model.detector())
    return [e for e in detector.push(pcm16(samples)) if isinstance(e, UtteranceEnded)]


@pytest.mark.parametrize("room_db", [10, 5])
def test_a_room_of_talkers_under_the_caller_does_not_hold_the_turn_open(
    model: SileroVad, question: np.ndarray, room_db: int
) -> None:
    """Four other voices, talking before the question, through it and after it: the
    turn begins on them, and ends when the caller stops."""
    spoken = question[SAMPLE_RATE : -2 * SAMPLE_RATE]
    room = babble(len(question)) * active_rms(spoken) / 10 ** (room_db / 20) + question
    ended = turns(model, room)
    assert ended, "the room's talkers held the turn open"
    end_ms = speech_end_ms(question)
    assert end_ms - 40 <= ended[0].audio_end_ms <= end_ms + 300
    assert not ended[0].forced


@pytest.mark.parametrize(
    ("opening_db", "rest_db"), [(-12, 0), (-8, 0), (0, -6)], ids=["soft-12", "soft-8", "quieter"]
)
def test_a_caller_who_begins_softly_or_goes_on_quieter_is_not_cut_off(
    model: SileroVad, question: np.ndarray, opening_db: float, rest_db: float
) -> None:
    """What tells the room from the caller is loudness, and callers' own loudness moves:
    a soft start is no room of talkers, nor is a caller turning from the microphone."""
    start, end = SAMPLE_RATE, len(question) - 2 * SAMPLE_RATE
    split = start + (end - start) * 3 // 10
    caller = question.copy()
    caller[start:split] *= 10 ** (opening_db / 20)
    caller[split:] *= 10 ** (rest_db / 20)
    ended = turns(model, caller)
    assert len(ended) == 1, "one turn, not cut in two"
    assert ended[0].audio_end_ms >= speech_end_ms(question) - 40


def test_a_reset_detector_hears_as_a_new_one(model: SileroVad, question: np.ndarray) -> None:
    detector, pcm = model.detector(), pcm16(question)
    first = [detector.is_speech(pcm[i : i + FRAME]) for i in range(0, len(pcm), FRAME)]
    detector.reset()
    again = [detector.is_speech(pcm[i : i + FRAME]) for i in range(0, len(pcm), FRAME)]
    assert again == first


def test_a_missing_model_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match="cannot load the Silero VAD model"):
        SileroVad(VadSettings(silero_model_path="/nonexistent/silero_vad.onnx"))


def test_silero_is_the_default_and_webrtcvad_a_choice() -> None:
    assert VadSettings().detector == "silero"
    assert settings_from_args(["--vad-detector", "webrtcvad"]).vad.detector == "webrtcvad"
    with pytest.raises(ValidationError):
        VadSettings(detector="rnnoise")  # type: ignore[arg-type]


async def test_calls_fall_back_to_webrtcvad_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, agent="echo", vad=VadSettings(silero_model_path="/nonexistent.onnx")
    )
    runtime = Runtime(settings)
    with caplog.at_level(logging.WARNING, logger="app.runtime"):
        await runtime.load()
    try:
        assert runtime.responder is not None, "calls are still taken"
        assert runtime.voice_model is None and runtime.vad == "webrtcvad"
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "webrtcvad" in warnings[0].getMessage()
    finally:
        await runtime.close()


async def test_the_default_runtime_uses_silero() -> None:
    runtime = Runtime(Settings(_env_file=None, agent="echo"))  # type: ignore[call-arg]
    await runtime.load()
    try:
        assert runtime.vad == "silero"
    finally:
        await runtime.close()
