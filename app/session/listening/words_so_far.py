"""The user's words so far, heard while they are still speaking, for the LLM to read.

A turn's reply waits for Whisper and then for the LLM to read the user's words (~20 ms
a token with the 1.5B on two cores). While the user speaks the engines are idle, so
every EVERY_MS of speech a brief look (Whisper's 10 s window, ~0.1 s) transcribes the
utterance so far, and the LLM reads its words but the last (which may be cut in two).
At the turn, llama.cpp keeps what matches the final transcript and reads only the rest.

A look starts only on a voiced frame and while no engine works: it is over before the
silence that begins the reply, and another call's work that comes meanwhile waits at
most for it. A look that hears other words than the final transcript costs only CPU.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from app.tasks import cancel_task, spawn
from app.vocab.speech import Transcript

log = logging.getLogger(__name__)

# Spoken before the first look, and more spoken before each next one.
FIRST_MS = 600
EVERY_MS = 500
# Past this the brief window no longer holds the utterance and its tail.
LONGEST_MS = 8000
# More words a second than anyone says: Whisper repeating itself on a cut word
# ("How far is a 10 key. How far is a 10 key. How far...").
MOST_WORDS_PER_S = 5.0


class WordsSoFar:
    def __init__(
        self,
        session_id: str,
        hear: Callable[[bytes], Awaitable[Transcript | None]],
        read: Callable[[str], None],
        may_read: Callable[[], bool],
    ) -> None:
        """`hear`: a brief transcription; `read`: the LLM reads these words of the
        utterance, if the agent is still only listening; `may_read`: the LLM would read
        now (no engine is working)."""
        self._session_id = session_id
        self._hear = hear
        self._read = read
        self._may_read = may_read
        self._utterance = ""
        self._next_ms = FIRST_MS
        self._task: asyncio.Task[None] | None = None

    def heard(
        self, utterance: str, spoken_ms: int, voiced: bool, so_far: Callable[[], bytes]
    ) -> None:
        """A frame of `utterance` (an id) while the agent only listens; `voiced`: the
        user is speaking at this frame, not pausing."""
        if utterance != self._utterance:
            self._utterance, self._next_ms = utterance, FIRST_MS
        if not voiced or not self._next_ms <= spoken_ms <= LONGEST_MS:
            return
        if (self._task is not None and not self._task.done()) or not self._may_read():
            return
        self._next_ms = spoken_ms + EVERY_MS
        self._task = spawn(self._look(so_far(), spoken_ms), f"{self._session_id}:so-far")

    async def _look(self, audio: bytes, spoken_ms: int) -> None:
        heard = await self._hear(audio)
        words = heard.text.split() if heard is not None else []
        if len(words) < 2 or len(words) > MOST_WORDS_PER_S * spoken_ms / 1000:
            return
        log.debug("words so far: %s", " ".join(words), extra={"session_id": self._session_id})
        # "Please turn on the lights, Simba.": the turn goes on "lights in the kitchen".
        self._read(" ".join(words[:-1]).rstrip(",.;:!?"))

    async def close(self) -> None:
        await cancel_task(self._task)
