"""Chat with an LLM, in OpenAI's shapes: messages, tools, and what a stream yields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict


class ToolCallRequest(TypedDict):
    id: str
    type: Literal["function"]
    function: dict[str, str]  # name, arguments (JSON text)


class ChatMessage(TypedDict):
    """An OpenAI chat message: an assistant's may call tools, a tool's answers one."""

    role: str
    content: str | None
    tool_calls: NotRequired[list[ToolCallRequest]]
    tool_call_id: NotRequired[str]


# OpenAI chat tools ({type: function, function: {name, description, parameters}}) and
# tool_choice ("auto", "none", "required", or {type: function, function: {name}}).
Tool = dict[str, Any]
ToolChoice = str | dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """More of the tool call number `index`: its id and name come first, then its
    arguments (JSON text) in pieces."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


Delta = str | ToolCallDelta


@dataclass(slots=True)
class TokenCount:
    """Tokens a stream used, added to as it runs: from the server's `usage` where it sends
    one, else as the engine counts them."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0  # of `prompt`, those the engine had read already (its prefix cache)
