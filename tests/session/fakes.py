"""Small engine doubles and helpers for tests about orchestration.

The real engines are exercised end to end in tests/e2e and tests/engines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

import av
import numpy as np

from app.agent.responders import AgentResponder, Responder
from app.config import LimitsSettings, Settings, VadSettings
from app.engines import Engines
from app.engines.llm import ChatLLM
from app.errors import EngineError
from app.observability.counters import InterruptionStats
from app.rtc.outbound import PacedAudioTrack
from app.session.messages import SessionMessage
from app.session.session import Session
from app.tasks import cancel_task
from app.tools.servers import ToolServers
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice
from app.vocab.speech import BriefLook, Speech, Transcript, TurnModel, WordScore

M = TypeVar("M")

RNG = np.random.default_rng(3)


def noise(ms: int, std: float = 3000) -> bytes:
    """Loud enough (about -21 dBFS at the default) for webrtcvad to call it speech."""
    return np.clip(RNG.normal(0, std, 16 * ms), -32768, 32767).astype(np.int16).tobytes()


def silence(ms: int) -> bytes:
    return bytes(32 * ms)


class FakeSTT:
    languages = frozenset({"en", "es", "de"})
    model_name = "fake"

    def __init__(self) -> None:
        self.heard: list[int] = []  # the audio of each full transcription, in bytes
        self.briefly_heard: list[int] = []  # and of each brief one
        self.script: list[str] = []  # transcripts to return in order, if set
        # For brief transcriptions, in order, the last one again and again; else the next
        # of script.
        self.brief_script: list[str] = []
        # Or what a brief transcription hears in audio this many ms long.
        self.brief_for: Callable[[int], str] | None = None
        self.fail_with: EngineError | None = None  # raised by the next transcription
        self.heard_as = "en"  # the language it "detects"
        self.asked: list[str | None] = []  # the language each transcription was asked for
        self.hear: Callable[[bytes], str] | None = None  # or what it hears in the audio
        self.delay_s = 0.01  # how long a transcription takes

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript:
        (self.briefly_heard if brief else self.heard).append(len(pcm16k))
        self.asked.append(language)
        await asyncio.sleep(self.delay_s)
        failure, self.fail_with = self.fail_with, None
        if failure is not None:
            raise failure
        if self.hear is not None:
            return Transcript(self.hear(pcm16k), language=self.heard_as)
        default = f"question of {len(pcm16k) // 32} ms"
        # A brief transcription hears what the full one will, and leaves it to it.
        if brief:
            if self.brief_for is not None:
                return Transcript(self.brief_for(len(pcm16k) // 32), language=self.heard_as)
            if self.brief_script:
                many = len(self.brief_script) > 1
                text = self.brief_script.pop(0) if many else self.brief_script[0]
                return Transcript(text, language=self.heard_as)
            return Transcript(self.script[0] if self.script else default, language=self.heard_as)
        text = self.script.pop(0) if self.script else default
        words = tuple(WordScore(word, -0.1) for word in text.split()) if logprobs else None
        return Transcript(text, words, language=self.heard_as)

    def close(self) -> None: ...


class FakeLLM:
    model_name = "fake"

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []
        self.read_ahead_prompts: list[list[ChatMessage]] = []  # what read_ahead was given
        self.so_far_prompts: list[list[ChatMessage]] = []  # and given as `unfinished`
        self.reads_ahead = False  # the session may have it read the user's words so far
        self.max_tokens: list[int | None] = []
        self.tools: list[tuple[list[Tool] | None, ToolChoice | None]] = []
        self.arguments = ['{"city": ', '"Paris"}']  # what its tool calls carry
        self.closed_early = 0
        self.echo_question = False  # answer "About <the question>, ..." instead
        self.answer: str | None = None  # or always this
        self.delay_s = 0.02  # between words
        self.hold_after: int | None = None  # words after which it waits for `release`
        self.release = asyncio.Event()

    async def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        for_reply: str | None = None,
        tokens: TokenCount | None = None,
    ) -> AsyncGenerator[Delta, None]:
        self.prompts.append(messages)
        if tokens is not None:  # a token a message, and one a delta
            tokens.prompt += len(messages)
        self.max_tokens.append(max_tokens)
        self.tools.append((tools, tool_choice))
        deltas: list[Delta]
        if tools and tool_choice != "none" and messages[-1]["role"] != "tool":
            # Calls the first tool, its arguments in pieces (self.arguments); answers
            # in words once the last message is a tool's result.
            name = tools[0]["function"]["name"]
            start = ToolCallDelta(0, call_id=f"call_{len(self.prompts)}", name=name)
            deltas = [start, *(ToolCallDelta(0, arguments=a) for a in self.arguments)]
        else:
            words = ["Sure,", "here", "is", "the", "answer", "you", "asked", "for."]
            if self.answer is not None:
                words = self.answer.split()
            elif self.echo_question:
                question = messages[-1]["content"]
                words = f"About {question}, the answer is long and has many words.".split()
            deltas = [word + " " for word in words]
        finished = False
        try:
            for n, delta in enumerate(deltas):
                if n == self.hold_after:
                    await self.release.wait()
                await asyncio.sleep(self.delay_s)
                if tokens is not None:
                    tokens.completion += 1
                yield delta
            finished = True
        finally:
            if not finished:
                self.closed_early += 1

    async def read_ahead(self, messages: list[ChatMessage], *, unfinished: bool = False) -> None:
        (self.so_far_prompts if unfinished else self.read_ahead_prompts).append(messages)

    async def aclose(self) -> None: ...


class FakeTTS:
    voices = ["test", "other"]
    model_name = "fake"

    def __init__(self) -> None:
        self.refuse: set[str] = set()  # texts it fails on, like an unspeakable symbol
        self.seconds_per_word = 0.025
        self.amplitude = 0.1  # -20 dBFS
        self.crash_on = ""  # a text it fails on with an unexpected error
        self.spoken: list[tuple[str, str | None, str]] = []  # (text, voice, language) said
        self.delay_s = 0.01  # how long a synthesis takes

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        urgent: bool = False,
        language: str = "",
    ) -> Speech:
        self.spoken.append((text, voice, language))
        await asyncio.sleep(self.delay_s)
        if text == self.crash_on:
            raise RuntimeError("onnxruntime exploded")
        if text in self.refuse or "*" in self.refuse:
            raise EngineError(f"cannot speak {text!r}")
        samples = int(24_000 * self.seconds_per_word * len(text.split()))
        return Speech(np.full(samples, self.amplitude, dtype=np.float32), 24_000)

    def close(self) -> None: ...


class FakeTurnModel:
    """Says the turn is finished with `probability`, after `delay_s`; counts questions."""

    def __init__(self, probability: float = 0.9, delay_s: float = 0.01) -> None:
        self.probability = probability
        self.delay_s = delay_s
        self.asked: list[int] = []  # ms of audio in each question

    async def complete(self, pcm16k: bytes) -> float:
        self.asked.append(len(pcm16k) // 32)
        await asyncio.sleep(self.delay_s)
        return self.probability

    def close(self) -> None: ...


# Closed after each test by tests/session/conftest.py, even a failed one.
SPEAKERS: list[Speaker] = []
SESSIONS: list[Session] = []


class Speaker(PacedAudioTrack):
    """The real paced track, pulled in real time by a task standing in for aiortc.

    Records each write and, per frame sent, when it went out and whether it was voiced.
    """

    def __init__(self, rate: int = 16_000) -> None:
        super().__init__(rate, owner="sess_test")
        self.writes: list[int] = []
        self.written_at: list[float] = []
        self.frames: list[tuple[float, bool]] = []
        self._pump = asyncio.create_task(self._play())

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        start = await super().write(pcm, on_start, session_id=session_id)
        self.writes.append(len(pcm))
        self.written_at.append(time.monotonic())
        return start

    async def _play(self) -> None:
        while True:
            frame = await self.recv()
            assert isinstance(frame, av.AudioFrame)
            self.frames.append((time.monotonic(), bool(frame.to_ndarray().any())))

    def voiced_times(self) -> list[float]:
        return [at for at, voiced in self.frames if voiced]

    async def close(self) -> None:
        self.stop()
        await cancel_task(self._pump)


class MessageLog(list[SessionMessage]):
    """What the session said, with when it said each."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, message: SessionMessage) -> None:
        self.times.append(time.monotonic())
        super().append(message)

    def at(self, kind: type[M], nth: int = 0) -> tuple[int, float]:
        """Index and time of the nth message of `kind`."""
        found = [i for i, message in enumerate(self) if type(message) is kind]
        if len(found) <= nth:
            raise AssertionError(f"no {kind.__name__} #{nth} in {kinds(self)}")
        return found[nth], self.times[found[nth]]

    def of(self, kind: type[M]) -> list[M]:
        return [message for message in self if isinstance(message, kind)]

    def nth(self, kind: type[M], nth: int = 0) -> M:
        found = self.of(kind)
        if len(found) <= nth:
            raise AssertionError(f"no {kind.__name__} #{nth} in {kinds(self)}")
        return found[nth]


def make_session(
    speculative_ms: int = 200,
    llm: ChatLLM | None = None,
    *,
    also: Callable[[SessionMessage], None] | None = None,
    responder: Responder | None = None,
    turn_model: TurnModel | None = None,
    audio: Speaker | None = None,
    interruptions: InterruptionStats | None = None,
    limits: LimitsSettings | None = None,
    tools: ToolServers | None = None,
    **vad: Any,
) -> tuple[Session, MessageLog, Speaker, Engines]:
    """A session on engine doubles (or `responder`) and the real paced track (or
    `audio`); `also` hears its messages too."""
    settings = Settings(
        vad=VadSettings(silence_ms=500, speculative_ms=speculative_ms, **vad),
        limits=limits or LimitsSettings(),
    )
    engines = Engines(stt=FakeSTT(), llm=llm or FakeLLM(), tts=FakeTTS())
    sent = MessageLog()
    audio = audio or Speaker()
    SPEAKERS.append(audio)

    def emit(message: SessionMessage) -> None:
        sent.append(message)
        if also is not None:
            also(message)

    responder = responder or AgentResponder(engines)
    session = Session(
        "sess_test",
        settings,
        responder,
        audio,
        emit,
        output_level=audio.output_level_db,
        turn_model=turn_model,
        interruptions=interruptions,
        tools=tools,
    )
    session.start()
    SESSIONS.append(session)
    return session, sent, audio, engines


def kinds(sent: list[Any]) -> list[str]:
    return [type(message).__name__ for message in sent]


async def wait_for(sent: list[Any], kind: type, count: int = 1, timeout_s: float = 6.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if sum(isinstance(message, kind) for message in sent) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} {kind.__name__}; got {kinds(sent)}")
