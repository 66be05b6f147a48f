"""Cut a streaming LLM reply into speakable pieces.

The first piece ends at the first clause boundary (or after a few words) so TTS
can start early; later pieces end at sentences, which sound better, or at a
clause once they are long: a long piece after a short one would leave a gap in
playout while it is synthesized.
"""

from __future__ import annotations

import re

SENTENCE_END = ".!?"
CLAUSE_END = ",;:"
# Markdown and symbols that TTS would read out or choke on.
_UNSPEAKABLE = re.compile(r"[*_#`~<>|\[\]{}]+")


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
    ) -> None:
        self._buffer = ""
        self._emitted = 0
        self._first_min = first_min_words
        self._first_max = first_max_words
        self._clause_min = clause_min_words
        self._max_words = max_words

    def push(self, delta: str) -> list[str]:
        self._buffer += delta
        pieces: list[str] = []
        while (cut := self._find_cut()) is not None:
            piece = speakable(self._buffer[:cut])
            self._buffer = self._buffer[cut:].lstrip()
            if piece:
                pieces.append(piece)
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
        "1,000" are not cut.
        """
        first = self._emitted == 0
        clause_min = self._first_min if first else self._clause_min
        max_words = self._first_max if first else self._max_words
        words = 0
        in_word = False
        for index, char in enumerate(self._buffer):
            if char.isspace():
                in_word = False
                if index == 0:
                    continue
                previous = self._buffer[index - 1]
                if previous in SENTENCE_END and words >= 1:
                    return index
                if previous in CLAUSE_END and words >= clause_min:
                    return index
                if words >= max_words:
                    return index
            elif not in_word:
                in_word = True
                words += 1
        return None
