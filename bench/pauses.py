"""A pause inside a question, over real WebRTC: what it costs that the agent answers the
whole question once, against the same question said without the pause.

    python -m bench.pauses                      # starts the default agent
    python -m bench.pauses --url http://host:8000 --trials 10
    python -m bench.pauses --turn-detection semantic_vad

Each trial is a call of its own. "Plain" says "What is the capital of Japan?". "Paused"
says "I want to ask you something.", waits 1.5 s (past the 500 ms silence window, so that
is a turn of its own and its reply is begun), then says the question. For each it prints
voice to voice, from the end of the last words in the sent audio to the first reply audio
received after them, p50/p95; how often the reply held the answer (the bench's own
Whisper on what came back), and how often audio of a reply to the first words alone was
heard before the question. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import machine
from bench.latency import percentile
from clients import AgentClient
from tests.support.server import ServerProcess
from tests.support.speech import kokoro_caller, transcribe

ASKING = "I want to ask you something."
QUESTION = "What is the capital of Japan?"
ANSWER = "tokyo"
PAUSE_S = 1.5


async def trial(url: str, said: dict[str, np.ndarray], paused: bool, detection: str,
                whisper: Any) -> tuple[float | None, bool, bool]:  # fmt: skip
    """(voice to voice in s or None, the answer was heard, audio came before the question)."""
    client = AgentClient(url)
    await client.connect()
    try:
        client.send({"type": "session.update", "session": {"type": "realtime",
                     "audio": {"input": {"turn_detection": {"type": detection}}}}})  # fmt: skip
        await client.wait_for("session.updated", timeout_s=10)
        early = False
        if paused:
            client.mic.say(said[ASKING])
            first_ended = await client.mic.said()
            await asyncio.sleep(max(0.0, first_ended + PAUSE_S - time.monotonic()))
            early = client.recording.first_voice_after(first_ended) is not None
        client.mic.say(said[QUESTION])
        ended = await client.mic.said()
        await client.wait_until(lambda: client.answered_since(ended), "an answer", 120)
        await client.wait_quiet(since=ended, quiet_s=0.5, timeout_s=60)
        first = client.recording.first_voice_after(ended)
        heard = transcribe(whisper, client.recording.audio(since=ended), client.recording.rate)
    finally:
        await client.close()
    right = bool(re.search(rf"\b{ANSWER}\b", heard.lower()))
    return (None if first is None else first - ended), right, early


async def run(url: str, trials: int, detection: str) -> None:
    from faster_whisper import WhisperModel

    from app.engines.stt import bundled_model_path

    whisper = WhisperModel(bundled_model_path(), device="cpu", compute_type="int8")
    said = await kokoro_caller([ASKING, QUESTION])
    print(f"turn detection {detection}, {trials} calls each, pause {PAUSE_S} s")
    results: dict[str, list[float]] = {}
    for paused in (False, True):
        name = "paused" if paused else "plain"
        times, right, early = [], 0, 0
        for _ in range(trials):
            v2v, ok, before = await trial(url, said, paused, detection, whisper)
            if v2v is not None:
                times.append(v2v * 1000)
            right += ok
            early += before
        results[name] = times
        if not times:
            print(f"{name:6s}: no reply was heard")
            continue
        print(
            f"{name:6s}: voice to voice p50 {percentile(times, 50):.0f} ms, "
            f"p95 {percentile(times, 95):.0f} ms; answer heard {right}/{trials}"
            + (
                f"; a reply to the first words heard before the question {early}/{trials}"
                if paused
                else ""
            )  # fmt: skip
        )
    if results.get("plain") and results.get("paused"):
        cost = percentile(results["paused"], 50) - percentile(results["plain"], 50)
        print(f"what answering the whole question costs, p50: {cost:+.0f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--url", help="an already running server")
    parser.add_argument(
        "--turn-detection", choices=["server_vad", "semantic_vad"], default="server_vad"
    )
    args = parser.parse_args(argv)
    print(machine())
    if args.url:
        asyncio.run(run(args.url, args.trials, args.turn_detection))
        return 0
    folder = Path(tempfile.mkdtemp(prefix="pauses-"))
    server = ServerProcess([], folder / "server.log")
    server.wait_healthy()
    try:
        asyncio.run(run(server.url, args.trials, args.turn_detection))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
