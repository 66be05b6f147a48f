"""What a Live client may send, parsed once at the edge into typed commands.

A union discriminated on `type`; an unknown type or a bad field is a BadEvent with
the code and the offending param, which the dialect answers with Live's `error`
event (the session goes on). Unknown fields are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from app.events.client import BadEvent, ClientEvent
from app.events.client import event_id_of as event_id_of
from app.live.session_config import SessionConfig, SessionUpdate

MAX_APPEND_CHARS = 8_000  # instructions, thinking and commentary: Live's 500 tokens, roughly


class Start(ClientEvent):
    type: Literal["session.start"]
    session: SessionConfig


class Update(ClientEvent):
    type: Literal["session.update"]
    session: SessionUpdate


class AudioAppend(ClientEvent):
    type: Literal["session.input_audio.append"]
    audio: str  # base64, in the start config's format; decoded by the dialect


class Mute(ClientEvent):
    type: Literal["session.input_audio.mute"]


class Unmute(ClientEvent):
    type: Literal["session.input_audio.unmute"]


class _Appended(ClientEvent):
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


class Close(ClientEvent):
    type: Literal["session.close"]


class ResponseCreate(ClientEvent):
    """The Responses backend answers its conversation (Responses delegation)."""

    type: Literal["response.create"]


class ResponseItemCreate(ClientEvent):
    """An item for the Responses backend's conversation: a message, or a function call's
    output (checked by the delegation)."""

    type: Literal["response.item.create"]
    item: dict[str, Any]


class Decisions(ClientEvent):
    """Commands for a Decisions backend, which this server does not run."""

    type: Literal["decision.create", "decision.item.create", "decision.item.delete"]


class FixturePlay(ClientEvent):
    type: Literal["session.output_audio.fixture.play"]
    audio: str  # base64 pcm16 at 24 kHz, whatever the session's format


class DtmfSend(ClientEvent):
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
