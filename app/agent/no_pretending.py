"""A reply never pretends to act. Without a tool, a small model agrees to anything:
"Sure, I can make you a cup of coffee", "Sure, I'll drive you to the airport", "Sure, I
can help you book a table for two" (Qwen2.5-Coder-0.5B, told in its instructions that it
cannot). A caller takes that as done. So where the session has no tools, an English reply
that opens by taking on an action is replaced by saying it can't.

The opening is held while it may be such a promise ("Sure, I can ..."), at most the first
sentence: the words after "I can" or "I'll" settle it. Any other reply passes at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator

from app.agent.reply_guard import guarded
from app.vocab.chat import Delta

log = logging.getLogger(__name__)

REFUSAL = "Sorry, I cannot do that: I can only talk. "

Words = tuple[str, ...]


def _phrases(*texts: str) -> tuple[Words, ...]:
    return tuple(tuple(text.split()) for text in texts)


# A promise is these, in order: an agreement or none, taking it on, a helping phrase or
# none, and something only hands, apps or a phone do.
_PROMISE: tuple[tuple[Words, ...], ...] = (
    ((), *_phrases("sure", "yes", "okay", "ok", "of course", "certainly", "absolutely",
                   "alright", "all right", "no problem")),
    _phrases("i'll", "i will", "i can", "i have", "i've", "i am going to", "i'm going to",
             "i'd be happy to", "i'd be glad to", "i would be happy to",
             "i would be glad to"),
    ((), *_phrases("help you", "go ahead and", "try to", "definitely", "now")),
    # Not "do that" ("Sure, I can do that! Why did the chicken..."), "play" (a word
    # game), "open" (with a joke), "call you" (Alex from now on) or "make you" (a poem).
    _phrases(
        "book", "booked", "reserve", "reserved", "order", "ordered", "buy", "bought",
        "purchase", "pay", "paid", "deliver", "drive", "drove", "call your", "call the",
        "call him", "call her", "call them", "called your", "called the", "phone your",
        "text your", "message your", "email your", "send", "sent", "water", "watered",
        "make you a cup", "make you a coffee", "make you some", "make you coffee",
        "make you tea", "make you breakfast", "make you dinner", "made you", "brew",
        "cook you", "fetch", "bring", "set an alarm", "set a timer", "set a reminder",
        "set the alarm", "set your alarm", "set up a meeting", "set up an appointment",
        "schedule", "remind you", "turn on", "turn off", "turn the light",
        "turn the lights", "switch on", "switch off", "switch the light",
        "switch the lights", "lock", "unlock", "take care of",
    ),
)  # fmt: skip
_PUNCTUATION = '.,;:!?"()'


def _promises(words: Words, stages: tuple[tuple[Words, ...], ...] = _PROMISE) -> str:
    """Whether `words` open a promise: "yes" (they make one), "maybe" (they may still
    grow into one) or "no"."""
    if not stages:
        return "yes"
    best = "no"
    for phrase in stages[0]:
        if len(words) < len(phrase):
            if phrase[: len(words)] == words:
                best = "maybe"
        elif words[: len(phrase)] == phrase:
            verdict = _promises(words[len(phrase) :], stages[1:])
            if verdict == "yes":
                return "yes"
            if verdict == "maybe":
                best = "maybe"
    return best


class NoPretending:
    def __init__(self) -> None:
        self._held = ""
        self._settled = False
        self.pretended = False

    @property
    def ended(self) -> bool:
        return self.pretended

    def push(self, text: str) -> str:
        """What may be said now of the reply so far (`text`: its next whole words, as the
        reply guard passes them)."""
        if self._settled:
            return "" if self.pretended else text
        self._held += text
        words = tuple(
            word.strip(_PUNCTUATION) for word in self._held.replace("\u2019", "'").lower().split()
        )
        verdict = _promises(words)
        if verdict == "yes":
            self._settled = self.pretended = True
            self._held = ""
            log.info("the reply took on an action it has no tool for; said it can't")
            return REFUSAL
        # A sentence ended ("I can.") grows into nothing more.
        if verdict == "maybe" and not _ends_sentence(self._held):
            return ""
        return self._release()

    def finish(self) -> str:
        return "" if self._settled else self._release()

    def _release(self) -> str:
        self._settled = True
        held, self._held = self._held, ""
        return held


def _ends_sentence(text: str) -> bool:
    return text.rstrip()[-1:] in ".!?" and len(text.split()) > 1


def no_pretending(deltas: AsyncIterator[Delta]) -> AsyncGenerator[Delta, None]:
    """`deltas`, a promise to act replaced by a refusal, which ends the reply."""
    return guarded(deltas, NoPretending())
