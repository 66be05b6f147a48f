"""Which bundled Whisper hears English callers best: tiny.en (the default for English)
against the multilingual base told the language is English, on 15 questions in ten
espeak-ng voices, clean and under pink noise and babble at 10 dB SNR.

    python -m bench.stt_english

Each question is transcribed whole through the server's own WhisperSTT (its beam, its
window); it prints each model's word error rate per condition and the median seconds
per utterance. It asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import numpy as np

from app.config import SttSettings
from app.engines.stt import WhisperSTT
from app.engines.whisper_models import multilingual_model_path
from bench import machine
from bench.noise import QUESTIONS
from tests.support.rooms import babble, espeak, mixed, pcm16, pink_noise, trimmed
from tests.support.speech import word_error_rate

MORE = [
    ("en-us", "Please turn on the lights in the kitchen."),
    ("en-gb", "Set a timer for ten minutes."),
    ("en-us+m3", "How many days are there in a week?"),
    ("en+f2", "Remind me to call my mother tonight."),
    ("en-us+f4", "What is two plus two?"),
]
SNR_DB = 10
LEAD = 8_000  # 0.5 s of the noise before the question, as a caller's line has


async def measure(name: str, settings: SttSettings, clips: dict[str, list[np.ndarray]]) -> None:
    stt = await asyncio.to_thread(WhisperSTT, settings)
    texts = [text for _, text in QUESTIONS + MORE]
    times: list[float] = []
    line = f"{name:28s}"
    try:
        for condition, audio in clips.items():
            errors = []
            for text, samples in zip(texts, audio, strict=True):
                started = time.perf_counter()
                heard = await stt.transcribe(pcm16(samples))
                times.append(time.perf_counter() - started)
                errors.append(word_error_rate(text, heard.text))
            line += f"  {condition} {statistics.mean(errors):.3f}"
    finally:
        stt.close()
    print(f"{line}  ({statistics.median(times):.2f} s per utterance)")


async def main() -> None:
    print(machine())
    speech = [trimmed(espeak(text, voice)) for voice, text in QUESTIONS + MORE]
    longest = max(len(s) for s in speech) + 2 * LEAD
    noises = {"pink": pink_noise(longest), "babble": babble(longest)}

    def under(noise: np.ndarray, s: np.ndarray) -> np.ndarray:
        padded = np.concatenate([np.zeros(LEAD, np.float32), s, np.zeros(LEAD, np.float32)])
        return mixed(padded, noise[: len(padded)], SNR_DB)

    clips = {"clean": speech}
    clips.update({f"{k} {SNR_DB} dB": [under(n, s) for s in speech] for k, n in noises.items()})
    print(f"{len(speech)} questions; word error rate clean, pink and babble at {SNR_DB} dB")
    await measure("Whisper tiny.en", SttSettings(), clips)
    base = SttSettings(model=multilingual_model_path(), language="en")
    await measure("Whisper base, told English", base, clips)


if __name__ == "__main__":
    asyncio.run(main())
