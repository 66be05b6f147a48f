"""What a Live client may send, parsed once at the edge into typed commands.

A union discriminated on `type`; an unknown type or a bad field is a BadEvent with
the code and the offending param, which the dialect answers with Live's `error`
event (the session goes on). Unknown fields are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from app.live.session_config import SessionConfig, SessionUpdate

MAX_APPEND_CHARS = 8_000  # instructions, thinking and commentary: Live's 500 tokens, roughly


class BadEvent(ValueError):
    """A client event that was refused; the session goes on."""

    def __init__(self, message: str, code: str = "invalid_value", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event_id: str | None = None


class Start(_Event):
    type: Literal["session.start"]
    session: SessionConfig


class Update(_Event):
    type: Literal["session.update"]
    session: SessionUpdate


class AudioAppend(_Event):
    type: Literal["session.input_audio.append"]
    audio: str  # base64, in the start config's format; decoded by the dialect


class Mute(_Event):
    type: Literal["session.input_audio.mute"]


class Unmute(_Event):
    type: Literal["session.input_audio.unmute"]


class _Appended(_Event):
    content: str = Field(min_length=1, max_length=MAX_APPEND_CHARS)
    delegation_id: str | None = None


class InstructionsAppend(_Appended):
    """Developer instructions for the rest of the conversation."""

    type: Literal["session.instructions.append"]


class ThinkingAppend(_Appended):
    """Silent context: it may shape what the agent says later, and asks for no speech."""

    type: Literal["session.thinking.append"]


class CommentaryAppend(_Appended):
    """Context the agent tells the user: it speaks about it now."""

    type: Literal["session.commentary.append"]


class Close(_Event):
    type: Literal["session.close"]


class ResponseCreate(_Event):
    """The Responses backend answers its conversation (Responses delegation)."""

    type: Literal["response.create"]


class ResponseItemCreate(_Event):
    """An item for the Responses backend's conversation: a message, or a function call's
    output (checked by the delegation)."""

    type: Literal["response.item.create"]
    item: dict[str, Any]


class Decisions(_Event):
    """Commands for a Decisions backend, which this server does not run."""

    type: Literal["decision.create", "decision.item.create", "decision.item.delete"]


class FixturePlay(_Event):
    type: Literal["session.output_audio.fixture.play"]
    audio: str  # base64 pcm16 at 24 kHz, whatever the session's format


class DtmfSend(_Event):
    type: Literal["transport.dtmf.send"]
    event: str = Field(pattern=r"^[0-9A-D*#]$")


ClientCommand = Annotated[
    Start | Update | AudioAppend | Mute | Unmute | InstructionsAppend | ThinkingAppend
    | CommentaryAppend | Close | ResponseCreate | ResponseItemCreate | Decisions | FixturePlay
    | DtmfSend,
    Field(discriminator="type"),
]  # fmt: skip

_ADAPTER: TypeAdapter[ClientCommand] = TypeAdapter(ClientCommand)
COMMANDS = (
    Start, Update, AudioAppend, Mute, Unmute, InstructionsAppend, ThinkingAppend,
    CommentaryAppend, Close, ResponseCreate, ResponseItemCreate, Decisions, FixturePlay,
    DtmfSend,
)  # fmt: skip
KNOWN = sorted(
    kind
    for model in COMMANDS
    for kind in model.model_fields["type"].annotation.__args__  # type: ignore[union-attr]
)


def parse(event: dict[str, Any]) -> ClientCommand:
    kind = event.get("type")
    if kind not in KNOWN:
        raise BadEvent(
            f"unknown event type {str(kind)[:64]!r}; a Live client sends {', '.join(KNOWN)}",
            "unknown_event",
            "type",
        )
    try:
        return _ADAPTER.validate_python(event)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"][1:]) or None
        raise BadEvent(f"{where or kind}: {problem['msg']}", "invalid_value", where) from None


def event_id_of(event: dict[str, Any]) -> str | None:
    value = event.get("event_id")
    return value[:128] if isinstance(value, str) else None
