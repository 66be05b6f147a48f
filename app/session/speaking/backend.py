"""A model call beside the conversation: a dialect's backend (Live's Responses
delegation) asks the session's LLM a question of its own, in text, while the voice
goes on. Its tokens count in the session's usage; nothing of it enters the history."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from app.agent.responders import Responder, SpeechRequest
from app.agent.timings import TurnTimings
from app.session.usage import Usage
from app.vocab.chat import ChatMessage, Delta, Tool, ToolChoice


class Backend:
    def __init__(self, session_id: str, responder: Responder, usage: Usage) -> None:
        self._session_id = session_id
        self._responder = responder
        self._usage = usage

    @property
    def available(self) -> bool:
        """Whether there is a model to ask (the echo agent has none)."""
        return self._responder.answers_text

    def ask(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        max_tokens: int | None = None,
        request_id: str | None = None,
    ) -> AsyncGenerator[Delta, None]:
        """The answer in text deltas, and any tools it calls (EngineError if it fails)."""
        request = SpeechRequest(
            self._session_id,
            messages,
            b"",
            "",
            1.0,
            TurnTimings(),
            max_tokens,
            tools,
            tool_choice,
            request_id,
            self._usage.tokens,
        )
        return self._responder.write(request)
