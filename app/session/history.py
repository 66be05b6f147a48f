"""A conversation's memory, bounded so prompts cannot grow without limit.

Assistant messages keep a timeline of their clauses, so the text can be cut
to what the user heard when a reply is interrupted or the client truncates it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from app.agent.phrases import UTTERANCE_END, unfinished
from app.errors import EngineError
from app.session.messages import FunctionCall
from app.session.options import Truncation
from app.vocab.chat import ChatMessage, ToolCallRequest
from app.vocab.pcm import BYTES_PER_S


@dataclass(frozen=True, slots=True)
class Spoken:
    """One clause of a reply and where it sits in the reply's audio."""

    text: str
    start_ms: float
    end_ms: float


def heard_text(timeline: Sequence[Spoken], heard_ms: float) -> str:
    """The words of `timeline` that had played by `heard_ms` into its audio.

    Whole clauses up to the cut, then the clause it falls in word by word.
    Kokoro gives no word timings, so words are assumed to take time in
    proportion to their letters; a word is kept only if it was played to its end.
    """
    words: list[str] = []
    for clause in timeline:
        if clause.end_ms <= heard_ms:
            words += clause.text.split()
            continue
        if clause.start_ms < heard_ms:
            fraction = (heard_ms - clause.start_ms) / (clause.end_ms - clause.start_ms)
            clause_words = clause.text.split()
            total = sum(len(word) + 1 for word in clause_words)
            played = 0
            for word in clause_words:
                played += len(word) + 1
                if played / total > fraction:
                    break
                words.append(word)
        break
    return " ".join(words)


@dataclass(slots=True)
class Message:
    role: str
    content: str
    item_id: str = ""
    interrupted: bool = False  # cut short: content is only what was heard
    timeline: tuple[Spoken, ...] = ()
    heard_ms: float | None = None  # where it was cut; None: heard to the end
    seq: int = -1  # its place among every message ever added (set by History.add)
    spoken: bool = False  # said aloud (by the user or the agent), not typed or written
    call: FunctionCall | None = None  # the agent called a tool (content is empty)
    call_id: str = ""  # role "tool": the call this is the output of
    audio: bytes | None = None  # the user's speech (16 kHz mono s16), while it is kept
    audio_dropped: bool = False  # the user's speech was, but is no longer, kept

    @property
    def audio_ms(self) -> float:
        """How much of its audio was heard: a truncation can only shrink it."""
        full = self.timeline[-1].end_ms if self.timeline else 0.0
        return full if self.heard_ms is None else min(full, self.heard_ms)


# The user's speech kept for conversation.item.retrieve: per session at most this
# many items and seconds (1.9 MB), the newest first.
AUDIO_ITEMS = 20
AUDIO_S = 60


# "auto" drops half the prompt's messages at once, not the oldest one per message: then
# its beginning, which the LLM has cached, stays put for five turns or so. Dropping one at
# a time moved it every turn, and from the eleventh on each turn's whole conversation was
# read again (bench.latency --turns 20: voice to voice p50 2.5 s, now 1.4 s).
AUTO_RETENTION = 0.5


class ConversationTooLong(EngineError):
    code = "conversation_too_long"


class History:
    """The conversation in order. Memory holds at most `max_items` messages (the
    oldest go first); the prompt holds fewer, by the session's truncation. The
    user's speech is kept for the newest AUDIO_ITEMS items, AUDIO_S seconds in all."""

    def __init__(self, max_items: int) -> None:
        self._messages: deque[Message] = deque(maxlen=max_items)
        self._added = 0

    def add(self, message: Message) -> None:
        message.seq = self._added
        self._added += 1
        self._messages.append(message)
        if message.audio is not None:
            self._bound_audio()

    def _bound_audio(self) -> None:
        kept_items, kept_bytes = 0, 0
        for message in reversed(self._messages):
            if message.audio is None:
                continue
            kept_items += 1
            kept_bytes += len(message.audio)
            if kept_items > AUDIO_ITEMS or kept_bytes > AUDIO_S * BYTES_PER_S:
                message.audio, message.audio_dropped = None, True

    def find(self, item_id: str) -> Message | None:
        return next((m for m in self._messages if m.item_id == item_id), None)

    def remove(self, item_id: str) -> bool:
        message = self.find(item_id)
        if message is None:
            return False
        self._messages.remove(message)
        return True

    @property
    def last_item_id(self) -> str | None:
        return self._messages[-1].item_id if self._messages else None

    def truncate(self, message: Message, audio_end_ms: float) -> None:
        """Keep only what was heard of an assistant message up to `audio_end_ms`."""
        message.heard_ms = min(audio_end_ms, message.audio_ms)
        message.content = heard_text(message.timeline, message.heard_ms)
        message.interrupted = True

    def prompt(
        self, instructions: str, *, limit: int, truncation: Truncation = "auto", coming: int = 0
    ) -> list[ChatMessage]:
        """What the LLM sees: the instructions as its system prompt, then at most
        `limit` messages of the conversation, interrupted replies exactly as far as
        they were heard. Raises ConversationTooLong if more would be needed and
        truncation is disabled. `coming`: messages still to be added, whose room is
        kept: the start of the prompt they will end."""
        said = [m for m in self._messages if self._in_prompt(m)]
        if len(said) + coming > limit:
            if truncation == "disabled":
                raise ConversationTooLong(
                    f"the conversation has {len(said)} messages, more than the {limit} a "
                    "prompt holds, and truncation is disabled; delete items or enable it"
                )
            ratio = AUTO_RETENTION if isinstance(truncation, str) else truncation
            start = _window_start(self._added + coming, limit, ratio)
            said = [m for m in said if m.seq >= start]
            said = said[max(0, len(said) + coming - limit) :]
        conversation: list[ChatMessage] = []
        previous: Message | None = None
        for m in said:
            if m.call is not None:
                calls = _tool_calls(conversation)
                calls.append(
                    {
                        "id": m.call.call_id,
                        "type": "function",
                        "function": {"name": m.call.name, "arguments": m.call.arguments},
                    }
                )
                if m.call.server:  # this server ran it: its result is the same item's
                    conversation.append(
                        {"role": "tool", "tool_call_id": m.call.call_id, "content": ran(m.call)}
                    )
            elif m.role == "tool":
                conversation.append(
                    {"role": "tool", "tool_call_id": m.call_id, "content": m.content}
                )
            elif continued(previous, m):
                conversation[-1]["content"] = finished(conversation[-1]["content"], m.content)
            else:
                conversation.append({"role": m.role, "content": m.content})
            previous = m
        return [{"role": "system", "content": instructions}, *conversation]

    def stopped_short(self) -> bool:
        """Whether the newest words in the conversation are the user's, said and stopped
        short: the next words the user says finish them (`continued`)."""
        last = next((m for m in reversed(self._messages) if self._in_prompt(m)), None)
        return last is not None and _stops_short(last)

    def _in_prompt(self, message: Message) -> bool:
        return bool(message.content) or self._answered(message)

    def _answered(self, message: Message) -> bool:
        """A tool call the client answered, or an answer to a call still here: an
        unanswered call, or an orphan answer, would leave the LLM a broken exchange."""
        if message.call is not None and message.call.server:
            return message.call.output is not None or message.call.error is not None
        if message.call is not None:
            return any(
                m.role == "tool" and m.call_id == message.call.call_id for m in self._messages
            )
        if message.role == "tool":
            return self.find_call(message.call_id) is not None
        return False

    def find_call(self, call_id: str) -> Message | None:
        return next(
            (m for m in self._messages if m.call is not None and m.call.call_id == call_id), None
        )

    @property
    def chars(self) -> int:
        """The text it holds, every message's (a tool call's arguments included)."""
        return sum(
            len(m.content) + (len(m.call.arguments) if m.call is not None else 0)
            for m in self._messages
        )

    def messages(self) -> list[Message]:
        return list(self._messages)

    def __len__(self) -> int:
        return len(self._messages)


def continued(before: Message | None, after: Message) -> bool:
    """Whether the user's words `after` finish `before`, which stopped short ("How many
    kilometers are in?" ... "10 miles."), with no reply heard between them: one message
    to the LLM. Given them as two, Qwen2.5-Coder-0.5B answered "ten kilometers."; of 15
    such questions typed, it had 8 right apart and 11 joined. Words that are whole stay a
    message of their own, so that a correction is answered as corrected."""
    return before is not None and _stops_short(before) and after.role == "user" and after.spoken


def _stops_short(message: Message) -> bool:
    """The user's spoken words, ending on a word no sentence ends on."""
    return message.role == "user" and message.spoken and unfinished(message.content)


def finished(begun: str | None, rest: str | None) -> str:
    """Words that stopped short, with the words that finish them."""
    return f"{(begun or '').rstrip(UTTERANCE_END)} {rest or ''}"


def ran(call: FunctionCall) -> str:
    """What the LLM reads of a call this server ran: its output, or what went wrong."""
    if call.output is not None:
        return call.output
    return f"The call failed: {(call.error or {}).get('message', 'no answer')}"


def _window_start(added: int, limit: int, ratio: float) -> int:
    """Where a prompt kept by retention ratio starts, as a message number.

    It moves only when the window would pass `limit`, and then so that a
    `ratio` of the limit remains: between moves the prompt's beginning stays
    the same turn after turn.
    """
    if added <= limit:
        return 0
    keep = max(1, int(limit * ratio))
    step = limit + 1 - keep
    return (added - keep) // step * step


def _tool_calls(conversation: list[ChatMessage]) -> list[ToolCallRequest]:
    """The tool calls of the assistant message just before, or of a new one: calls of
    one reply go in one message, as LLM servers expect."""
    last = conversation[-1] if conversation else None
    if last is None or last["role"] != "assistant" or "tool_calls" not in last:
        last = {"role": "assistant", "content": None, "tool_calls": []}
        conversation.append(last)
    return last["tool_calls"]
