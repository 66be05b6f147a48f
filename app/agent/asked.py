"""What the user's last words ask for, where the reply rules need to know: more than a
short answer (app/agent/length.py), how to do something, what the agent can do, or a
story (app/agent/no_pretending.py). English only."""

from __future__ import annotations

import re

from app.vocab.chat import ChatMessage

# English words that ask for a longer answer; elsewhere no limit is set, rather than one
# a request for a story in another language could not lift.
_MORE = re.compile(
    r"\b(?:stor(?:y|ies)|tale|long (?:story|answer|version|explanation)|longer|at length|"
    r"details?|detailed|explain|explanation|describe|tell me (?:more|all|everything)|"
    r"more about|all about|elaborate|steps?|step by step|how (?:do|can|should) (?:i|we)|"
    r"instructions|recipe|list|poem|song|summar(?:y|ise|ize))\b",
    re.IGNORECASE,
)
# A story, a joke or a poem: something made of words, which the agent can always give.
_TOLD = re.compile(
    r"\b(?:stor(?:y|ies)|tales?|jokes?|poems?|rhymes?|limericks?|riddles?)\b", re.IGNORECASE
)
# "How do I ...?": the answer says how to act, which is no promise to.
_HOW = re.compile(r"^\W*how\b", re.IGNORECASE)
# "What can you do?": Qwen2.5-Coder-0.5B, told it can only talk and to say it can't
# when asked to act, answered "I can't." three times in three.
_ABILITIES = re.compile(
    r"\bwhat (?:else )?(?:can|could) you (?:do|help(?: me)?(?: with)?)(?: for me)?|"
    r"\bwhat are you (?:able to do|capable of|good at|for)|\bwhat are your (?:abilities|skills)",
    re.IGNORECASE,
)
# Ending there: "What can you do about a headache?" asks something else.
_AT_THE_END = re.compile(r"\W*$")


def asks_for_more(prompt: list[ChatMessage]) -> bool:
    """Whether the user's last words ask for more than a short answer."""
    return bool(_MORE.search(_last_words(prompt)))


def _last_words(prompt: list[ChatMessage]) -> str:
    for message in reversed(prompt):
        if message["role"] == "user":
            return message["content"] or ""
    return ""


def asks_to_be_told(prompt: list[ChatMessage]) -> bool:
    """Whether the user's last words ask for a story, a joke or a poem."""
    return bool(_TOLD.search(_last_words(prompt)))


def asks_how(prompt: list[ChatMessage]) -> bool:
    """Whether the user's last words ask how to do something."""
    return bool(_HOW.match(_last_words(prompt)))


def asks_abilities(prompt: list[ChatMessage]) -> bool:
    """Whether the user's last words ask what the agent can do."""
    words = _last_words(prompt)
    return any(_AT_THE_END.match(words, m.end()) for m in _ABILITIES.finditer(words))
