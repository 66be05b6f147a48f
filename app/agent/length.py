"""How long a reply may be: as long as its instructions say. The default ones ask for
"one or two short spoken sentences", and a small model wrote four to a rambling question
(34 s of audio, heard on the page). So a reply ends after the sentences its instructions
allow, unless the user asks for more: a story, the steps, the details."""

from __future__ import annotations

import re

from app.agent.asked import asks_for_more
from app.vocab.chat import ChatMessage
from app.vocab.languages import ENGLISH

_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_COUNT = r"(a|one|two|three|four|five|six|[1-9])"
# "one or two short spoken sentences", "3 sentences", "a sentence or two".
_SENTENCES = re.compile(
    rf"\ba\s+sentence\s+or\s+(two|three)\b|\b{_COUNT}(?:\s+or\s+{_COUNT})?\s+"
    rf"(?:(?:short|brief|spoken|simple|clear|concise|complete|full)\s+){{0,3}}sentences?\b",
    re.IGNORECASE,
)


def instructed_sentences(instructions: str) -> int | None:
    """The most sentences `instructions` allow a reply (None: they do not say)."""
    match = _SENTENCES.search(instructions)
    if match is None:
        return None
    counts = [_WORDS.get(group.lower()) or int(group) for group in match.groups() if group]
    return max(counts)


def sentences_allowed(prompt: list[ChatMessage], language: str) -> int | None:
    """How many sentences the reply to `prompt` may have (None: no limit)."""
    if not prompt or prompt[0]["role"] != "system" or (language or ENGLISH) != ENGLISH:
        return None
    if asks_for_more(prompt):
        return None
    return instructed_sentences(prompt[0]["content"] or "")
