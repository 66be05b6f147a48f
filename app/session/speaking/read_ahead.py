"""While a reply plays, the LLM reads the next turn's prompt up to the user's words, and
while the user speaks, their words so far.

The prompt as it will be: the reply as history keeps it (not as the LLM wrote it, which
the spoken form changes), and the conversation's window as it will be once the user's
words are added (its oldest messages dropping out, which the LLM would otherwise read
whole at the next turn). Not for sessions with tools, whose rounds each give the LLM
another prompt.
"""

from __future__ import annotations

import asyncio
import logging

from app.agent.responders import Responder
from app.session.history import ConversationTooLong, History
from app.session.options import SessionOptions
from app.vocab.chat import ChatMessage

log = logging.getLogger(__name__)


class ReadAhead:
    def __init__(
        self, session_id: str, responder: Responder, history: History, prompt_limit: int
    ) -> None:
        self._session_id = session_id
        self._responder = responder
        self._history = history
        self._prompt_limit = prompt_limit
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def after(self, options: SessionOptions, said: str) -> None:
        """The reply that says `said` is made and about to play: read what follows it."""
        if not self._free(options):
            return
        try:
            start = self._history.prompt(
                options.instructions,
                limit=self._prompt_limit,
                truncation=options.truncation,
                coming=2,  # this reply, and the user's next words
            )
        except ConversationTooLong:
            return
        self._read([*start, {"role": "assistant", "content": said}])

    def so_far(self, options: SessionOptions, prompt: list[ChatMessage]) -> None:
        """`prompt` ends with the user's words so far, their turn still going on."""
        if self._free(options):
            self._read(prompt, unfinished=True)

    def _free(self, options: SessionOptions) -> bool:
        busy = self._task is not None and not self._task.done()
        return not (options.tools or options.servers or busy or self._closed)

    def _read(self, prompt: list[ChatMessage], *, unfinished: bool = False) -> None:
        self._task = asyncio.create_task(
            self._responder.read_ahead(prompt, unfinished=unfinished),
            name=f"{self._session_id}:read-ahead",
        )
        self._task.add_done_callback(_ended)

    def close(self) -> None:
        """After the session's jobs: nothing more is read ahead."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()


def _ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("reading the next prompt ahead failed: %r", task.exception())
