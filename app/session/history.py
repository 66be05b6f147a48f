"""A conversation's memory, bounded so prompts cannot grow without limit."""

from __future__ import annotations

from collections import deque

from app.engines.llm import ChatMessage


class History:
    def __init__(self, system_prompt: str, max_messages: int) -> None:
        self.system_prompt = system_prompt
        # Oldest messages fall off first; the system prompt is never dropped.
        self._messages: deque[ChatMessage] = deque(maxlen=max_messages)

    def add(self, role: str, content: str) -> None:
        self._messages.append({"role": role, "content": content})

    def prompt(self) -> list[ChatMessage]:
        return [{"role": "system", "content": self.system_prompt}, *self._messages]

    def __len__(self) -> int:
        return len(self._messages)
