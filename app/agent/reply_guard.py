"""Keep a reply from babbling: the LLM's text is passed on word by word and stopped
where a small model goes wrong in ways a listener hears at once.

- It writes the next speaker's turn ("User: ...", "A: A: A: ..."): a speaker tag at the
  start of the reply is dropped, any later one ends it.
- It repeats itself: a sentence (or a clause of three words or more) said again ends
  it before the second time is heard ("I like cats. I like cats."), and so does a run
  of words said again and again back to back ("ha ha ha ha", "and then and then").
- It goes on and on: past `soft_words` (None: no limit), the reply ends at its next
  sentence; a sentence still open half as many words later is dropped, so what is said
  ends on a sentence. Given a number of `sentences`, it ends after that many (of three
  words or more: "Sure!" is not counted).

Words pass only once complete (whitespace after them, or a mark after their letters:
chunker.ends_marked_word), so a tag is seen before its words reach TTS. The first
sentence passes word by word, for the voice to start soon; each later one passes whole
once it ends, while the one before is still playing, so that a repeat or the limit is
seen before any of it is heard. Tool-call deltas pass untouched.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Protocol

from app.agent import chunker
from app.vocab.chat import Delta

log = logging.getLogger(__name__)

# "User:", "Assistant:", "A:", "Q:" ... at the start of a line or a sentence.
_SPEAKER_TAG = re.compile(
    r"(?:(?i:user|assistant|human|ai|bot|system|question|answer|me|you)|Q|A)\s*:$"
)
# Chat-template tokens a model writes out as text when it goes on past its turn.
_TEMPLATE_TOKEN = re.compile(r"<\|[^|>]*\|>|<(?:start|end)_of_turn>|</?s>|\[/?INST\]")
SENTENCE_END = chunker.SENTENCE_END + chunker.WIDE_SENTENCE_END
CLAUSE_MARKS = SENTENCE_END + chunker.CLAUSE_END + chunker.WIDE_CLAUSE_END
# A word is complete once whitespace follows it; Chinese and Japanese have none, so there a
# run up to a full-width mark counts as one, and a longer run with neither (Thai) is cut
# at RUN_CHARS, as the chunker cuts it.
_WORD = re.compile(r"[^\s。！？、，；：]*[。！？、，；：]\s*|\S+\s+")
RUN_CHARS = 40
# A run of n words said again at once is a loop when repeated this often: a word four
# times ("ha ha ha ha"), two or three words three times, a longer run twice.
LONGEST_RUN = 16


def _repeats_needed(words: int) -> int:
    return 4 if words == 1 else 3 if words <= 3 else 2


def _normal(word: str) -> str:
    return word.strip().strip(".,;:!?\"'()").lower()


class ReplyGuard:
    def __init__(self, soft_words: int | None = None, sentences: int | None = None) -> None:
        """`sentences`: the reply ends once this many have (None: no limit)."""
        self._soft = soft_words if soft_words else 1 << 30
        self._sentences_left = sentences or 1 << 30
        self._words_in_sentence = 0  # since the last sentence end, abbreviations aside
        self._hard = self._soft + max(self._soft // 2, 10)
        self._pending = ""  # text not yet judged: at most an incomplete word
        self._spaced = False  # a word was judged before its space came: the space is owed
        self._held = ""  # the sentence under way, after the first: said once it ends
        self._said: list[str] = []  # every word judged, normalized
        self._sentence: list[str] = []  # the sentence under way, normalized
        self._clause: list[str] = []  # the clause under way, normalized
        self._spoken: list[list[str]] = []  # every sentence ended, and clauses of 3+ words
        self._tagged = False  # the reply began with a speaker tag, dropped
        self.stopped: str | None = None  # why the reply was ended: speaker_tag, loop, length

    @property
    def ended(self) -> bool:
        return self.stopped is not None

    def push(self, delta: str) -> str:
        """The text that may be said now, from what has come so far."""
        self._pending += delta
        out = []
        if self._spaced and self._pending:
            self._spaced = False
            space = len(self._pending) - len(self._pending.lstrip())
            self._held += self._pending[:space]  # said with the word after it
            self._pending = self._pending[space:]
        end = 0
        for match in _WORD.finditer(self._pending):
            if self.stopped is not None:
                break
            end = match.end()
            out.append(self._judge(match.group()))
        self._pending = self._pending[end:]
        if self.stopped is None and chunker.ends_marked_word(self._pending):
            out.append(self._judge(self._pending))
            self._pending, self._spaced = "", True
        if len(self._pending) > RUN_CHARS and self.stopped is None:
            out.append(self._judge(self._pending))
            self._pending = ""
        return "".join(out)

    def finish(self) -> str:
        """The rest, once the stream has ended: a last sentence without its full stop too."""
        tail = ""
        if self._pending.strip() and self.stopped is None:  # the last word is complete now
            tail, self._pending = self._judge(self._pending), ""
        if self.stopped is None:
            if self._sentence and self._sentence in self._spoken:
                self._stop("loop")
            else:
                tail += self._release()
        return tail

    def _judge(self, word: str) -> str:
        """What of `word` (and of the sentence held before it) may be said now.

        The first sentence passes word by word, so the voice starts soon; each one after
        it passes whole once it ends (it is made while the one before plays), unless it
        says again what the reply has said already.
        """
        if token := _TEMPLATE_TOKEN.search(word):  # the words before it are the reply's
            before = self._judge(word[: token.start()]) if word[: token.start()].strip() else ""
            if self.stopped is None:
                before += self._release()
                self._stop("speaker_tag")
            return before
        bare = word.strip()
        if not self._sentence and _SPEAKER_TAG.fullmatch(bare):
            if self._said or self._tagged:
                return self._stop("speaker_tag")
            self._tagged = True
            return ""  # the reply's own "Assistant:" is not said
        normal = _normal(bare)
        self._said.append(normal)
        self._words_in_sentence += 1
        self._sentence.append(normal)
        self._clause.append(normal)
        if self._loops():
            return self._stop("loop")
        if len(self._said) >= self._hard:
            return self._stop("length")
        first = not self._spoken
        self._held += word
        if bare[-1] in CLAUSE_MARKS or "\n" in word:
            if len(self._clause) >= 3 and not first and self._clause in self._spoken:
                return self._stop("loop")
            ended_sentence = bare[-1] in SENTENCE_END or "\n" in word
            if ended_sentence and not first and self._sentence in self._spoken:
                return self._stop("loop")
            if len(self._clause) >= 3:
                self._spoken.append(self._clause)
            self._clause = []
            if ended_sentence:
                self._spoken.append(self._sentence)
                self._sentence = []
                # "Sure!" or "Hi there!" opens a reply; it is no sentence of the answer,
                # and "9 a.m." ends none.
                if not chunker.ABBREVIATION.search(bare):
                    if self._words_in_sentence >= 3:
                        self._sentences_left -= 1
                    self._words_in_sentence = 0
                if len(self._said) > self._soft or not self._sentences_left:
                    self.stopped = "length"
                    log.info("reply ended at a sentence, after %d words", len(self._said))
                return self._release()
        return self._release() if first else ""

    def _release(self) -> str:
        held, self._held = self._held, ""
        return held

    def _loops(self) -> bool:
        """Whether the last words repeat, back to back, the same run of words."""
        said = self._said
        for n in range(1, min(LONGEST_RUN, len(said) // 2) + 1):
            times = _repeats_needed(n)
            unit = said[-n:]
            if (
                len(said) >= n * times
                and any(unit)
                and all(said[-n * (k + 1) : len(said) - n * k] == unit for k in range(1, times))
            ):
                return True
        return False

    def _stop(self, reason: str) -> str:
        self._held = ""
        self.stopped = reason
        log.info("reply stopped (%s) after %d words", reason, len(self._said))
        return ""


class Judge(Protocol):
    """What of a reply's text may be said, as it comes."""

    @property
    def ended(self) -> bool:
        """The reply is over: nothing more of it is said."""
        ...

    def push(self, text: str) -> str: ...

    def finish(self) -> str: ...


async def guarded(deltas: AsyncIterator[Delta], judge: Judge) -> AsyncGenerator[Delta, None]:
    """`deltas` through `judge`; its end closes the stream, which ends the generation."""
    async with contextlib.aclosing(deltas) as stream:  # type: ignore[type-var]
        async for delta in stream:
            if not isinstance(delta, str):
                yield delta
                continue
            if text := judge.push(delta):
                yield text
            if judge.ended:
                return
    if text := judge.finish():
        yield text
