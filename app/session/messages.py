"""What a session tells its client, as typed messages; a dialect turns them into its wire events.

Items are the conversation's entries (a user utterance, a typed message, a
reply), each with an id. `previous_item_id` places an item after another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.vocab.speech import WordScore

Modality = Literal["audio", "text"]


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The user started talking; their utterance will be the item `item_id`."""

    item_id: str
    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    item_id: str
    audio_end_ms: int
    silence_ms: int = 0  # how long the user had been quiet when the turn was judged over


@dataclass(frozen=True, slots=True)
class InputCommitted:
    """The user's turn is over: their audio is the item `item_id`, not yet transcribed."""

    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class InputTimedOut:
    """Nobody spoke for the session's idle timeout after a reply: the silence from
    `audio_start_ms` becomes the item `item_id`, and the agent will speak up."""

    item_id: str
    audio_start_ms: int
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class UserTranscribed:
    """What the user said in the item `item_id` (empty: nothing could be made out).

    `words`: a score per word, when the session asked for them. `language`: the Whisper
    code of what was heard (empty: not known).
    """

    item_id: str
    transcript: str
    audio_s: float
    words: tuple[WordScore, ...] | None = None
    language: str = ""


@dataclass(frozen=True, slots=True)
class TranscriptionFailed:
    """The user's item `item_id` could not be transcribed (`code`: stt_failed or
    stt_timeout); it is kept, with its audio and no words."""

    item_id: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class KeyPressed:
    """A telephone keypad press (DTMF) from the caller; `at` is Unix time."""

    key: str
    at: float


@dataclass(frozen=True, slots=True)
class TextItemAdded:
    """A message the client typed into the conversation."""

    item_id: str
    role: Literal["user", "assistant", "system"]
    text: str
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class ItemDeleted:
    item_id: str


@dataclass(frozen=True, slots=True)
class ItemTruncated:
    """Only the first `audio_end_ms` of a reply were heard; its text now says only that."""

    item_id: str
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class ReplyStarted:
    """The agent begins a reply. What it says, and any tools it calls, are its output
    items, each announced as it begins (MessageStarted, FunctionCallStarted)."""

    response_id: str
    modality: Modality = "audio"


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """The reply's words (spoken or written) begin: the item `item_id`."""

    response_id: str
    item_id: str
    previous_item_id: str | None
    output_index: int
    modality: Modality = "audio"


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A tool the agent calls: the item `item_id`; `arguments` is JSON text."""

    item_id: str
    call_id: str
    name: str
    arguments: str
    output_index: int
    previous_item_id: str | None = None
    complete: bool = True  # False: cut short, or its arguments did not parse
    # Run by this server on an MCP server of this label (an mcp_call), not by the client.
    server: str = ""
    output: str | None = None  # the server's call, once it ended well
    error: dict[str, object] | None = None  # ...or badly: OpenAI's mcp_call error
    approval_request_id: str | None = None  # the client approved it first


@dataclass(frozen=True, slots=True)
class ServerCallRunning:
    """A call the server runs (`call.server`): its arguments are whole, it has started."""

    response_id: str
    call: FunctionCall


@dataclass(frozen=True, slots=True)
class ServerCallEnded:
    """A server's call ended: `call.output`, or `call.error`."""

    response_id: str
    call: FunctionCall


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """The agent would call a server's tool that needs the client's approval first: the
    item `item_id`, an output of the reply."""

    response_id: str
    item_id: str
    server: str
    name: str
    arguments: str
    output_index: int
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class ApprovalAnswered:
    """The client's answer to an approval request: the item `item_id`."""

    item_id: str
    request_id: str
    approve: bool
    reason: str | None
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class ToolsListing:
    """The session connects to an MCP server and lists its tools: the item `item_id`."""

    item_id: str
    server: str
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class ToolsListed:
    """`tools` (each as the Realtime API shows one), or `error` when listing failed."""

    item_id: str
    server: str
    tools: tuple[dict[str, object], ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionCallStarted:
    response_id: str
    call: FunctionCall  # its arguments still to come


@dataclass(frozen=True, slots=True)
class FunctionCallArguments:
    """More of a call's arguments."""

    response_id: str
    item_id: str
    call_id: str
    output_index: int
    delta: str
    server: str = ""  # an MCP server's call (FunctionCall.server)


@dataclass(frozen=True, slots=True)
class ToolOutputAdded:
    """The client's answer to a function call: the item `item_id`."""

    item_id: str
    call_id: str
    output: str
    previous_item_id: str | None


@dataclass(frozen=True, slots=True)
class TextWritten:
    """More of a written (text only) reply."""

    response_id: str
    item_id: str
    output_index: int
    delta: str


@dataclass(frozen=True, slots=True)
class ReplyAudioStarted:
    """The reply's first audio went out."""

    response_id: str


@dataclass(frozen=True, slots=True)
class ClauseSpoken:
    """A clause of the reply started playing; `delta` extends its transcript."""

    response_id: str
    item_id: str
    output_index: int
    delta: str


@dataclass(frozen=True, slots=True)
class ReplyAudioStopped:
    """The reply's audio finished playing."""

    response_id: str


@dataclass(frozen=True, slots=True)
class ReplyAudioCleared:
    """The reply's audio was cut off (an interruption)."""

    response_id: str


ReplyStatus = Literal["completed", "cancelled", "failed"]
# Why a reply was cancelled: the user talked over it, or the client asked.
CancelReason = Literal["turn_detected", "client_cancelled"]


@dataclass(frozen=True, slots=True)
class ReplyEnded:
    """The reply is over; `text` is what the user heard (or read) of its words.

    `message` is its words' MessageStarted, if it said anything; `calls`, the tools
    it called. `heard_ms` is set when an interruption cut its audio short.
    `timings_ms` are its stages, measured from the end of the user's turn.
    """

    response_id: str
    status: ReplyStatus
    text: str = ""
    message: MessageStarted | None = None
    calls: tuple[FunctionCall, ...] = ()
    approvals: tuple[ApprovalRequested, ...] = ()
    timings_ms: dict[str, float] = field(default_factory=dict)
    reason: CancelReason | None = None
    heard_ms: int | None = None
    error: str | None = None
    modality: Modality = "audio"
    voice_to_voice_ms: float | None = None  # end of the user's speech to the first frame sent
    # Wall-clock moments of the turn and its stages (TurnTimings.stamps), for traces.
    stamps: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Problem:
    """Something went wrong that the client should hear about; the session goes on.

    `code`: turn_dropped (the agent was busy), an engine's (llm_unavailable, llm_timeout,
    llm_stream_broken, stt_failed, stt_timeout, tts_failed, tts_timeout, engine_error),
    conversation_too_long, internal.
    """

    code: str
    message: str


SessionMessage = (
    SpeechStarted
    | SpeechStopped
    | InputTimedOut
    | InputCommitted
    | UserTranscribed
    | TranscriptionFailed
    | KeyPressed
    | TextItemAdded
    | ItemDeleted
    | ItemTruncated
    | ReplyStarted
    | MessageStarted
    | FunctionCallStarted
    | FunctionCallArguments
    | ServerCallRunning
    | ServerCallEnded
    | ApprovalRequested
    | ApprovalAnswered
    | ToolsListing
    | ToolsListed
    | ToolOutputAdded
    | TextWritten
    | ReplyAudioStarted
    | ClauseSpoken
    | ReplyAudioStopped
    | ReplyAudioCleared
    | ReplyEnded
    | Problem
)
