"""A speakerphone: the agent's reply comes back into the caller's microphone.

    python -m bench.echo              # return loss 6, 10, 15, 20 dB x delay 40, 120, 250 ms
    python -m bench.echo --quick      # 6 and 15 dB at 120 ms

A session with the real turn detection (Silero), the real Whisper and the real Kokoro (an
LLM double gives a long answer) plays its reply on the real paced track. What the track
plays is heard back through a room (decaying taps), `loss` dB down and `delay` ms late,
in real time, as the caller's microphone; the server's echo canceller has only what it
played to go on. For each front end (canceller and echo guard, canceller alone, guard
alone, neither) and condition it prints:

- self-interruptions: the reply held or cut with no one speaking;
- echo turns: utterances of the echo committed as turns, and speech_started events a
  client saw during the reply (the Agents SDK stops playback on those);
- ERLE: how much quieter the canceller made the microphone while the agent spoke;
- barge-in: the caller says "Wait, stop." over the reply, at a caller's level, 2 s in:
  whether it stopped the reply and when its audio stopped for good, from the onset of the
  speech (the target: the confirm window + 100 ms), and whether it was let go on first.

It asserts nothing.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass

import numpy as np

from app.agent.responders import AgentResponder
from app.audio.echo import EchoReference
from app.config import AudioSettings, Settings, SttSettings, TtsSettings, VadSettings
from app.engines import Engines
from app.engines.silero_vad import SileroVad
from app.engines.stt import WhisperSTT
from app.engines.tts import KokoroTTS
from app.observability.counters import InterruptionStats
from app.session import messages as msg
from app.session.session import Session
from bench import quick_run
from bench.latency import percentile
from tests.session.fakes import FakeLLM, MessageLog, Speaker
from tests.support.rooms import active_rms, espeak, pcm16

RATE = 16_000
CHUNK = 320
ANSWER = (
    "Here is the whole story. The knight rode out at dawn, past the river and the mill, "
    "and through the forest where the old oaks grow. She met a farmer, who told her of "
    "a bridge to the north, and she rode on until the evening came."
)
QUESTION = "Please tell me a long story about a brave knight."
INTERRUPTION = "Wait, stop."
TAPS = 0.05  # s of room response
AFTER_S = 2.0  # listened to after the reply ended


@dataclass(frozen=True)
class Front:
    name: str
    cancel: bool
    guard: bool


FRONTS = [
    Front("canceller+guard", True, True),
    Front("canceller", True, False),
    Front("guard", False, True),
    Front("neither", False, False),
]


@dataclass
class Trial:
    held_or_cut: int  # replies paused or cancelled with no one speaking
    echo_turns: int
    speech_started: int  # seen by the client during the reply
    erle_db: float | None
    stopped_after_s: float | None  # barge-in trials: when its audio stopped for good
    stopped: bool
    went_on_first: bool  # held, then let go on, before it stopped for good


class Room:
    """The microphone: the room's copy of what the speaker played, and the caller."""

    def __init__(self, reference: EchoReference, loss_db: float, delay_ms: int) -> None:
        self._reference = reference
        self._gain = 10 ** (-loss_db / 20)
        self._delay = delay_ms / 1000
        rng = np.random.default_rng(3)
        n = int(RATE * TAPS)
        taps = rng.standard_normal(n) * np.exp(-np.arange(n) / (RATE * 0.01))
        taps[0] = 1.0
        self._taps = taps / np.sqrt(np.sum(taps**2))
        self.caller = np.zeros(0)

    def hear(self, now: float) -> bytes:
        played = self._reference.window(now - self._delay, CHUNK + len(self._taps) - 1)
        echo = np.convolve(played.astype(np.float64) / 32768, self._taps, "valid")
        out = echo * self._gain
        if len(self.caller):
            said, self.caller = self.caller[:CHUNK], self.caller[CHUNK:]
            out[: len(said)] += said
        return pcm16(out)


async def one(
    engines: Engines,
    silero: SileroVad,
    front: Front,
    condition: tuple[int, int],
    question: np.ndarray,
    interruption: np.ndarray | None,
) -> Trial:
    """`condition`: (echo return loss in dB, delay in ms)."""
    loss_db, delay_ms = condition
    settings = Settings(
        _env_file=None,
        vad=VadSettings(echo_guard=front.guard),
        audio=AudioSettings(echo_cancellation=front.cancel),
    )
    speaker = Speaker()
    reference = speaker.playout.reference = EchoReference(speaker.playout.rate)
    sent = MessageLog()
    reactions: list[float] = []  # how long the user had spoken when the reply stopped
    stats = InterruptionStats(on_reaction=reactions.append)
    session = Session(
        "sess_test", settings, AgentResponder(engines), speaker, sent.append,
        output_level=speaker.output_level_db, reference=reference, voice_model=silero,
        interruptions=stats,
    )  # fmt: skip
    session.start()
    room = Room(reference, loss_db, delay_ms)
    room.caller = question
    t0 = time.monotonic()
    onset = onset_at = None
    captured = 0  # samples
    try:
        for n in range(int(60 / 0.02)):
            await asyncio.sleep(max(0.0, t0 + n * 0.02 - time.monotonic()))
            # Captured on the caller's clock: after a stall here, what was due arrives at
            # once, as a network delivers what it held back.
            while captured + CHUNK <= (time.monotonic() - t0) * RATE:
                captured += CHUNK
                session.push_audio(room.hear(t0 + captured / RATE))
            voiced = speaker.voiced_times()
            if interruption is not None and onset is None and voiced and \
                    time.monotonic() > voiced[0] + 2.0:  # fmt: skip
                room.caller, onset = interruption, captured * 1000 // RATE
                onset_at = time.monotonic()
            ended = sent.at(msg.ReplyEnded) if sent.of(msg.ReplyEnded) else None
            if ended is not None and time.monotonic() > ended[1] + AFTER_S:
                break  # its echo has died away, and any turn it made has begun
    finally:
        await session.close()
        await speaker.close()
    first_ended = sent.of(msg.ReplyEnded)
    status = first_ended[0].status if first_ended else "none"
    started_during = len(sent.of(msg.SpeechStarted)) - 1 - (onset is not None)
    # In the stream's time, so a busy machine does not lengthen it: from the onset to
    # where the user's speech was found, and then as long as they spoke until the stop.
    # A hold let go on and never taken up again means the reply was cut at the end of the
    # utterance: that cut, on the wall clock (the feed keeps to it), is when it stopped.
    stopped_after_s = None
    went_on_first = stats.resumed > 0
    if onset is not None and reactions and (not went_on_first or stats.paused > stats.resumed):
        found = [m.audio_start_ms for m in sent.of(msg.SpeechStarted) if m.audio_start_ms >= onset]
        if found:
            stopped_after_s = (found[0] - onset) / 1000 + reactions[-1]
    elif onset_at is not None and first_ended and status == "cancelled":
        stopped_after_s = sent.at(msg.ReplyEnded)[1] - onset_at
    quiet_cuts = stats.paused + stats.cancelled if interruption is None else 0
    erle = session._front._canceller.erle_db if session._front._canceller else None  # noqa: SLF001
    return Trial(
        held_or_cut=quiet_cuts,
        echo_turns=len(sent.of(msg.InputCommitted)) - 1 - (onset is not None),
        speech_started=max(0, started_during),
        erle_db=erle,
        stopped_after_s=stopped_after_s,
        stopped=status == "cancelled",
        went_on_first=interruption is not None and went_on_first,
    )


async def run(quick: bool) -> None:
    stt = WhisperSTT(SttSettings())
    tts = KokoroTTS(TtsSettings())
    llm = FakeLLM()
    llm.answer = ANSWER
    llm.delay_s = 0.005
    engines = Engines(stt=stt, llm=llm, tts=tts)
    silero = SileroVad(VadSettings())
    question = espeak(QUESTION)
    # The caller's level: a phone's, about -20 dBFS while speaking.
    caller = espeak(INTERRUPTION, "en-gb")
    caller *= 0.1 / active_rms(caller)
    question *= 0.1 / active_rms(question)
    losses, delays = ([6, 15], [120]) if quick else ([6, 10, 15, 20], [40, 120, 250])
    for front in FRONTS if not quick else FRONTS[:3]:
        print(f"\n## {front.name}", flush=True)
        stops = []
        for loss in losses:
            for delay in delays:
                echo = await one(engines, silero, front, (loss, delay), question, None)
                barge = await one(engines, silero, front, (loss, delay), question, caller)
                erle = f"{echo.erle_db:5.1f} dB" if echo.erle_db is not None else "    -   "
                stop = "MISSED"
                if barge.stopped and barge.stopped_after_s is not None:
                    stops.append(barge.stopped_after_s * 1000)
                    stop = f"stopped {stops[-1]:4.0f} ms in"
                    stop += ", let go on first" if barge.went_on_first else ""
                print(f"  loss {loss:2d} dB, delay {delay:3d} ms: self-interruptions "
                      f"{echo.held_or_cut}, echo turns {echo.echo_turns}, speech_started "
                      f"{echo.speech_started}, ERLE {erle}; barge-in {stop}")  # fmt: skip
        if stops:
            print(f"  barge-in: audio stopped p50 {percentile(stops, 50):.0f} ms, max "
                  f"{max(stops):.0f} ms after the onset")  # fmt: skip
    stt.close()
    tts.close()


def main(argv: list[str] | None = None) -> int:
    asyncio.run(run(quick_run(__doc__, "two conditions", argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
