"""A reply never pretends to act. Without a tool, a small model agrees to anything:
"Sure, I can make you a cup of coffee", "Sure, I'll drive you to the airport", "Sure, I
can help you book a table for two" (Qwen2.5-Coder-0.5B, told in its instructions that it
cannot). A caller takes that as done. So where the session has no tools, an English reply
that opens by taking on an action is replaced by saying it can't.

The opening is held while it may be such a promise ("Sure, I can ..."), at most the first
sentence: the words after "I can" or "I'll" settle it. Any other reply passes at once.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator

from app.vocab.chat import Delta

log = logging.getLogger(__name__)

REFUSAL = "Sorry, I can't do that: I can only talk. "

_AGREEMENTS = r"(?:sure|yes|okay|ok|of course|certainly|absolutely|alright|all right|no problem)"
_AGREE = rf"(?:{_AGREEMENTS}[,!.]?\s+)?"
_TAKE_ON = (
    r"i(?:'ll| will| can| have|'ve| am going to|'m going to|'d be (?:happy|glad) to|"
    r" would be (?:happy|glad) to)\s+"
)
_HELP = r"(?:(?:help you|go ahead and|try to|definitely|now)\s+)?"
# Things only hands, apps or a phone do, as a reply that takes them on says them.
ACTS = (
    "book", "booked", "reserve", "reserved", "order", "ordered", "buy", "bought",
    "purchase", "pay", "paid", "deliver", "drive", "drove", "call", "called", "phone",
    "ring", "text", "message", "email", "send", "sent", "water", "watered", "make you",
    "made you", "brew", "cook you", "fetch", "bring", "set an alarm", "set a timer",
    "set a reminder", "set the alarm", "set your alarm", "set up a meeting",
    "set up an appointment", "schedule", "remind you", "turn on", "turn off",
    "turn the light", "turn the lights", "switch on", "switch off", "switch the light",
    "switch the lights", "lock", "unlock", "take care of",
)  # fmt: skip
# Not "do that" ("Sure, I can do that! Why did the chicken..."), "play" (a word game) or
# "open" (with a joke): a promise to act, or not, by what follows.
_ACTS = "(?:" + "|".join(sorted(map(re.escape, ACTS), key=len, reverse=True)) + r")\b"
_FIRST_WORDS = {act.split()[0] for act in ACTS}
_PRETENDS = re.compile(rf"^{_AGREE}{_TAKE_ON}{_HELP}{_ACTS}", re.IGNORECASE)
# The word after "I can" (or "I can help you") once complete: no act starts with it.
_NO_ACT = re.compile(rf"^{_AGREE}{_TAKE_ON}{_HELP}(?!help\b)(\S+)\s", re.IGNORECASE)
# What a reply may still grow from into a promise: an agreement, then "I" and a few more
# words, no sentence ended after them.
_MAY_PRETEND = re.compile(
    rf"^(?:{_AGREEMENTS}[,!.]?(?:\s+|$))?(?:i(?:'\w*)?(?:\s+[\w'-]+){{0,6}})?\s*$",
    re.IGNORECASE,
)
HELD_WORDS = 8


class NoPretending:
    def __init__(self) -> None:
        self._held = ""
        self._settled = False
        self.pretended = False

    def push(self, text: str) -> str:
        """What may be said now of the reply so far (`text`: its next whole words, as the
        reply guard passes them)."""
        if self._settled:
            return "" if self.pretended else text
        self._held += text
        opening = " ".join(self._held.replace("\u2019", "'").split())
        if _PRETENDS.match(opening):
            self._settled = self.pretended = True
            self._held = ""
            log.info("the reply took on an action it has no tool for; said it can't")
            return REFUSAL
        after = _NO_ACT.match(self._held.replace("\u2019", "'").lstrip())
        if after is not None and after[1].lower() not in _FIRST_WORDS:
            return self._release()
        if _MAY_PRETEND.match(opening) and len(opening.split()) < HELD_WORDS:
            return ""
        return self._release()

    def finish(self) -> str:
        return "" if self._settled else self._release()

    def _release(self) -> str:
        self._settled = True
        held, self._held = self._held, ""
        return held


async def no_pretending(deltas: AsyncIterator[Delta]) -> AsyncGenerator[Delta, None]:
    """`deltas`, a promise to act replaced by a refusal, which ends the reply."""
    judge = NoPretending()
    async with contextlib.aclosing(deltas) as stream:  # type: ignore[type-var]
        async for delta in stream:
            if not isinstance(delta, str):
                yield delta
                continue
            if text := judge.push(delta):
                yield text
            if judge.pretended:
                return
    if text := judge.finish():
        yield text
