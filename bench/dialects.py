"""Voice to voice over Live and over Realtime: the same server, engines and questions,
measured from the official openai SDK's side over each dialect's WebSocket.

    python -m bench.dialects            # 6 turns each
    python -m bench.dialects --quick    # 2 turns each

Audio is sent in 100 ms appends at the pace it plays, then 1.5 s of silence; voice to
voice is from the end of the speech sent to the first voiced reply audio received.
Prints p50/p95 for each dialect; it asserts nothing.
"""

from __future__ import annotations

import asyncio
import base64
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from openai import AsyncOpenAI

from app.audio.level import rms_db
from bench import quick_run
from clients import load_wav
from tests.support.server import ServerProcess
from tests.support.speech import speak_to_wav

RATE = 24_000
CHUNK = RATE // 10
QUESTIONS = [
    "What is the capital of France?",
    "Tell me something about the moon.",
    "What colour is the sky?",
]
VOICED_DB = -45.0


async def turn(
    append: Callable[[str], Awaitable[None]], events: AsyncIterator[Any], pcm: np.ndarray,
    audio_type: str, done_type: str,
) -> float | None:  # fmt: skip
    """One spoken question, paced; seconds from its end to the first voiced reply audio."""
    for offset in range(0, len(pcm), CHUNK):
        await append(base64.b64encode(pcm[offset : offset + CHUNK].tobytes()).decode())
        await asyncio.sleep(CHUNK / RATE)
    spoke_at = time.monotonic()
    silence = base64.b64encode(np.zeros(CHUNK, dtype=np.int16).tobytes()).decode()
    first: float | None = None
    sender = asyncio.create_task(_silence(append, silence))
    try:
        async for event in events:
            if event.type == audio_type and first is None:
                chunk = np.frombuffer(base64.b64decode(event.delta), dtype=np.int16)
                if rms_db(chunk) > VOICED_DB:
                    first = time.monotonic() - spoke_at
            elif event.type == done_type:
                return first
    finally:
        sender.cancel()
    return first


async def _silence(append: Callable[[str], Awaitable[None]], chunk: str) -> None:
    while True:  # a microphone keeps sending while the agent answers
        await append(chunk)
        await asyncio.sleep(CHUNK / RATE)


async def over_live(url: str, questions: list[np.ndarray]) -> list[float | None]:
    sdk = AsyncOpenAI(base_url=url, api_key="x")
    async with sdk.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1"})
        async for event in conn:
            if event.type == "session.started":
                break
        events = aiter(conn)

        async def append(audio: str) -> None:
            await conn.session.input_audio.append(audio=audio)

        return [
            await turn(append, events, q, "session.output_audio.delta", "session.usage.updated")
            for q in questions
        ]


async def over_realtime(url: str, questions: list[np.ndarray]) -> list[float | None]:
    sdk = AsyncOpenAI(base_url=f"{url}/v1", api_key="x")
    async with sdk.realtime.connect(model="embedded") as conn:
        async for event in conn:
            if event.type == "session.created":
                break
        events = aiter(conn)

        async def append(audio: str) -> None:
            await conn.input_audio_buffer.append(audio=audio)

        return [
            await turn(append, events, q, "response.output_audio.delta", "response.done")
            for q in questions
        ]


def report(name: str, seconds: list[float | None]) -> None:
    got = sorted(s for s in seconds if s is not None)
    if not got:
        print(f"{name:9} no voiced reply in {len(seconds)} turns")
        return
    p95 = got[min(len(got) - 1, int(0.95 * len(got)))]
    print(f"{name:9} turns {len(got)}/{len(seconds)}  p50 {statistics.median(got) * 1000:.0f} ms"
          f"  p95 {p95 * 1000:.0f} ms  max {got[-1] * 1000:.0f} ms")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    quick = quick_run(__doc__, "2 turns a dialect instead of 6", argv)
    turns = 2 if quick else 6
    with tempfile.TemporaryDirectory() as folder:
        questions = []
        for n, text in enumerate(QUESTIONS):
            wav = Path(folder) / f"q{n}.wav"
            speak_to_wav(text, wav)
            questions.append(load_wav(str(wav), rate=RATE))
        asked = [questions[n % len(questions)] for n in range(turns)]
        server = ServerProcess(["--max-sessions", "1", "--llm-temperature", "0"],
                               Path(folder) / "server.log")  # fmt: skip
        server.wait_healthy()
        try:
            results: dict[str, list[float | None]] = {}
            # Alternated, so that neither gets the warmer machine.
            for name, run in (("realtime", over_realtime), ("live", over_live)) * 2:
                half = asked[: turns // 2]
                results.setdefault(name, []).extend(asyncio.run(run(server.url, half)))
            for name, seconds in results.items():
                report(name, seconds)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
