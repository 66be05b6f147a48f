"""Where an English sentence's phrases end, for a reply's pieces to end there too.

Kokoro speaks each piece as an utterance of its own, so a piece that ends inside a
phrase ("Sure, I can turn" / "on the lights") is heard broken, and one that begins with
a verb's helper is spoken as a question: "is Madrid." alone is heard as "Is mud red?",
and "The capital of France" / "is Paris." as "The capital of France. Is Paris?". A piece
may end before a conjunction or a relative ("The sky is blue / because..."), or, when
there is none, before another word that opens a phrase ("to boil", "for you")."""

from __future__ import annotations

import re

from app.vocab.punctuation import CLAUSE_END, SENTENCE_END

UTTERANCE_END = f" {SENTENCE_END}{CLAUSE_END}\u2026"  # what a transcriber ends one with

# fmt: off
# Words that open a clause of their own: a conjunction, a relative.
PHRASE_OPENERS = frozenset((
    "and", "but", "or", "nor", "so", "because", "which", "who", "whose", "that", "where",
    "when", "while", "if", "than", "though",
))
# A verb's helper: a phrase never ends after one, and a piece never begins with one.
HELPERS = frozenset((
    "is", "are", "was", "were", "will", "would", "can", "could", "should", "must", "may",
    "might", "has", "have", "had", "does", "do", "did",
))
# Words that need the next one: a phrase never ends after them.
NEEDS_NEXT = PHRASE_OPENERS | HELPERS | frozenset((
    "the", "a", "an", "of", "to", "in", "on", "at", "for", "with", "from", "by", "about",
    "as", "into", "onto", "over", "under", "after", "before", "my", "your", "his", "her",
    "its", "our", "their", "this", "these", "those", "some", "any", "no", "not", "every",
    "each", "very", "i", "you", "he", "she", "it", "we", "they", "i'm", "it's", "you're",
    "we're", "they're", "that's", "there's", "what", "how",
))
# Words no English sentence ends on: said last, the speaker stopped before the rest
# ("What is the capital of" ... "Japan?"). Not a pronoun or a helper ("How are you?",
# "What is it?"), nor "like", "over", "before" ("What's it like?").
UNFINISHED_AFTER = frozenset((
    "the", "a", "an", "my", "your", "our", "their", "its", "of", "to", "for", "with",
    "from", "by", "about", "into", "onto", "in", "on", "at", "as", "than", "and", "but",
    "or", "nor", "because", "if", "very", "plus", "minus",
))
# A condition is no sentence alone; the words said before one carry no meaning.
CONDITIONS = frozenset(("if", "unless", "suppose", "supposing", "assuming"))
FILLERS = frozenset(("so", "um", "uh", "er", "well", "okay", "ok", "and", "now", "hey"))
NUMBER_WORDS = frozenset((
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
    "ninety", "hundred", "thousand", "million", "billion", "point",
))
# fmt: on
QUOTES = "\"'“”‘’()"
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
# A reply's first piece ends at its first phrase boundary past this many words.
PHRASE_MIN_WORDS = 2


def plain(word: str) -> str:
    """`word` as the lists above spell it: lower case, no quotes or brackets around it."""
    return word.strip().lower().strip(QUOTES)


def unfinished(utterance: str) -> bool:
    """Whether an utterance stops before its end, whatever mark a transcriber put after
    it: its last word one no sentence ends on ("What is the capital of?"), or its last
    sentence only a condition, said before a pause ("If I have twenty dollars and spend
    seven." ... "How much do I have left?")."""
    last = utterance.rstrip(UTTERANCE_END).rsplit(maxsplit=1)[-1:]
    return bool(last) and (plain(last[0]) in UNFINISHED_AFTER or _only_a_condition(utterance))


def _only_a_condition(utterance: str) -> bool:
    """A last sentence that opens with "if" and has no comma after which the rest could
    come, and is no question ("If today is Monday what day is tomorrow?")."""
    if utterance.rstrip().endswith("?"):
        return False
    sentence = _SENTENCES.split(utterance.strip().rstrip(UTTERANCE_END))[-1].split()
    while sentence and plain(sentence[0]).rstrip(",") in FILLERS:
        sentence = sentence[1:]
    return (
        bool(sentence)
        and plain(sentence[0]) in CONDITIONS
        and not any(word.endswith(",") for word in sentence)
    )


def phrase_boundary(before: str, word: str) -> int:
    """How surely a listener hears a phrase end between the words `before` and `word`:
    2 before a conjunction ("blue | because"), 1 before another word that opens a phrase
    ("minutes | to boil"), 0 inside one ("turn | on", "three | hundred") or before a
    verb's helper ("France | is Paris")."""
    before, word = plain(before), plain(word)
    if before in NEEDS_NEXT or number_word(before) or before[-1:].isdigit():
        return 0
    if word in HELPERS:
        return 0
    if word in PHRASE_OPENERS:
        return 2
    return 1 if word in NEEDS_NEXT else 0


def in_number(before: str, after: str, earlier: str = "") -> bool:
    """Whether a cut between the words `before` and `after` splits a number in words
    (`earlier`: the word before `before`, as in "hundred and | eighty")."""
    before, after, earlier = plain(before), plain(after), plain(earlier)
    if before == "and":
        return number_word(earlier) and number_word(after)
    return number_word(before) and (number_word(after) or after == "and")


def number_word(word: str) -> bool:
    """Whether `word` (plain) is a number's, "twenty-seven" too."""
    return all(part in NUMBER_WORDS for part in word.split("-"))
