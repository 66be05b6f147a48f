"""Kokoro's first audio inside the server: how long the reply's first clause takes to
synthesize, for each engine variant, and whether Whisper still hears its words.

    python -m bench.tts                               # every optimization level, 2 threads
    python -m bench.tts --optimization all extended --threads 1 2
    python -m bench.tts --optimization extended --first-words 2 3 4
    python -m bench.tts --optimization extended --graph shipped matmul

Each variant is the server's own KokoroTTS (the Gate, the urgent priority, the settings)
built afresh; each clause is synthesized --runs times after a warm-up and the median
taken. "first clause" is the four-word openings a reply starts with (or their first
--first-words words, as a shorter first piece would be cut); "RTF" is synthesis
time over audio length on a 20-word sentence. "WER" is the server's Whisper on every
clause and sentence the variant spoke. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np

from app.audio.resample import Resampler
from app.config import Settings, TtsSettings
from app.engines.stt import WhisperSTT
from app.engines.tts import KOKORO_RATE, OPTIMIZATION, KokoroTTS
from bench import machine
from tests.support.speech import word_error_rate

FIRST_CLAUSES = [
    "Paris is the capital.",
    "Sure, I can help.",
    "The meeting starts tomorrow.",
    "Your order has shipped.",
]
SENTENCE = (
    "The train to the airport leaves every fifteen minutes from the central station, "
    "and the ride takes about half an hour."
)


async def variant(
    settings: TtsSettings, stt: WhisperSTT, runs: int, first_words: int
) -> tuple[float, float, float]:
    """(first clause ms p50, RTF on the sentence, mean WER)."""
    tts = await asyncio.to_thread(KokoroTTS, settings)
    firsts_said = [" ".join(text.split()[:first_words]) for text in FIRST_CLAUSES]
    try:
        firsts, errors = [], []
        for text in [*firsts_said, SENTENCE]:
            await tts.synthesize(text, urgent=True)  # warm-up for this length
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                speech = await tts.synthesize(text, urgent=True)
                times.append(time.perf_counter() - started)
            if text == SENTENCE:
                rtf = statistics.median(times) / speech.duration_s
            else:
                firsts.append(statistics.median(times) * 1000)
            pcm = (np.clip(speech.samples, -1, 1) * 32767).astype(np.int16)
            heard = await stt.transcribe(Resampler(16_000).pcm(pcm, KOKORO_RATE))
            errors.append(word_error_rate(text, heard.text))
        return statistics.median(firsts), rtf, statistics.mean(errors)
    finally:
        tts.close()


async def measure(args: argparse.Namespace) -> None:
    base = Settings(_env_file=None)  # type: ignore[call-arg]
    stt = WhisperSTT(base.stt)
    print(machine())
    print(f"voice {base.tts.voice}; {args.runs} runs a clause, median")
    print("graph    optimization  threads  first words  first clause ms p50  RTF (20 words)  WER")
    for graph in args.graph:
        for level in args.optimization:
            for threads in args.threads:
                for words in args.first_words:
                    update = {"graph": graph, "optimization": level, "threads": threads}
                    settings = base.tts.model_copy(update=update)
                    first, rtf, wer = await variant(settings, stt, args.runs, words)
                    print(
                        f"{graph:8s} {level:12s} {threads:>8d} {words:>12d} {first:>20.0f} "
                        f"{rtf:>15.2f} {wer:>5.2f}"
                    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--optimization", nargs="+", default=list(OPTIMIZATION),
                        choices=list(OPTIMIZATION))  # fmt: skip
    parser.add_argument("--graph", nargs="+", default=["matmul"], choices=["matmul", "shipped"])
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--first-words", type=int, nargs="+", default=[4])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(measure(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
