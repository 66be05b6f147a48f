"""Barge-in reaction time, measured at the client over real WebRTC.

    python -m bench.bargein                  # echo agent: the media path and VAD alone
    python -m bench.bargein --agent llm      # the embedded agent, answering at length
    python -m bench.bargein --url http://host:8000 --trials 20
    python -m bench.bargein --agent llm --backchannel   # "Yeah, okay." over the answer

Each trial asks something that draws a long answer, lets the answer play for a
while, then speaks over it. Reaction time is from the onset of the interrupting
speech in the sent audio to the last non-silent frame of the old reply
received. Prints its distribution against the goal: p95 <= the server's
confirm window (vad.interrupt_min_speech_ms) + 60 ms. With --backchannel it says
"Yeah, okay." instead, and prints whether the reply went on to the end and how long
its audio was held (the longest silence in it after the onset). It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import machine
from bench.latency import percentile
from clients import AgentClient, load_wav
from tests.support.server import ServerProcess
from tests.support.speech import speak_to_wav

LONG_QUESTION = "Please tell me a long story about a brave knight, a dragon and a castle."
# Echo plays the utterance back, so for echo the "question" is itself long.
LONG_UTTERANCE = (
    "This is a long sentence that keeps going for a while, so that the echo of it "
    "plays for several seconds, which leaves plenty of time to talk over it."
)
INTERRUPTION = "Wait, stop, what is two plus two?"
BACKCHANNEL = "Yeah, okay."  # Whisper tiny.en hears espeak-ng's "Mm-hmm" as "Mm-mm"
AUDIBLE_WITHIN_S = 0.06  # reply audio this recent counts as playing


@dataclass
class Trial:
    reaction_s: float | None  # None: no reply audio was playing when the user spoke
    first: dict[str, Any]  # response.done's response, for the interrupted reply
    second: dict[str, Any]  # and for the reply to the interruption
    interruption_heard: str  # its input transcript

    @property
    def first_status(self) -> str:
        return str(self.first["status"])


async def speak_over_the_reply(
    client: AgentClient, question: np.ndarray, interruption: np.ndarray, *, after_s: float,
    timeout_s: float,
) -> None:  # fmt: skip
    """Ask, let the reply play `after_s`, and say `interruption` over it."""
    client.mic.say(question)
    await client.wait_for("response.created", timeout_s=timeout_s)
    deadline = time.monotonic() + timeout_s
    while (
        started := client.recording.first_voice_after(client.event_time("response.created"))
    ) is None:  # noqa: E501
        if time.monotonic() > deadline:
            raise TimeoutError("the reply never became audible")
        await asyncio.sleep(0.02)
    await asyncio.sleep(max(0.0, started + after_s - time.monotonic()))
    # Speak over audible reply audio: on a slow CPU the next clause can be late,
    # leaving a gap with nothing to stop. Leading silence is cut for the same aim.
    for _ in range(500):
        last = client.recording.last_voice_at()
        if last is not None and time.monotonic() - last < AUDIBLE_WITHIN_S:
            break
        await asyncio.sleep(0.01)
    client.mic.say(np.trim_zeros(interruption, "f"))


async def barge_in(
    url: str, question: np.ndarray, interruption: np.ndarray, *, after_s: float = 1.5,
    timeout_s: float = 120.0,
) -> Trial:  # fmt: skip
    """One conversation: ask, let the reply play `after_s`, talk over it, measure."""
    client = AgentClient(url)
    await client.connect()
    try:
        await speak_over_the_reply(
            client, question, interruption, after_s=after_s, timeout_s=timeout_s
        )
        first = (await client.wait_for("response.done", timeout_s=timeout_s))["response"]
        await client.wait_for("response.created", count=2, timeout_s=timeout_s)
        onset = client.mic.speech_started_at
        assert onset is not None
        old = client.recording.voice_times(onset, client.event_time("response.created", 2))
        second = (await client.wait_for("response.done", count=2, timeout_s=timeout_s))["response"]
        heard = client.of_type("conversation.item.input_audio_transcription.completed")[-1]
    finally:
        await client.close()
    audible = bool(client.recording.voice_times(onset - AUDIBLE_WITHIN_S, onset))
    reaction = max([onset, *old]) - onset if first["status"] == "cancelled" and audible else None
    return Trial(reaction, first, second, heard["transcript"])


async def held(
    url: str, question: np.ndarray, backchannel: np.ndarray, timeout_s: float = 120.0
) -> tuple[str, float]:
    """Say `backchannel` over the reply: (how the reply ended, seconds its audio was held)."""
    client = AgentClient(url)
    await client.connect()
    try:
        await speak_over_the_reply(client, question, backchannel, after_s=1.0, timeout_s=timeout_s)
        done = (await client.wait_for("response.done", timeout_s=timeout_s))["response"]
        onset = client.mic.speech_started_at
        assert onset is not None
        times = client.recording.voice_times(onset, client.event_time("response.done"))
    finally:
        await client.close()
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    return str(done["status"]), max(gaps, default=0.0)


async def run_backchannel(url: str, trials: int, folder: Path) -> None:
    speak_to_wav(LONG_QUESTION, folder / "question.wav")
    speak_to_wav(BACKCHANNEL, folder / "backchannel.wav")
    question = load_wav(str(folder / "question.wav"))
    backchannel = load_wav(str(folder / "backchannel.wav"))
    holds: list[float] = []
    for i in range(trials):
        status, held_s = await held(url, question, backchannel)
        print(f"trial {i + 1}: reply {status}, audio held {held_s * 1000:.0f} ms")
        if status == "completed":
            holds.append(held_s * 1000)
    if holds:
        p50, p95 = percentile(holds, 50), percentile(holds, 95)
        print(f"resumed {len(holds)} of {trials}; held p50 {p50:.0f} ms, p95 {p95:.0f} ms")
    else:
        print(f"resumed 0 of {trials}")


def confirm_window_ms(url: str) -> int:
    config = httpx.get(f"{url}/v1/config", timeout=5).json()
    return int(config["vad"]["interrupt_min_speech_ms"])


async def run(url: str, agent: str, trials: int, folder: Path) -> None:
    question_text = LONG_UTTERANCE if agent == "echo" else LONG_QUESTION
    speak_to_wav(question_text, folder / "question.wav")
    speak_to_wav(INTERRUPTION, folder / "interruption.wav")
    question = load_wav(str(folder / "question.wav"))
    interruption = load_wav(str(folder / "interruption.wav"))
    window = confirm_window_ms(url)
    reactions: list[float] = []
    for i in range(trials):
        trial = await barge_in(url, question, interruption)
        if trial.reaction_s is None:
            print(f"trial {i + 1}: no reply audio was playing at the interruption; skipped")
            continue
        reactions.append(trial.reaction_s * 1000)
        print(f"trial {i + 1}: {reactions[-1]:.0f} ms")
    if not reactions:
        print("no trial interrupted a reply")
        return
    p50, p95 = percentile(reactions, 50), percentile(reactions, 95)
    goal = window + 60
    print(
        f"\nbarge-in reaction over {len(reactions)} trials: p50 {p50:.0f} ms, p95 {p95:.0f} ms, "
        f"min {min(reactions):.0f}, max {max(reactions):.0f}"
    )
    verdict = "met" if p95 <= goal else "NOT met"
    print(f"goal p95 <= confirm window {window} + 60 = {goal} ms: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--agent", choices=["echo", "llm"], default="echo")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--url", help="an already running server (its agent must match)")
    parser.add_argument("--backchannel", action="store_true", help="say a backchannel")
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="bargein-"))

    def trials(url: str) -> None:
        if args.backchannel:
            asyncio.run(run_backchannel(url, args.trials, folder))
        else:
            asyncio.run(run(url, args.agent, args.trials, folder))

    if args.url:
        trials(args.url)
        return 0
    server = ServerProcess(["--agent", args.agent], folder / "server.log")
    server.wait_healthy()
    try:
        trials(server.url)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
