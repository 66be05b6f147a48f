"""What a listener says to show they are following ("mm-hmm", "yeah"), and whether words
are only that: such an utterance over a reply is no turn."""

from __future__ import annotations

import functools
import re

from app.vocab.languages import ENGLISH, spoken

# What a listener says to show they are following, as Whisper spells it ("Mm-hmm.").
BACKCHANNEL = frozenset(
    {
        ("mm",), ("mmm",), ("hmm",), ("hm",), ("mhm",), ("uh",), ("um",), ("huh",), ("ah",),
        ("oh",), ("aha",), ("yeah",), ("yep",), ("yup",), ("yes",), ("ok",), ("okay",),
        ("right",), ("sure",), ("alright",), ("mm", "hmm"), ("mm", "hm"), ("uh", "huh"),
        ("i", "see"), ("got", "it"), ("all", "right"),
    }
)  # fmt: skip
# Whisper spells a hum or an "uh-huh" many ways ("Mm hum.", "M-M-M", "MmMmM", "O-ho!",
# "Ooh-huh.", a cut-off "mm-h"): a word of nothing but m, h and u, or of a, o, u and h,
# is such a sound. No word a caller interrupts with is spelt so ("no", "now", "how").
MURMUR = re.compile(r"[hmu]+|[aouh]*[aou][aouh]*")


def no_turn(text: str, language: str = "") -> bool:
    """Nothing but backchannel in `text` (or no words at all); `language`: what it is in
    (a Whisper code), whose backchannels count too ("vale", "genau", "はい")."""
    phrases = backchannels(language)
    longest = max(len(phrase) for phrase in phrases)
    words = _words(text)
    at = 0
    while at < len(words):
        for length in range(longest, 0, -1):
            if tuple(words[at : at + length]) in phrases:
                at += length
                break
        else:
            if not MURMUR.fullmatch(words[at]):
                return False
            at += 1
    return True


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W\d_]+", text.lower())


@functools.cache
def backchannels(language: str) -> frozenset[tuple[str, ...]]:
    """English's, which callers say in any language ("okay"), and the language's own."""
    if not language or language == ENGLISH:
        return BACKCHANNEL
    return BACKCHANNEL | {tuple(_words(phrase)) for phrase in spoken(language).backchannels}


def hum(text: str) -> bool:
    """Some sound, but no word: a hum or an "uh-huh" ("Mm-hmm.", "Uh-huh."), however spelt."""
    words = _words(text)
    return bool(words) and all(MURMUR.fullmatch(word) for word in words)


def may_be_backchannel(text: str, language: str = "") -> bool:
    """Words that may still turn out a backchannel, their last one perhaps only begun: all
    but the last are one."""
    return no_turn(" ".join(_words(text)[:-1]), language)
