"""Tools as a Realtime session names them: a function the client runs, or an MCP server
the server itself connects to (OpenAI's `{"type": "mcp", ...}`).

The same form serves the operator's `tools.default`, where an MCP server may also be a
local command over stdio; a client may name only a URL, and only one the operator
allows (`UrlPolicy`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from app.vocab.chat import Tool

NAME = r"^[A-Za-z0-9_-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionTool(_Strict):
    type: Literal["function"] = "function"
    name: str = Field(min_length=1, max_length=64, pattern=NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolFilter(_Strict):
    tool_names: list[str] | None = None
    read_only: bool | None = None


class ApprovalFilter(_Strict):
    always: ToolFilter | None = None
    never: ToolFilter | None = None


class McpTool(BaseModel):
    # OpenAI's fields this server has no use for (connector_id, defer_loading...) are
    # refused by name below, not silently dropped.
    model_config = ConfigDict(extra="ignore")

    type: Literal["mcp"]
    server_label: str = Field(min_length=1, max_length=64, pattern=NAME)
    server_url: str | None = Field(None, max_length=2048)
    # Only in the operator's tools.default: a local MCP server run over stdio.
    command: list[str] | None = Field(None, min_length=1)
    allowed_tools: list[str] | ToolFilter | None = None
    require_approval: Literal["always", "never"] | ApprovalFilter | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    server_description: str | None = Field(None, max_length=1024)
    connector_id: str | None = None

    @model_validator(mode="after")
    def _one_server(self) -> McpTool:
        if self.connector_id is not None:
            raise ValueError("connectors are OpenAI's own; give a server_url instead")
        if (self.server_url is None) == (self.command is None):
            raise ValueError("an mcp tool needs server_url (or, from the operator, command)")
        if self.server_url is not None and not self.server_url.startswith(("http://", "https://")):
            raise ValueError("server_url must be an http:// or https:// URL")
        return self


AnyTool = Annotated[FunctionTool | McpTool, Field(discriminator="type")]
TOOL_LIST: TypeAdapter[list[AnyTool]] = TypeAdapter(list[AnyTool])


@dataclass(frozen=True, slots=True)
class McpSpec:
    """One MCP server a session may use, and which of its tools, on what terms."""

    label: str
    url: str = ""
    command: tuple[str, ...] = ()
    # Go to this server only, and are never logged (hence repr=False).
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    allowed: frozenset[str] | None = None  # tool names; None: every tool
    read_only: bool = False  # only tools the server marks read-only
    always: frozenset[str] | None = None  # names needing approval; None: all of them
    never: frozenset[str] = frozenset()  # names needing none (wins over `always`)
    description: str = ""
    operator: bool = False  # from tools.default: connected once, shared by sessions

    def offers(self, name: str, read_only: bool) -> bool:
        if self.allowed is not None and name not in self.allowed:
            return False
        return read_only or not self.read_only

    def needs_approval(self, name: str) -> bool:
        if name in self.never:
            return False
        return self.always is None or name in self.always

    @property
    def target(self) -> tuple[Any, ...]:
        """What a connection is to: two specs with the same target share one."""
        return (self.url, self.command, tuple(sorted(self.headers.items())))

    def to_realtime(self) -> dict[str, Any]:
        """As session.updated shows it: without its headers, which are secrets."""
        shown: dict[str, Any] = {"type": "mcp", "server_label": self.label}
        if self.url:
            shown["server_url"] = self.url
        if self.allowed is not None:
            shown["allowed_tools"] = sorted(self.allowed)
        if self.always is None and not self.never:
            shown["require_approval"] = "always"
        elif self.always == frozenset() and not self.never:
            shown["require_approval"] = "never"
        else:
            rule: dict[str, Any] = {"never": {"tool_names": sorted(self.never)}}
            if self.always is not None:
                rule["always"] = {"tool_names": sorted(self.always)}
            shown["require_approval"] = rule
        if self.description:
            shown["server_description"] = self.description
        return shown


def mcp_spec(tool: McpTool, *, operator: bool) -> McpSpec:
    """`tool` as a spec; ValueError if a client names a command."""
    if tool.command is not None and not operator:
        raise ValueError("only the operator's tools may run a command; give a server_url")
    headers = dict(tool.headers or {})
    if tool.authorization:
        headers["Authorization"] = f"Bearer {tool.authorization}"
    allowed, read_only = None, False
    if isinstance(tool.allowed_tools, list):
        allowed = frozenset(tool.allowed_tools)
    elif tool.allowed_tools is not None:
        names = tool.allowed_tools.tool_names
        allowed = None if names is None else frozenset(names)
        read_only = bool(tool.allowed_tools.read_only)
    always, never = _approval(tool.require_approval)
    return McpSpec(
        label=tool.server_label,
        url=tool.server_url or "",
        command=tuple(tool.command or ()),
        headers=headers,
        allowed=allowed,
        read_only=read_only,
        always=always,
        never=never,
        description=tool.server_description or "",
        operator=operator,
    )


def _approval(
    rule: Literal["always", "never"] | ApprovalFilter | None,
) -> tuple[frozenset[str] | None, frozenset[str]]:
    """(names that need approval, None: all; names that need none). OpenAI asks for
    approval unless told otherwise, and so does this server."""
    if rule is None or rule == "always":
        return None, frozenset()
    if rule == "never":
        return frozenset(), frozenset()
    never = frozenset((rule.never.tool_names or []) if rule.never else [])
    if rule.always is None:
        # Only some are named as never needing approval: the rest still do.
        return (None, never) if rule.never else (frozenset(), never)
    return frozenset(rule.always.tool_names or []), never


def chat_tool(tool: FunctionTool) -> Tool:
    """A Realtime function tool, as an OpenAI chat tool."""
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


@dataclass(frozen=True, slots=True)
class ToolSet:
    """A session's tools: functions for the client to run, servers for this one."""

    functions: tuple[Tool, ...] = ()
    servers: tuple[McpSpec, ...] = ()


def tool_set(tools: Sequence[FunctionTool | McpTool], *, operator: bool = False) -> ToolSet:
    """ValueError on a command from a client, or two servers with one label."""
    servers = [mcp_spec(t, operator=operator) for t in tools if isinstance(t, McpTool)]
    labels = [spec.label for spec in servers]
    if len(set(labels)) != len(labels):
        raise ValueError("two mcp tools have the same server_label")
    functions = tuple(chat_tool(t) for t in tools if isinstance(t, FunctionTool))
    return ToolSet(functions, tuple(servers))


class UrlPolicy:
    """The MCP URLs a client may name: patterns of scheme://host[:port]/path where `*`
    stands for part of a host name (never a dot-less jump to another host: it matches no
    `/`, `?`, `#`, `@` or `:`), any port, or any rest of the path."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self._patterns = [_Pattern.parse(pattern) for pattern in patterns]

    def allows(self, url: str) -> bool:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return False
        # A user part would let a careless pattern match http://127.0.0.1:1@elsewhere/.
        if "@" in parts.netloc or "\\" in url or not parts.hostname:
            return False
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
        return any(p.matches(parts.scheme, parts.hostname, port, rest) for p in self._patterns)


_PATTERN = re.compile(r"^(https?)://([^/:?#@]+)(?::([0-9*]+))?(/.*)?$")


@dataclass(frozen=True, slots=True)
class _Pattern:
    scheme: str
    host: re.Pattern[str]
    port: str | None  # None: the scheme's own; "*": any
    path: re.Pattern[str]

    @classmethod
    def parse(cls, pattern: str) -> _Pattern:
        found = _PATTERN.match(pattern.strip())
        if found is None:
            raise ValueError(f"not an MCP URL pattern (scheme://host[:port]/path): {pattern!r}")
        scheme, host, port, path = found.groups()
        return cls(
            scheme,
            _glob(host.lower(), "[^/?#@:]*"),
            port,
            _glob(path or "/", ".*"),
        )

    def matches(self, scheme: str, host: str, port: int | None, rest: str) -> bool:
        if scheme != self.scheme or not self.host.fullmatch(host.lower()):
            return False
        if self.port != "*" and (str(port) if port is not None else None) != self.port:
            return False
        return bool(self.path.fullmatch(rest or "/"))


def _glob(text: str, star: str) -> re.Pattern[str]:
    return re.compile(star.join(re.escape(part) for part in text.split("*")))
