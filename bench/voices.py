"""Which bundled Kokoro voice a listener understands best in English: each voice says 24
sentences an agent says, and the server's Whisper (tiny.en) writes down what it hears.

    python -m bench.voices                        # every voice in the voices file
    python -m bench.voices --voices jf_alpha jf_tebukuro --show-wrong
    python -m bench.voices --speed 1.5                # faster speech
    python -m bench.voices --graph shipped            # Kokoro's file as shipped

Prints each voice's word error rate (numbers count as the same word written either
way: "4" is "four") and the seconds of synthesis per second of audio. It asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time

import numpy as np
from faster_whisper import WhisperModel
from num2words import num2words

from app.config import TtsSettings
from app.engines.stt import bundled_model_path
from app.engines.tts import KokoroTTS
from bench import machine
from tests.support.speech import transcribe, word_error_rate

SENTENCES = [
    "The capital of France is Paris.",
    "Frozen water is called ice.",
    "A spider has eight legs.",
    "Bees make honey.",
    "There are seven days in a week.",
    "Two plus two is four.",
    "If today is Monday, tomorrow is Tuesday.",
    "The capital of Japan is Tokyo.",
    "There are sixty minutes in an hour.",
    "The sky is blue on a clear day.",
    "Please call me back tomorrow morning about the new contract.",
    "I turned on the kitchen lights for you.",
    "Sorry, I can't make coffee, but I can help you find a recipe.",
    "Your appointment is on Thursday at three in the afternoon.",
    "It is sunny in Berlin today, with a high of twenty degrees.",
    "Sure, I'd be happy to help with that.",
    "William Shakespeare wrote Romeo and Juliet.",
    "The Pacific is the largest ocean on Earth.",
    "A kilogram has one thousand grams.",
    "Good morning! How can I help you today?",
    "Why did the scarecrow win an award? Because he was outstanding in his field.",
    "I have set a timer for ten minutes.",
    "The train to the airport leaves every fifteen minutes.",
    "You're welcome, have a nice day.",
]


def spelled(text: str) -> str:
    """Numbers as words, so "60" and "sixty" are one word to the error rate, as are
    "$20" and "twenty dollars", "15%" and "fifteen percent", "1st" and "first"."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.replace("%", " percent"))
    text = re.sub(r"\$(\d+)", r"\1 dollars", text)
    text = re.sub(r"(\d+)(?:st|nd|rd|th)\b", lambda m: num2words(int(m[1]), to="ordinal"), text)
    return re.sub(r"\d+", lambda m: num2words(int(m.group())), text).replace("-", " ")


async def measure(
    tts: KokoroTTS, whisper: WhisperModel, voice: str, speed: float, show_wrong: bool
) -> None:
    errors, rtfs, wrong = [], [], []
    for sentence in SENTENCES:
        started = time.perf_counter()
        speech = await tts.synthesize(sentence, voice=voice, speed=speed)
        rtfs.append((time.perf_counter() - started) / speech.duration_s)
        samples = (np.clip(speech.samples, -1, 1) * 32767).astype(np.int16)
        heard = transcribe(whisper, samples, speech.rate)
        error = word_error_rate(spelled(sentence), spelled(heard))
        errors.append(error)
        if error:
            wrong.append(heard.strip())
    print(f"{voice:14s} WER {statistics.mean(errors):.3f}  wrong sentences {len(wrong):2d}/"
          f"{len(SENTENCES)}  RTF {statistics.median(rtfs):.2f}")  # fmt: skip
    for heard in wrong if show_wrong else []:
        print(f"    heard: {heard!r}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--voices", nargs="*", help="voices to measure (default: all)")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--show-wrong", action="store_true")
    parser.add_argument("--graph", choices=["matmul", "shipped"], default="matmul",
                        help="tts.graph: rewritten, or the file as shipped")  # fmt: skip
    args = parser.parse_args()
    print(machine())
    whisper = WhisperModel(bundled_model_path(), device="cpu", compute_type="int8")
    tts = KokoroTTS(TtsSettings(graph=args.graph))
    print(f"tts.graph {args.graph}")
    try:
        for voice in args.voices or tts.voices:
            await measure(tts, whisper, voice, args.speed, args.show_wrong)
    finally:
        tts.close()


if __name__ == "__main__":
    asyncio.run(main())
