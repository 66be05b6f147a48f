"""Tools the server runs itself: the operator's for every call, and which MCP servers a
client may name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from app.config.server import CsvList, split_csv


def read_tool_list(value: Any) -> Any:
    """A JSON list as text, or `@path` to a file holding one."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return []
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"cannot read the tools file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"tools must be a JSON list: {exc}") from None


class ToolsSettings(BaseModel):
    # NoDecode: an environment value may be @path as well as JSON; _read decides.
    default: Annotated[list[dict[str, Any]], NoDecode] = Field(
        default_factory=list,
        description="Tools every session starts with, in the form of a Realtime session's "
        "`tools` (a JSON list), or @path/to/file.json. This is how a phone call gets tools: "
        'an `mcp` tool here may also be a local command over stdio ("command": [...]), '
        "which a client may never name. Its connections are shared by every session.",
    )
    mcp_allowed_urls: CsvList = Field(
        default_factory=list,
        description="The MCP server URLs a client may name in its own `mcp` tools: comma "
        "separated scheme://host[:port]/path patterns, where * stands for part of a host "
        "name, any port or any rest of the path (https://*.example.com/mcp/*). Empty: none. "
        "Any other URL is refused before a connection is made.",
    )
    list_timeout_s: float = Field(
        10.0, gt=0, le=120, description="How long listing an MCP server's tools may take."
    )
    call_timeout_s: float = Field(
        15.0, gt=0, le=300, description="How long one MCP tool call may take."
    )
    filler_after_ms: int = Field(
        700,
        ge=0,
        description="A tool call still running this long into a spoken reply makes the "
        'agent say a short filler ("Let me check."); 0: never.',
    )
    max_tools: int = Field(
        32, ge=1, le=256, description="The most MCP tools one session offers the LLM."
    )
    max_result_chars: int = Field(
        4000,
        ge=100,
        description="A tool's result is cut to this many characters before the LLM reads it.",
    )
    max_rounds: int = Field(
        1,
        ge=1,
        le=16,
        description="The most rounds of tool calls in one reply; after the last, the LLM "
        "answers in words. Raise it for a model that chains calls well: the embedded 0.5B "
        "model, shown a result, often called another tool with made-up arguments.",
    )

    @field_validator("default", mode="before")
    @classmethod
    def _read(cls, value: Any) -> Any:
        return read_tool_list(value)

    @field_validator("default")
    @classmethod
    def _check(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Checked at start-up, so a typo stops the server rather than every call.
        from app.tools.specs import TOOL_LIST, tool_set

        tool_set(TOOL_LIST.validate_python(value), operator=True)
        return value

    @field_validator("mcp_allowed_urls", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("mcp_allowed_urls")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        from app.tools.specs import UrlPolicy

        UrlPolicy(value)  # ValueError names a pattern that is no URL
        return value
