"""A reply never pretends to act, nor to be a person. Without a tool, a small model agrees
to anything: "Sure, I can make you a cup of coffee", "Sure, I'll drive you to the airport",
"Sure, I can help you book a table for two" (Qwen2.5-Coder-0.5B, told in its instructions
that it cannot). A caller takes that as done. So where the session has no tools, an
English reply that opens by taking on an action is replaced by saying it can't. And asked
"Are you a real person?", both bundled Qwen models answered "Yes, I am a real person."
every time, whatever their instructions said (bench.answers, three runs each); an English
reply that opens by claiming to be one is replaced by saying what it is, tools or none;
so is the 1.5B's "Yes, I am alive."
Asked "What can you do?", the 0.5B answered "I can't."; that refusal is replaced by what
it can do. Asked for "a long story about a brave night in the dragon" (a knight and a
dragon, misheard), the 1.5B gave its stock refusal, "I'm sorry, but I can't assist with
that."; typed clearly, it told the story. A story, joke or poem refused so is taken as
not understood, and the caller is asked to say it again.

The opening is held while it may be such a claim ("Sure, I can ...", "Yes, I am ..."),
at most the first sentence: the words after "I can", "I'll" or "I am" settle it. Any
other reply passes at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from app.agent.reply_guard import guarded
from app.vocab.chat import Delta

log = logging.getLogger(__name__)

REFUSAL = "Sorry, I cannot do that: I can only talk. "
NOT_A_PERSON = "No, I'm not a person: I'm a voice assistant, a computer program. "
NOT_ALIVE = "No, I'm not alive: I'm a voice assistant, a computer program. "
TALKS = (
    "I can talk with you: answer questions, explain things and tell stories. I cannot do "
    "anything outside this conversation, such as booking, buying or calling. "
)
TALKS_AND_ACTS = "I can talk with you, answer questions, and act through the tools I am given. "
SAY_AGAIN = "Sorry, I didn't quite catch that. Could you say it again? "

Words = tuple[str, ...]
Stages = tuple[tuple[Words, ...], ...]


def _phrases(*texts: str) -> tuple[Words, ...]:
    return tuple(tuple(text.split()) for text in texts)


# A promise is these, in order: an agreement or none, taking it on, a helping phrase or
# none, and something only hands, apps or a phone do.
_PROMISE: Stages = (
    ((), *_phrases("sure", "yes", "okay", "ok", "of course", "certainly", "absolutely",
                   "alright", "all right", "no problem")),
    _phrases("i'll", "i will", "i can", "i have", "i've", "i am going to", "i'm going to",
             "i'd be happy to", "i'd be glad to", "i would be happy to",
             "i would be glad to"),
    ((), *_phrases("help you", "go ahead and", "try to", "definitely", "now")),
    # Not "do that" ("Sure, I can do that! Why did the chicken..."), "play" alone (a
    # word game), "open" (with a joke), "call you" (Alex from now on) or "make you" (a poem).
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
        # Music, which it has no speaker for, where "play" alone is a word game.
        "play music", "play some music", "play you some", "play you a song", "play a song",
        "play songs", "play the song", "play that song", "play your", "play jazz",
        "play some jazz", "play the radio", "play a playlist", "put on some music",
        "put on music", "start playing",
    ),
)  # fmt: skip
# Being a person: an agreement or none, "I am", and a person ("a real person", "human").
_PERSON: Stages = (
    ((), *_phrases("yes", "yeah", "of course", "certainly", "absolutely")),
    _phrases("i am", "i'm"),
    ((), *_phrases("a", "a real", "a living", "really a")),
    _phrases("human", "human being", "person", "real person", "man", "woman"),
)  # fmt: skip
# Being alive, agreed to: "Yes, I am alive." (the 1.5B, asked "Are you alive?"). Never
# without the agreement: "I'm alive and well" may be small talk.
_ALIVE: Stages = (
    _phrases("yes", "yeah", "of course", "certainly", "absolutely"),
    _phrases("i am", "i'm"),
    ((), *_phrases("very", "fully", "really")),
    _phrases("alive", "conscious", "sentient", "a living being"),
)  # fmt: skip
# Asked what it can do, a refusal: "I can't." (app/agent/asked.py).
_REFUSING: Stages = (
    ((), *_phrases("sorry", "i'm sorry", "no")),
    _phrases("i can't", "i cannot", "i can not", "i'm not able to", "i am not able to",
             "i'm unable to", "i am unable to"),
)  # fmt: skip
# A model's stock refusal: "I'm sorry, but I can't assist with that."
_STOCK_REFUSAL: Stages = (
    ((), *_phrases("sorry", "i'm sorry", "i am sorry")),
    ((), *_phrases("but")),
    _phrases("i can't assist", "i cannot assist", "i can not assist", "i'm unable to assist",
             "i am unable to assist", "i can't help with that", "i cannot help with that"),
)  # fmt: skip
_PUNCTUATION = '.,;:!?"()'


@dataclass(frozen=True, slots=True)
class Claim:
    """What a reply must not open with, what is said instead, and why (for the log)."""

    opening: Stages
    instead: str
    why: str


PROMISE = Claim(_PROMISE, REFUSAL, "took on an action it has no tool for; said it can't")
PERSON = Claim(_PERSON, NOT_A_PERSON, "said it was a person; said it is not")
ALIVE = Claim(_ALIVE, NOT_ALIVE, "said it was alive; said it is not")
NOT_UNDERSTOOD = Claim(_STOCK_REFUSAL, SAY_AGAIN, "refused a story or joke; asked again")


def abilities(acts: bool) -> Claim:
    """Asked what it can do, a refusal is replaced by what it can: talk, and act where the
    session has tools."""
    return Claim(_REFUSING, TALKS_AND_ACTS if acts else TALKS, "refused to say what it can do")


def _opens(words: Words, stages: Stages) -> str:
    """Whether `words` open a claim: "yes" (they make it), "maybe" (they may still grow
    into it) or "no"."""
    if not stages:
        return "yes"
    best = "no"
    for phrase in stages[0]:
        if len(words) < len(phrase):
            if phrase[: len(words)] == words:
                best = "maybe"
        elif words[: len(phrase)] == phrase:
            verdict = _opens(words[len(phrase) :], stages[1:])
            if verdict == "yes":
                return "yes"
            if verdict == "maybe":
                best = "maybe"
    return best


class NoPretending:
    def __init__(self, claims: tuple[Claim, ...] = (PROMISE, PERSON, ALIVE)) -> None:
        self._claims = claims
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
        verdicts = [(claim, _opens(words, claim.opening)) for claim in self._claims]
        for claim, verdict in verdicts:
            if verdict == "yes":
                self._settled = self.pretended = True
                self._held = ""
                log.info("the reply %s", claim.why)
                return claim.instead
        # A sentence ended ("I can.") grows into nothing more.
        if any(v == "maybe" for _, v in verdicts) and not _ends_sentence(self._held):
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


def no_pretending(
    deltas: AsyncIterator[Delta], claims: tuple[Claim, ...] = (PROMISE, PERSON, ALIVE)
) -> AsyncGenerator[Delta, None]:
    """`deltas`, a claim of `claims` replaced by what is said instead, which ends the
    reply."""
    return guarded(deltas, NoPretending(claims))
