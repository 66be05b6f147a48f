"""Whisper's accuracy on telephone audio: the same phrases at 16 kHz, band-limited to 8 kHz,
and through a μ-law round trip at 8 kHz, as a phone call or a Twilio stream carries them.

    python -m bench.telephone

Speech is espeak-ng's; transcription is the server's own STT engine and settings (Whisper
tiny.en by default). Prints each phrase's word error rate per condition and the means.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from app.audio import g711
from app.audio.resample import Resampler
from app.config import Settings
from app.engines.stt import WhisperSTT
from bench import machine
from bench.latency import PROMPTS
from tests.support.speech import QUESTION, speak_to_wav, word_error_rate

PHRASES = [
    QUESTION,
    *PROMPTS,
    "Press one to talk to sales, or two for support.",
    "My account number is four five six seven eight.",
    "I would like to book a table for two at seven tonight.",
    "Can you send the invoice to my email address?",
]
SOURCE_RATE = 48_000  # what speak_to_wav writes


def resample(samples: bytes | np.ndarray, source: int, target: int) -> bytes:
    resampler = Resampler(target)
    if isinstance(samples, bytes):
        samples = np.frombuffer(samples, dtype=np.int16)
    return resampler.pcm(samples, source) + resampler.flush()


def wideband(speech: np.ndarray) -> bytes:
    return resample(speech, SOURCE_RATE, 16_000)


def narrowband(speech: np.ndarray) -> bytes:
    return resample(resample(speech, SOURCE_RATE, 8_000), 8_000, 16_000)


def ulaw_call(speech: np.ndarray) -> bytes:
    phone = g711.decode(g711.encode(resample(speech, SOURCE_RATE, 8_000), "ulaw"), "ulaw")
    return resample(phone, 8_000, 16_000)


CONDITIONS: dict[str, Callable[[np.ndarray], bytes]] = {
    "16 kHz": wideband,
    "8 kHz": narrowband,
    "8 kHz μ-law": ulaw_call,
}


async def measure() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    stt = WhisperSTT(settings.stt)
    folder = Path(tempfile.mkdtemp(prefix="telephone-"))
    rates: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    seconds: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    print(machine())
    print(f"stt: {stt.model_name}")
    for i, phrase in enumerate(PHRASES):
        speech = speak_to_wav(phrase, folder / f"phrase{i}.wav", lead_silence_s=0.2)
        print(f"\n{phrase}")
        for name, channel in CONDITIONS.items():
            started = time.perf_counter()
            heard = (await stt.transcribe(channel(speech))).text
            seconds[name].append(time.perf_counter() - started)
            rates[name].append(word_error_rate(phrase, heard))
            print(f"  {name:12s} WER {rates[name][-1]:.2f}  {heard.strip()!r}")
    print("\ncondition     mean WER  phrases heard exactly  STT ms p50")
    for name in CONDITIONS:
        exact = sum(rate == 0 for rate in rates[name])
        print(
            f"{name:12s} {statistics.mean(rates[name]):9.3f} {exact:>10d} of {len(PHRASES)}"
            f" {statistics.median(seconds[name]) * 1000:14.0f}"
        )


def main() -> int:
    asyncio.run(measure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
