"""The echo canceller against audio made here: the agent's voice played on a pacing
clock, heard back through a room at a set loss and delay, with the caller's own speech
over it. The clock is simulated, so arrivals, jitter and gaps are exact."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.echo import RATE, EchoCanceller, EchoReference
from tests.support.rooms import echo, espeak, pcm16
from tests.support.speech import have_espeak

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

CHUNK = 320  # 20 ms, as transports deliver it


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def level_db(samples: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(samples.astype(np.float64) ** 2) + 1e-9))


@pytest.fixture(scope="module")
def agent_voice() -> np.ndarray:
    text = "Here is a long answer about the weather in Paris, which is mild in spring."
    return np.concatenate([espeak(text), espeak("And the rivers are calm in the autumn.")])


def run_call(
    voice: np.ndarray,
    near: np.ndarray,
    *,
    rate: int = RATE,
    jitter_ms: float = 0.0,
    gap_at_s: float | None = None,
    stall_at_s: float | None = None,
    judged: list[bytes] | None = None,
) -> np.ndarray:
    """Play `voice` (at 16 kHz, resampled to `rate` for the playout) on a simulated
    20 ms pacing clock while `near` (what the caller's microphone picked up, at 16 kHz,
    sample-aligned with the playout) arrives; returns the canceller's output (and puts
    what the voice detector is to hear in `judged`)."""
    clock = Clock()
    reference = EchoReference(rate, now=clock)
    canceller = EchoCanceller(reference, now=clock)
    played = np.frombuffer(pcm16(voice), np.int16)
    if rate != RATE:
        played = np.interp(
            np.arange(len(played) * rate // RATE) * RATE / rate, np.arange(len(played)), played
        ).astype(np.int16)
    frame = rate // 50
    rng = np.random.default_rng(5)
    out = []
    t0 = clock.t
    near16 = np.frombuffer(pcm16(near), np.int16)
    for n in range(len(near16) // CHUNK):
        due = t0 + n * 0.02
        clock.t = due
        piece = played[n * frame : (n + 1) * frame]
        if len(piece):
            reference.played(piece.tobytes(), due)
        # The caller's 20 ms arrives after it was captured, a little jittered.
        clock.t = due + 0.02 + abs(rng.normal(0, jitter_ms / 1000))
        if gap_at_s is not None and gap_at_s <= n * 0.02 < gap_at_s + 0.5:
            continue  # silence suppression: nothing arrives for half a second
        if stall_at_s is not None and stall_at_s <= n * 0.02 < stall_at_s + 0.4:
            clock.t = t0 + stall_at_s + 0.42  # the network held it back: all at once
        cancelled, for_detector = canceller.process(near16[n * CHUNK : (n + 1) * CHUNK].tobytes())
        out.append(cancelled)
        if judged is not None:
            judged.append(for_detector)
    return np.frombuffer(b"".join(out), np.int16)


@pytest.mark.parametrize("delay_ms", [40, 250])
def test_the_agents_echo_is_taken_out_of_what_the_caller_sends(
    agent_voice: np.ndarray, delay_ms: int
) -> None:
    heard = echo(agent_voice, loss_db=6, delay_ms=delay_ms)[: len(agent_voice)]
    out = run_call(agent_voice, heard, jitter_ms=5)
    settled = slice(2 * RATE, len(out))  # AEC3 converges within the first seconds
    erle = level_db(np.frombuffer(pcm16(heard), np.int16)[settled]) - level_db(out[settled])
    assert erle > 20, f"echo only {erle:.1f} dB quieter"


def test_the_caller_talking_over_the_echo_is_kept(agent_voice: np.ndarray) -> None:
    caller = np.zeros(len(agent_voice))
    words = espeak("Wait, stop, I have a question.", voice="en-gb")
    at = 3 * RATE
    caller[at : at + len(words)] = words
    heard = echo(agent_voice, loss_db=6, delay_ms=120)[: len(agent_voice)] + caller
    out = run_call(agent_voice, heard)
    span = slice(at, at + len(words))
    kept = level_db(out[span]) - level_db(np.frombuffer(pcm16(caller), np.int16)[span])
    assert kept > -6, f"the caller's speech lost {-kept:.1f} dB"


def test_the_voice_detector_hears_the_caller_whole_and_the_echo_cancelled(
    agent_voice: np.ndarray,
) -> None:
    caller = np.zeros(len(agent_voice))
    words = espeak("Wait, stop, I have a question.", voice="en-gb")
    at = 3 * RATE
    caller[at : at + len(words)] = words
    room = echo(agent_voice, loss_db=6, delay_ms=120)[: len(agent_voice)]
    pieces: list[bytes] = []
    run_call(agent_voice, room + caller, judged=pieces)
    judged = np.frombuffer(b"".join(pieces), np.int16)
    mic = np.frombuffer(pcm16(room + caller), np.int16)
    span, alone = slice(at, at + len(words)), slice(2 * RATE, at)
    # Over the caller's words the detector hears mostly the microphone itself, unchopped.
    loud = np.abs(words) > 0.05
    kept = np.flatnonzero(loud) + at
    assert np.mean(judged[kept] == mic[kept]) > 0.7
    assert level_db(judged[span]) > level_db(mic[span]) - 2
    # Before them, only the echo: the detector hears it cancelled.
    assert level_db(judged[alone]) < level_db(mic[alone]) - 20


def test_on_a_line_without_echo_a_caller_over_the_first_reply_is_untouched(
    agent_voice: np.ndarray,
) -> None:
    """AEC3 has not found an echo path in the first second, and would take the caller
    down as if they were echo: with no echo coming back, its output is not used."""
    caller = np.zeros(len(agent_voice))
    words = espeak("Wait, stop, I have a question.", voice="en-gb")
    at = RATE * 3 // 2  # before AEC3 has had 2 s of the agent's voice
    caller[at : at + len(words)] = words
    pieces: list[bytes] = []
    out = run_call(agent_voice, caller, judged=pieces)
    judged = np.frombuffer(b"".join(pieces), np.int16)
    mic = np.frombuffer(pcm16(caller), np.int16)[: len(out)]
    span = slice(at, at + len(words))
    assert np.array_equal(out[span], mic[span])
    assert np.array_equal(judged[span], mic[span])


def test_a_reference_at_the_phones_rate_and_a_gap_in_the_stream(
    agent_voice: np.ndarray,
) -> None:
    heard = echo(agent_voice, loss_db=10, delay_ms=120)[: len(agent_voice)]
    out = run_call(agent_voice, heard, rate=8_000, gap_at_s=1.0)
    tail = slice(len(out) - 2 * RATE, len(out))
    reference = np.frombuffer(pcm16(heard), np.int16)[-len(out) :]
    assert level_db(reference[tail]) - level_db(out[tail]) > 15


def test_a_burst_after_a_stall_does_not_move_the_echo_path(agent_voice: np.ndarray) -> None:
    heard = echo(agent_voice, loss_db=6, delay_ms=120)[: len(agent_voice)]
    out = run_call(agent_voice, heard, stall_at_s=3.0)
    after = slice(int(3.5 * RATE), len(out))
    reference = np.frombuffer(pcm16(heard), np.int16)
    assert level_db(reference[after]) - level_db(out[after]) > 20


def test_audio_cleared_before_it_played_is_no_reference() -> None:
    clock = Clock()
    reference = EchoReference(RATE, now=clock)
    reference.played(np.full(RATE, 1000, np.int16).tobytes(), clock.t)
    reference.forget_after(clock.t + 0.5)
    assert reference.window(clock.t + 0.5, 800).all()
    assert not reference.window(clock.t + 1.0, 800).any()


def test_a_canceller_that_raises_passes_audio_through_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    canceller = EchoCanceller(EchoReference(RATE, now=clock), now=clock)

    class Broken:
        def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
            raise RuntimeError("bad frame")

    canceller._aec = Broken()  # noqa: SLF001 - a fault injected where it would happen
    audio = np.arange(CHUNK, dtype=np.int16).tobytes()
    assert canceller.process(audio) == (audio, audio)
    assert canceller.process(audio) == (audio, audio)
    assert [r.message for r in caplog.records].count(
        "echo cancellation failed; this call goes on without it"
    ) == 1
