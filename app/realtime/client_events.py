"""What a Realtime client may send, parsed once at the edge into typed commands.

A union discriminated on `type`; an unknown type or a bad field is a BadEvent
with the code, the offending param and the client's event_id, which the
dialect answers with an `error` event. Unknown fields are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)

from app.events.client import BadEvent, ClientEvent
from app.events.client import event_id_of as event_id_of
from app.realtime.session_config import (
    TURN_DETECTION_TAGS,
    NamedFunction,
    SessionConfig,
    client_tools,
)
from app.tools.specs import AnyTool


class SessionUpdate(ClientEvent):
    type: Literal["session.update"]
    session: SessionConfig


class InputAudioAppend(ClientEvent):
    type: Literal["input_audio_buffer.append"]
    audio: str  # base64 pcm16 mono at 24 kHz, decoded by the dialect


class InputAudioCommit(ClientEvent):
    type: Literal["input_audio_buffer.commit"]


class InputAudioClear(ClientEvent):
    type: Literal["input_audio_buffer.clear"]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = "input_text"
    text: str


class MessageItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    type: Literal["message"]
    role: Literal["user", "assistant", "system"]
    content: list[TextPart] = Field(min_length=1)

    @property
    def text(self) -> str:
        return " ".join(part.text for part in self.content)


class FunctionCallOutputItem(BaseModel):
    """The client's answer to a function call the agent made."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    type: Literal["function_call_output"]
    call_id: str
    output: str


class ApprovalResponseItem(BaseModel):
    """The client's answer to an mcp_approval_request."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool
    reason: str | None = Field(None, max_length=1024)


def _item_kind(item: Any) -> str | None:
    kind = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind if isinstance(kind, str) else None


ITEM_TAGS = ("message", "function_call_output", "mcp_approval_response")
Item = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ApprovalResponseItem, Tag("mcp_approval_response")],
    Discriminator(
        _item_kind,
        custom_error_type="invalid_value",
        custom_error_message=(
            "items are of type message, function_call_output or mcp_approval_response"
        ),
    ),
]


class ItemCreate(ClientEvent):
    type: Literal["conversation.item.create"]
    item: Item


class ItemRetrieve(ClientEvent):
    type: Literal["conversation.item.retrieve"]
    item_id: str


class ItemDelete(ClientEvent):
    type: Literal["conversation.item.delete"]
    item_id: str


class ItemTruncate(ClientEvent):
    type: Literal["conversation.item.truncate"]
    item_id: str
    content_index: int = 0
    audio_end_ms: int = Field(ge=0)


class ResponseOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    instructions: str | None = None
    # For this response only: the session's own stay as they are.
    tools: Annotated[list[AnyTool] | None, BeforeValidator(client_tools)] = None
    tool_choice: Literal["auto", "none", "required"] | NamedFunction | None = None


class ResponseCreate(ClientEvent):
    type: Literal["response.create"]
    response: ResponseOptions | None = None


class ResponseCancel(ClientEvent):
    type: Literal["response.cancel"]
    response_id: str | None = None


class OutputAudioClear(ClientEvent):
    type: Literal["output_audio_buffer.clear"]


ClientCommand = Annotated[
    SessionUpdate
    | InputAudioAppend
    | InputAudioCommit
    | InputAudioClear
    | ItemCreate
    | ItemRetrieve
    | ItemDelete
    | ItemTruncate
    | ResponseCreate
    | ResponseCancel
    | OutputAudioClear,
    Field(discriminator="type"),
]
_COMMAND: TypeAdapter[ClientCommand] = TypeAdapter(ClientCommand)
_UNKNOWN_TYPE = ("union_tag_invalid", "union_tag_not_found")
# Tags of the unions inside events: pydantic puts them in error locations, but no
# field is called that.
UNION_TAGS = (*TURN_DETECTION_TAGS, *ITEM_TAGS)


def parse(event: dict[str, Any]) -> ClientCommand:
    try:
        return _COMMAND.validate_python(event)
    except ValidationError as exc:
        problem = exc.errors()[0]
        if problem["type"] in _UNKNOWN_TYPE:
            raise BadEvent(
                f"unsupported client event type: {event.get('type')!r}", "unknown_event"
            ) from None
        # The first element of the location is the event's type; union tags are no field.
        where = [str(part) for part in problem["loc"][1:] if part not in UNION_TAGS]
        param = ".".join(where) or None
        message = f"{param}: {problem['msg']}" if param else problem["msg"]
        raise BadEvent(message, "invalid_value", param) from None
