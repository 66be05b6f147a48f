"""End of turn: server_vad (silence) against semantic_vad (Smart Turn v3.2), on espeak-ng speech.

    python -m bench.turns

Feeds each recording in real time, 20 ms at a time, to the session's turn taking
with the real turn model, and prints:
- for finished questions, how long after the last word the turn ended (p50/p95);
- for phrases with a hesitation in the middle ("I want to ... order a pizza"),
  how often the turn was cut at the hesitation;
- how often a reply would be begun speculatively, and how often that work is thrown
  away because the user went on (as the session counts it in /v1/stats);
- how long the turn model takes to answer.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

from app.audio.vad import UtteranceEnded
from app.config import Settings, TurnSettings
from app.engines.silero_vad import SileroVad
from app.engines.smart_turn import SmartTurn
from app.session.listening.turn_taking import TurnCallbacks, TurnTaking
from app.session.options import OptionChanges, SessionOptions, TurnDetectionChange
from app.vocab.speech import TurnModel, VoiceModel
from bench import machine
from bench.latency import percentile
from clients import load_wav
from tests.support.speech import speak_to_wav

FINISHED = [
    "What is the capital of France?",
    "Please turn on the lights in the kitchen.",
    "Can you tell me a joke?",
    "Set a timer for ten minutes.",
    "How do I make pancakes?",
    "Where is the nearest train station?",
    "What is the weather like tomorrow?",
    "Thank you, that is all.",
]
# (before the hesitation, after it): one turn, with a pause in the middle.
HESITANT = [
    ("I want to", "order a pizza."),
    ("So what I was thinking is", "we could go tomorrow."),
    ("Let me think, um", "maybe the blue one."),
    ("Could you please", "call my mother?"),
    ("The thing is that", "I lost my keys."),
    ("And then I went to the", "market."),
]
PAUSE_S = 0.8
FRAME = 320  # 20 ms at 16 kHz
VOICED = 300  # s16 peak that counts as speech in the recording


def modes(settings: Settings) -> dict[str, SessionOptions]:
    base = SessionOptions.from_settings(settings)
    semantic = {
        name: base.changed(
            OptionChanges(turn_detection=TurnDetectionChange(semantic=True, eagerness=name)),
            voices=(),
            base_vad=settings.vad,
        )
        for name in ("auto", "high")
    }
    return {"server_vad (500 ms)": base, **{f"semantic_vad {k}": v for k, v in semantic.items()}}


def recording(folder: Path, *parts: str) -> tuple[np.ndarray, float]:
    """16 kHz speech of `parts` with PAUSE_S between them, 1 s of silence after;
    and where the last word ends, in seconds."""
    pieces = []
    for n, text in enumerate(parts):
        wav = folder / f"{abs(hash(text))}.wav"
        speak_to_wav(text, wav, lead_silence_s=0.5 if n == 0 else PAUSE_S)
        pieces.append(load_wav(str(wav), rate=16_000))
    audio = np.concatenate([*pieces, np.zeros(16_000 * 5, dtype=np.int16)])
    voiced = np.nonzero(np.abs(audio) > VOICED)[0]
    return audio, (voiced[-1] + 1) / 16_000


async def play(turns: TurnTaking, audio: np.ndarray, stop_s: float) -> None:
    """Real-time playback, up to `stop_s` into the recording."""
    start = time.monotonic()
    for offset in range(0, len(audio), FRAME):
        at = offset / 16_000
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))
        turns.push(audio[offset : offset + FRAME].tobytes(), interruptible=False)
        if at > stop_s:
            return


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    settings = Settings()
    model = SmartTurn(TurnSettings())
    silero = SileroVad(settings.vad)
    asked_ms: list[float] = []
    timed = Timed(model, asked_ms)
    print(machine())
    with tempfile.TemporaryDirectory() as folder:
        finished = [recording(Path(folder), text) for text in FINISHED]
        hesitant = [recording(Path(folder), *parts) for parts in HESITANT]
        for name, options in modes(settings).items():
            delays: list[float] = []
            speculation = Speculation()
            for audio, last_word_s in finished:
                ends = await turn_ends(
                    settings, options, (timed, silero), audio, last_word_s + 4.5, speculation
                )
                if ends:
                    delays.append((ends[0] - last_word_s) * 1000)
            cut = 0
            for audio, last_word_s in hesitant:
                ends = await turn_ends(
                    settings, options, (timed, silero), audio, last_word_s + 4.5, speculation
                )
                cut += bool(ends) and ends[0] < last_word_s - 0.3
            print(
                f"{name:22s} finished: end of turn {percentile(delays, 50):5.0f} ms p50, "
                f"{percentile(delays, 95):5.0f} p95 after the last word ({len(delays)} of "
                f"{len(finished)}) | hesitant: cut at the pause {cut} of {len(hesitant)} | "
                f"speculative replies: {speculation.started} begun, {speculation.dropped} "
                "thrown away"
            )
    print(
        f"turn model: {percentile(asked_ms, 50):.0f} ms p50, {percentile(asked_ms, 95):.0f} "
        f"p95 per question ({len(asked_ms)} questions)"
    )
    model.close()


class Speculation:
    """What the session would do with its speculative replies: one at a time, begun at a
    pause, thrown away when the user speaks on, kept when the turn ends."""

    def __init__(self) -> None:
        self.started = self.dropped = 0
        self._outstanding = False

    def paused(self, _audio: bytes) -> None:
        if not self._outstanding:
            self._outstanding = True
            self.started += 1

    def resumed(self) -> None:
        if self._outstanding:
            self._outstanding = False
            self.dropped += 1

    def ended(self) -> None:
        self._outstanding = False


async def turn_ends(
    settings: Settings,
    options: SessionOptions,
    models: tuple[TurnModel, VoiceModel],
    audio: np.ndarray,
    stop_s: float,
    speculation: Speculation,
) -> list[float]:
    ends: list[float] = []
    clock = {"start": 0.0}

    def ended(event: UtteranceEnded) -> None:
        ends.append(time.monotonic() - clock["start"])
        speculation.ended()

    def ignore(*_: object) -> None:
        return None

    callbacks = TurnCallbacks(
        started=ignore,
        paused=speculation.paused,
        resumed=speculation.resumed,
        ended=ended,
        interrupted=ignore,
    )
    model, voice = models
    turns = TurnTaking("bench", settings, callbacks, model, voice, output_level=None)
    turns.configure(options)
    clock["start"] = time.monotonic()
    await play(turns, audio, stop_s)
    await turns.close()
    return ends


class Timed:
    """The turn model, timing each answer."""

    def __init__(self, model: SmartTurn, asked_ms: list[float]) -> None:
        self._model = model
        self._asked_ms = asked_ms

    async def complete(self, pcm16k: bytes) -> float:
        started = time.perf_counter()
        probability = await self._model.complete(pcm16k)
        self._asked_ms.append((time.perf_counter() - started) * 1000)
        return probability

    def close(self) -> None:
        self._model.close()


if __name__ == "__main__":
    asyncio.run(main())
