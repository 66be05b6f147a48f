"""Cut a streaming LLM reply into speakable pieces.

The first piece ends at the first clause boundary (or after a few words) so TTS
can start early; later pieces end at sentences, which sound better, or at a
clause once they are long. The next piece is written and synthesized while this
one plays, so a piece too long for the audio ahead of it leaves a hole: the agent
sets each later piece's limit (`limit_chars`) from that audio and how fast pieces
are being made (app/agent/pacing.py). Until it knows, each piece's limit is `growth`
times the one before. Limits count the characters the voice will say ("127,000" is
"one hundred and twenty-seven thousand"), as Kokoro's time follows the sounds. At
the limit, a few words more are read for a better cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from app.agent.phrases import (
    NEEDS_NEXT,
    PHRASE_MIN_WORDS,
    in_number,
    number_word,
    phrase_boundary,
    plain,
)
from app.vocab.punctuation import CLAUSE_END, SENTENCE_END, WIDE_CLAUSE_END, WIDE_SENTENCE_END

# Characters of Chinese or Japanese text before a wide clause mark that a later piece may
# end at.
WIDE_CLAUSE_MIN_CHARS = 12
# Text with no spaces (Thai, Chinese, Japanese) has no words to count: a run of this many
# characters a word is cut where it reaches the piece's word limit, and never one shorter
# than RUN_MIN_CHARS (no English word is that long).
CHARS_PER_WORD = 6
RUN_MIN_CHARS = 40
# Words read past a later piece's limit for a better place to cut.
LOOKAHEAD_WORDS = 3
# A clause mark this far past a later piece's limit is not where it ends, if a phrase
# ends near the limit.
FAR_PAST_LIMIT = 1.5
# The limits grow from the first piece's length, but from at least about three
# words after one that ends at a mark ("Yes.", "Sure,"): a pause there is natural, and
# the next piece is not cut to a word ("here" / "is the answer").
LIMIT_BASE_CHARS = 16
# A word of letters that ends at a mark is whole before the space after it comes: its
# clause goes to the voice a token (~40 ms on two cores) sooner. Not after a digit
# ("3.5", "1,000"), a single letter ("J. R. R."), an abbreviation, or what may begin an
# address ("https:", "www.", "bob@example."), which the spoken form says whole.
_MARKED_WORD = re.compile(
    r"(?:^|\s)[\"'(\u201c\u2018]?(?:[^\W\d_]|['\u2019-])*[^\W\d_]{2}[.,;:!?]$"
)
_ADDRESS_START = re.compile(r"(?:^|\s)(?:https?|ftp|mailto|www)[:.]$", re.IGNORECASE)
ABBREVIATION = re.compile(
    r"(?:\b(?:[A-Za-z]\.){2,}|\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|St|No)\.)$", re.IGNORECASE
)
# Markdown and symbols that TTS would read out or choke on.
_UNSPEAKABLE = re.compile(r"[*_#`~<>|\[\]{}]+")


def ends_marked_word(text: str) -> bool:
    """Whether `text` ends with a whole word and a mark after it, the space yet to come."""
    if not _MARKED_WORD.search(text):
        return False
    return not (ABBREVIATION.search(text) or _ADDRESS_START.search(text))


def speakable(text: str) -> str:
    return " ".join(_UNSPEAKABLE.sub(" ", text).split())


class ClauseChunker:
    def __init__(
        self,
        *,
        first_min_words: int = 3,
        first_max_words: int = 4,
        clause_min_words: int = 6,
        max_words: int = 18,
        growth: float = 2.0,
        phrases: bool = False,
        measure: Callable[[str], int] = len,
    ) -> None:
        """`phrases`: the text is English, and pieces end where its phrases do: the first
        at its first clause mark or phrase boundary (at most twice `first_max_words`
        in), a later one cut at its limit at a phrase boundary close by. `measure`: how
        many characters the voice says for a text."""
        self._buffer = ""
        self._emitted = 0
        self._first_chars = 0
        self._first_min = first_min_words
        self._first_max = first_max_words
        self._clause_min = clause_min_words
        self._max_words = max_words
        self._growth = growth
        self._phrases = phrases
        self._measure = measure
        # The next later piece's limit in characters said; None: `growth` decides.
        self.limit_chars: float | None = None

    def push(self, delta: str) -> list[str]:
        self._buffer += delta
        pieces: list[str] = []
        while (cut := self._find_cut()) is not None:
            piece = speakable(self._buffer[:cut])
            self._buffer = self._buffer[cut:].lstrip()
            if piece:
                pieces.append(piece)
                if not self._emitted:
                    ended = piece[-1] in SENTENCE_END + CLAUSE_END
                    said = self._measure(piece)
                    self._first_chars = max(said, LIMIT_BASE_CHARS if ended else 0)
                self._emitted += 1
        return pieces

    def flush(self) -> list[str]:
        piece = speakable(self._buffer)
        self._buffer = ""
        if not piece:
            return []
        self._emitted += 1
        return [piece]

    def _find_cut(self) -> int | None:
        """Index just past a boundary in the buffer, or None to keep waiting.

        A punctuation mark counts only once whitespace follows it, so "3.5" and
        "1,000" are not cut, or where it ends the buffer after a word's letters
        (ends_marked_word). A later piece that reaches its limit mid-sentence is cut
        there only once LOOKAHEAD_WORDS more have come with no boundary among them: a
        boundary that close is a better cut, and a cut at the limit never leaves a
        scrap of two or three words to be spoken on its own.
        """
        first = self._emitted == 0
        clause_min = self._first_min if first else self._clause_min
        max_words = self._first_max if first else self._max_words
        if first and self._phrases:
            clause_min, max_words = 1, 2 * self._first_max
        # Kokoro's time grows with a piece's sounds, not its words: the limit is in
        # characters.
        soft_chars = self._first_chars * self._growth**self._emitted
        if self.limit_chars is not None:
            soft_chars = max(self.limit_chars, LIMIT_BASE_CHARS)
        at_soft_max: int | None = None
        soft_words = 0
        words = 0
        in_word = False
        run = 0  # characters since the last space
        word_start = before = 0  # where the word in hand starts, and the one before it
        strong = weak = 0  # where the last phrase boundary of each kind (phrase_boundary) is
        number = 0  # where the number the last word is in begins (_number_from)
        before_number = 0  # that, for a number the limit falls in or just before
        text = self._buffer + " " if ends_marked_word(self._buffer) else self._buffer
        for index, char in enumerate(text):
            run = 0 if char.isspace() else run + 1
            if run > max(max_words * CHARS_PER_WORD, RUN_MIN_CHARS):
                return index
            if char in WIDE_SENTENCE_END and index > 0:
                return index + 1
            if char in WIDE_CLAUSE_END and (first or index >= WIDE_CLAUSE_MIN_CHARS):
                return index + 1
            if char.isspace():
                in_word = False
                if index == 0:
                    continue
                previous = self._buffer[index - 1]
                if previous in SENTENCE_END and words >= 1:
                    return index
                if previous in CLAUSE_END:
                    said = 0 if first else self._said(index)
                    if said > FAR_PAST_LIMIT * soft_chars:
                        # Not made in time: a phrase's end near the limit is a better cut.
                        near = self._near(strong, weak, soft_chars)
                        if near:
                            return near
                    past_limit = not first and said >= soft_chars
                    if words >= clause_min or at_soft_max is not None or past_limit:
                        return index
                if self._phrases and words >= 2:
                    kind = phrase_boundary(
                        self._buffer[before:word_start], self._buffer[word_start:index]
                    )
                    if kind == 2:
                        strong = word_start
                        if first and words > PHRASE_MIN_WORDS:
                            return word_start
                    elif kind == 1:
                        weak = word_start
                    number = self._number_from(before, word_start, index, number)
                    if at_soft_max is not None and not before_number and number > at_soft_max:
                        before_number = number  # begun in the words read past the limit
                if words >= max_words:
                    if not self._phrases:
                        return index
                    # Where the last phrase ended, not inside one ("composed primarily
                    # of" / "rock and metal."); a later piece, if that leaves it at
                    # least half of what it says.
                    said = self._said(index)
                    near = (strong or weak) if first else self._near(strong, weak, said)
                    if near:
                        return near
                    if not self._in_number(index):  # else on to the number's end
                        return index
                if at_soft_max is None and not first and self._said(index) >= soft_chars:
                    at_soft_max, soft_words, before_number = index, words, number
                elif at_soft_max is not None and words >= soft_words + LOOKAHEAD_WORDS:
                    # A number said in many words ("127,000") ends a piece far past its
                    # limit: it begins the next one instead, where a phrase may end.
                    if before_number > 0 and self._said(before_number) >= soft_chars / 2:
                        return before_number
                    # Where the last phrase ended, if that was near the limit; a number
                    # is not cut ("three hundred | and eighty").
                    near = self._near(strong, weak, soft_chars)
                    if near:
                        return near
                    if not self._phrases or not self._in_number(at_soft_max):
                        return at_soft_max
                    at_soft_max = None
            elif not in_word:
                in_word = True
                words += 1
                before, word_start = word_start, index
        return None

    def _number_from(self, before: int, start: int, end: int, number: int) -> int:
        """Where the number that the word from `start` to `end` is in begins: 0 if it is
        not in one, -1 if no phrase may end before it ("about | 127"); `before`: the
        word before it, `number`: the answer for that word."""
        word = plain(self._buffer[start:end])
        if not (word[:1].isdigit() or number_word(word) or (number and word == "and")):
            return 0
        if number:
            return number
        return -1 if plain(self._buffer[before:start]) in NEEDS_NEXT else start

    def _near(self, strong: int, weak: int, soft_chars: float) -> int:
        """The last phrase boundary (a conjunction's before another's) if it is past half
        the limit, else 0."""
        return next((c for c in (strong, weak) if c and self._said(c) >= soft_chars / 2), 0)

    def _said(self, cut: int) -> int:
        """Characters the voice says for the buffer up to `cut`."""
        return self._measure(self._buffer[:cut])

    def _in_number(self, cut: int) -> bool:
        """Whether the buffer cut at `cut` splits a number written in words, or may: the
        word after a number word has not come yet."""
        head = self._buffer[:cut].split()
        after, space, _ = self._buffer[cut:].lstrip().partition(" ")
        if not head:
            return False
        if not space:  # the next word has not come yet: it may be a number's
            after = "one"
        return in_number(head[-1], after, head[-2] if len(head) > 1 else "")
