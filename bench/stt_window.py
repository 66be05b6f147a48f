"""Whisper's short window: accuracy and time against the window's length, the silence
after the utterance, and the beam, on the same spoken phrases.

    python -m bench.stt_window

Each condition is the server's own WhisperSTT with `stt.min_window_s` (30 is Whisper's
own window and the full faster-whisper path), the silence appended before encoding
(app.engines.stt.FAST_TAIL_FRAMES, 10 ms frames) and `stt.beam_size`. Speech is
espeak-ng's at 16 kHz, the phrases bench.telephone uses. It prints figures; it asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from app.config import Settings
from app.engines import stt as stt_module
from app.engines.stt import WhisperSTT
from bench import machine
from bench.telephone import PHRASES, wideband
from tests.support.speech import speak_to_wav, word_error_rate


async def condition(
    window_s: float, tail_frames: int, beam: int, speech: list, settings: Settings
) -> tuple[float, int, float]:
    """(mean WER, phrases heard exactly, p50 ms)."""
    stt_module.FAST_TAIL_FRAMES = tail_frames
    stt_settings = settings.stt.model_copy(update={"min_window_s": window_s, "beam_size": beam})
    stt = await asyncio.to_thread(WhisperSTT, stt_settings)
    try:
        rates, times = [], []
        for phrase, pcm in zip(PHRASES, speech, strict=True):
            started = time.perf_counter()
            heard = (await stt.transcribe(pcm)).text
            times.append(time.perf_counter() - started)
            rates.append(word_error_rate(phrase, heard))
        exact = sum(rate == 0 for rate in rates)
        return statistics.mean(rates), exact, statistics.median(times) * 1000
    finally:
        stt.close()


async def measure(args: argparse.Namespace) -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    folder = Path(tempfile.mkdtemp(prefix="stt-window-"))
    speech = [wideband(speak_to_wav(p, folder / f"p{i}.wav", lead_silence_s=0.2))
              for i, p in enumerate(PHRASES)]  # fmt: skip
    print(machine())
    print(f"{len(PHRASES)} phrases; window 30 = the full faster-whisper path")
    print("window s  tail ms  beam  mean WER  exact  STT ms p50")
    for window in args.window:
        for tail in args.tail_ms:
            for beam in args.beam:
                wer, exact, ms = await condition(window, tail // 10, beam, speech, settings)
                print(f"{window:>8.0f} {tail:>8d} {beam:>5d} {wer:>9.3f} {exact:>3d}/{len(PHRASES)}"
                      f" {ms:>11.0f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--window", type=float, nargs="+", default=[30, 20, 15, 10, 8])
    parser.add_argument("--tail-ms", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--beam", type=int, nargs="+", default=[1])
    asyncio.run(measure(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
