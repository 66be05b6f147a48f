"""The echo agent: each utterance played back, a check of the media path with no models."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import numpy as np

from app.agent.responders import Piece, SpeechRequest
from app.errors import EngineError
from app.vocab.chat import ChatMessage, Delta, ToolCallDelta
from app.vocab.speech import BriefLook, Speech, Transcript

ECHO_PIECE_SAMPLES = 16_000


class EchoResponder:
    """Plays each utterance back: a media-path check with no models."""

    voices: tuple[str, ...] = ()
    languages: frozenset[str] = frozenset()
    answers_text = False

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript | None:
        return None

    async def speak(self, request: SpeechRequest) -> AsyncGenerator[Piece | ToolCallDelta, None]:
        # A second at a time, as speech is synthesized: the reply's resampler then never
        # holds buffers for a whole 30 s utterance (tens of MB of native memory each).
        samples = np.frombuffer(request.heard, dtype=np.int16)
        for start in range(0, max(len(samples), 1), ECHO_PIECE_SAMPLES):
            yield Piece("", Speech(samples[start : start + ECHO_PIECE_SAMPLES], 16_000))

    async def say(self, text: str, voice: str, speed: float, language: str = "") -> Speech | None:
        return None

    def reads_while_listening(self) -> bool:
        return False

    async def read_ahead(self, prompt: list[ChatMessage], *, unfinished: bool = False) -> None:
        return None

    async def write(self, request: SpeechRequest) -> AsyncGenerator[Delta, None]:
        raise EngineError("the echo agent only plays back what it hears")
        yield ""  # an async generator, like the agent's
