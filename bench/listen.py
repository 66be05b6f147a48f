"""What a reply sounds like with each first-piece length, as this machine would play it.

    python -m bench.listen                          # 2, 3 and 4 words; WAVs in bench/results/listen
    python -m bench.listen --first-words 2 4 --out /tmp/listen

A shorter first piece is heard sooner, but Kokoro speaks each piece as a whole
utterance, and the next piece is synthesized while the first plays: if that takes
longer than the first piece lasts, the reply stops mid-sentence until it is ready.
For each reply text and first-piece length this cuts the text as the server does
(ClauseChunker), synthesizes the pieces one after another with the server's own
KokoroTTS, and lays them on the timeline they would play on: each piece starts when
the one before has ended or when it is ready, whichever is later. It writes that
timeline as a WAV (and the reply synthesized whole, for reference), and prints the
first audio, the longest gap inside the reply and what Whisper hears. Each length is
played twice: its first piece made whole, then in parts as the server makes it (the
`s` rows, tts.stream_first). It asserts nothing: whether a piece boundary sounds right
is a listener's call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import wave
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.agent.chunker import ClauseChunker
from app.audio.resample import Resampler
from app.config import Settings
from app.engines.stt import WhisperSTT
from app.engines.tts import KOKORO_RATE, KokoroTTS, StreamingTextToSpeech, TextToSpeech
from app.vocab.speech import Speech
from bench import machine
from tests.support.speech import word_error_rate

# Replies as SmolLM2 gives them to the questions bench.latency asks, and longer ones.
REPLIES = [
    "The capital of France is Paris, a city known for its art and its food.",
    "The moon is about three hundred and eighty thousand kilometres away from the Earth.",
    "I'm doing well, thank you for asking. How can I help you today?",
    "The sky is blue because the air scatters blue light more than red light.",
    "Sure, I can turn on the kitchen lights for you right now.",
]


@dataclass
class Heard:
    first_audio_ms: float  # the first piece's synthesis: when the reply starts playing
    longest_gap_ms: float  # silence inside the reply while a piece was not ready
    seconds: float
    wer: float
    pieces: list[str]


def pieces_of(text: str, first_words: int) -> list[str]:
    """The pieces the server cuts `text` into, its words arriving one by one, before it
    knows how fast pieces are made (then it sizes each by the audio ahead of it,
    app/agent/pacing.py, which this bench without an LLM does not play out)."""
    chunker = ClauseChunker(first_max_words=first_words, phrases=True)
    pieces: list[str] = []
    for word in text.split(" "):
        pieces += chunker.push(word + " ")
    return pieces + chunker.flush()


async def voiced(
    tts: TextToSpeech, pieces: list[str], streamed: bool
) -> AsyncGenerator[Speech, None]:
    """Each piece's speech as the server makes it; the first in parts when `streamed`."""
    for index, piece in enumerate(pieces):
        if index == 0 and streamed and isinstance(tts, StreamingTextToSpeech):
            async for part in tts.synthesize_parts(piece):
                yield part
        else:
            yield await tts.synthesize(piece, urgent=index == 0)


async def play_out(
    tts: TextToSpeech, pieces: list[str], streamed: bool = False
) -> tuple[np.ndarray, float, float]:
    """The reply on its playout timeline (24 kHz int16), its first audio and longest gap."""
    clock_s = 0.0  # synthesis runs one piece after another, from the reply's start
    playing_until_s: float | None = None
    timeline: list[np.ndarray] = []
    first_ms, gap_ms = 0.0, 0.0
    started = time.perf_counter()
    async for speech in voiced(tts, pieces, streamed):
        clock_s += time.perf_counter() - started
        samples = np.clip(speech.samples * 32767, -32768, 32767).astype(np.int16)
        if playing_until_s is None:
            first_ms, playing_until_s = clock_s * 1000, clock_s
        elif clock_s > playing_until_s:
            gap_ms = max(gap_ms, (clock_s - playing_until_s) * 1000)
            timeline.append(np.zeros(int((clock_s - playing_until_s) * speech.rate), np.int16))
            playing_until_s = clock_s
        timeline.append(samples)
        playing_until_s += len(samples) / speech.rate
        started = time.perf_counter()
    return np.concatenate(timeline), first_ms, gap_ms


def write_wav(path: Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(KOKORO_RATE)
        out.writeframes(samples.tobytes())


async def hear(stt: WhisperSTT, samples: np.ndarray) -> str:
    resampler = Resampler(16_000)
    pcm = resampler.pcm(samples, KOKORO_RATE) + resampler.flush()
    return (await stt.transcribe(pcm)).text


async def main(first_words: list[int], out: Path) -> None:
    settings = Settings()
    print(machine())
    print("loading Kokoro and Whisper ...", flush=True)
    tts = await asyncio.to_thread(KokoroTTS, settings.tts)
    stt = await asyncio.to_thread(WhisperSTT, settings.stt)
    results: dict[str, list[Heard]] = {}
    try:
        for number, text in enumerate(REPLIES, 1):
            print(f"\n{number}. {text}")
            variants = [("whole", [text], False)] + [
                (f"first{n}{'s' if streamed else ''}", pieces_of(text, n), streamed)
                for n in first_words
                for streamed in (False, True)
            ]
            for name, pieces, streamed in variants:
                samples, first_ms, gap_ms = await play_out(tts, pieces, streamed)
                write_wav(out / f"{number:02d}-{name}.wav", samples)
                heard = await hear(stt, samples)
                result = Heard(
                    first_ms, gap_ms, len(samples) / KOKORO_RATE,
                    word_error_rate(text, heard), pieces,
                )  # fmt: skip
                results.setdefault(name, []).append(result)
                print(
                    f"   {name:7} first audio {first_ms:5.0f} ms, longest gap {gap_ms:4.0f} ms, "
                    f"{result.seconds:4.1f} s, WER {result.wer:.2f}  | " + " / ".join(pieces)
                )
    finally:
        tts.close()
        stt.close()
    print(f"\nmedians over {len(REPLIES)} replies (WAVs in {out}):")
    for name, runs in results.items():
        first = statistics.median(r.first_audio_ms for r in runs)
        gaps = [r.longest_gap_ms for r in runs]
        print(
            f"   {name:7} first audio {first:5.0f} ms, longest gap "
            f"{statistics.median(gaps):4.0f} ms (worst {max(gaps):4.0f}), "
            f"WER {statistics.mean(r.wer for r in runs):.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-words", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--out", type=Path, default=Path("bench/results/listen"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.first_words, args.out))
