"""Interruptions that can be taken back (vad.interrupt_mode "pause").

When the user talks over a reply long enough to barge in, its audio is held
instead of dropped, and the interruption is judged within vad.resume_window_ms:

- the utterance ended and its words are none, or only a backchannel ("mm-hm",
  "yeah", "okay"): it was no turn. It is dropped, as echo is, and the reply goes on
  from where it was held: a client sees speech start and stop, and no item;
- the utterance ended with other words, or the agent does not listen for words (the
  echo agent): a turn. The reply is cancelled as a barge-in always was, history
  keeps what was heard before the pause, and the utterance is answered with the
  transcript already made;
- the user is still talking when the window closes: a turn. The reply is cancelled
  then, and the utterance is answered when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.errors import EngineError
from app.observability.counters import InterruptionStats
from app.session.speaking.reply import Reply
from app.tasks import OneShot, cancel_task, spawn
from app.vocab.speech import Transcript

log = logging.getLogger(__name__)

# What a listener says to show they are following, as Whisper spells it ("Mm-hmm.").
BACKCHANNEL = frozenset(
    {
        ("mm",), ("mmm",), ("hmm",), ("hm",), ("mhm",), ("uh",), ("um",), ("huh",), ("ah",),
        ("oh",), ("aha",), ("yeah",), ("yep",), ("yup",), ("yes",), ("ok",), ("okay",),
        ("right",), ("sure",), ("alright",), ("mm", "hmm"), ("mm", "hm"), ("uh", "huh"),
        ("i", "see"), ("got", "it"), ("all", "right"),
    }
)  # fmt: skip
LONGEST_PHRASE = max(len(phrase) for phrase in BACKCHANNEL)

Transcribe = Callable[[bytes], Awaitable[Transcript | None]]


def no_turn(text: str) -> bool:
    """Nothing but backchannel in `text` (or no words at all)."""
    words = re.findall(r"[a-z]+", text.lower())
    at = 0
    while at < len(words):
        for length in range(LONGEST_PHRASE, 0, -1):
            if tuple(words[at : at + length]) in BACKCHANNEL:
                at += length
                break
        else:
            return False
    return True


@dataclass(frozen=True, slots=True)
class InterruptionCallbacks:
    transcribe: Transcribe
    still_speaking: Callable[[], bool]
    # The utterance was a turn: commit it under this item id, with its transcript if made.
    was_turn: Callable[[bytes, str, Transcript | None], None]
    was_no_turn: Callable[[str], None]  # its item id


class Interruptions:
    """One session's paused reply, if any, while its interruption is judged."""

    def __init__(
        self, session_id: str, callbacks: InterruptionCallbacks, stats: InterruptionStats
    ) -> None:
        self._session_id = session_id
        self._on = callbacks
        self._stats = stats
        self._reply: Reply | None = None
        self._window = OneShot(self._window_closed)
        self._judging: asyncio.Task[None] | None = None
        self._paused_at = 0.0

    @property
    def pending(self) -> bool:
        """A reply is held while an utterance is judged."""
        return self._held is not None

    @property
    def _held(self) -> Reply | None:
        """The reply held, unless something else ended it meanwhile (the client)."""
        return self._reply if self._reply is not None and not self._reply.done else None

    def pause(self, reply: Reply, window_s: float, spoken_ms: int) -> bool:
        """Hold `reply` while the interruption is judged; False where it cannot be held
        (the caller cancels it instead). True while one is already held.

        `spoken_ms`: how long the user had been speaking (the reaction time)."""
        if self._held is not None:
            return True
        if not reply.pause():
            return False
        self._reply = reply
        self._paused_at = time.monotonic()
        self._stats.paused += 1
        self._stats.reacted(spoken_ms)
        self._window.start(window_s)
        log.debug("reply paused by an interruption", extra={"session_id": self._session_id})
        return True

    def cut(self, reply: Reply, spoken_ms: int) -> None:
        """A barge-in that is not held: the reply is cancelled now."""
        if reply.interrupt("turn_detected"):
            self._stats.cancelled += 1
            self._stats.reacted(spoken_ms)

    def ended(self, audio: bytes, item_id: str) -> None:
        """The interrupting utterance ended: judge it by its words. Utterances are judged
        in order; the reply resumes only if the last of them was no turn."""
        previous = self._judging
        self._judging = spawn(
            self._judge(audio, item_id, previous), f"{self._session_id}:interruption"
        )

    async def _judge(self, audio: bytes, item_id: str, previous: asyncio.Task[None] | None) -> None:
        started = time.monotonic()
        try:
            heard = await self._on.transcribe(audio)
        except EngineError as exc:
            log.warning("could not judge an interruption: %s", exc,
                        extra={"session_id": self._session_id})  # fmt: skip
            heard = None  # answered as a turn, which transcribes it again
        if previous is not None:
            await asyncio.wait([previous])
        # None: no words to judge by (the echo agent, or STT failed): a turn.
        if self._held is not None and heard is not None and no_turn(heard.text):
            self._on.was_no_turn(item_id)
            if self._judging is asyncio.current_task():
                took_ms = (time.monotonic() - started) * 1000
                self._resume(f"after {heard.text!r} (transcribed in {took_ms:.0f} ms)")
            return
        self._cancel()
        self._on.was_turn(audio, item_id, heard)

    def _window_closed(self) -> None:
        if self._judging is not None and not self._judging.done():
            return  # the words decide
        if self._on.still_speaking():
            self._cancel()
            return
        self._resume("as the utterance was dropped")  # the client cleared its input

    def _resume(self, why: str) -> None:
        reply, self._reply = self._reply, None
        self._window.cancel()
        if reply is not None and not reply.done:
            reply.resume()
            self._stats.resumed += 1
            held_ms = (time.monotonic() - self._paused_at) * 1000
            log.info("reply resumed %s, held %.0f ms", why, held_ms,
                     extra={"session_id": self._session_id})  # fmt: skip

    def _cancel(self) -> None:
        reply, self._reply = self._reply, None
        self._window.cancel()
        if reply is not None and reply.interrupt("turn_detected"):
            self._stats.cancelled += 1

    async def close(self) -> None:
        self._window.cancel()
        self._reply = None
        await cancel_task(self._judging)
