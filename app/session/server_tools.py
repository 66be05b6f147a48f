"""The MCP servers one session uses: their tools listed as the session names them, offered
to the LLM beside the client's functions, and called when the LLM calls one.

Listing starts as soon as a server is named (session.update, or the operator's defaults
at the start), and a reply waits for listings still under way, within their timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.config.tools import ToolsSettings
from app.ids import new_id
from app.session import messages as msg
from app.session.options import OptionChanges
from app.tasks import TaskSet
from app.tools.mcp_link import McpLink, ServerTool, ToolFailure
from app.tools.servers import ToolServers
from app.tools.specs import McpSpec
from app.vocab.chat import Tool

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Server:
    spec: McpSpec
    link: McpLink
    item_id: str
    tools: list[ServerTool] = field(default_factory=list)
    listing: asyncio.Task[None] | None = None
    error: str | None = None  # why its listing failed


@dataclass(frozen=True, slots=True)
class Pending:
    """A call waiting for the client's approval; `changes`: the tools of the response that
    asked, where it had its own (made again from the session's options when approved)."""

    server: str
    name: str
    arguments: str
    changes: OptionChanges | None = None

    @property
    def call(self) -> tuple[str, str, str]:
        return self.server, self.name, self.arguments


class ServerTools:
    def __init__(
        self,
        session_id: str,
        servers: ToolServers,
        emit: Callable[[msg.SessionMessage], None],
        last_item_id: Callable[[], str | None],
    ) -> None:
        self._session_id = session_id
        self._servers = servers
        self._emit = emit
        self._last_item_id = last_item_id
        self._by_label: dict[str, _Server] = {}
        self._approvals: dict[str, Pending] = {}  # by the request's item id
        self._borrowed: set[str] = set()  # labels whose server is another set's

    @property
    def settings(self) -> ToolsSettings:
        return self._servers.settings

    def another(self, name: str) -> ServerTools:
        """A set of its own on the same shared servers, that tells the client nothing (a
        Live session's Responses backend, which words its calls itself)."""
        return ServerTools(f"{self._session_id}:{name}", self._servers, lambda _: None,
                           lambda: None)  # fmt: skip

    def for_reply(self, specs: tuple[McpSpec, ...]) -> ServerTools:
        """A reply's own servers (its response.create named tools): those the session has
        already, as listed; the others listed now, told to the client as the session's
        are, and let go with aclose(). Approvals are asked of the session."""
        own = ServerTools(self._session_id, self._servers, self._emit, self._last_item_id)
        own._approvals = self._approvals
        for spec in specs:
            have = self._by_label.get(spec.label)
            if have is not None and have.spec == spec:
                own._by_label[spec.label] = have
                own._borrowed.add(spec.label)
        own.use(specs)
        return own

    def refused(self, specs: tuple[McpSpec, ...]) -> str | None:
        """Why the session may not use these servers, before any connection is made."""
        for spec in specs:
            why = self._servers.refused(spec)
            if why is not None:
                return why
        return None

    def use(self, specs: tuple[McpSpec, ...]) -> None:
        """The session's servers are now `specs`: list the new ones' tools, drop the old."""
        wanted = {spec.label: spec for spec in specs}
        for label, server in list(self._by_label.items()):
            if wanted.get(label) != server.spec:
                self._drop(self._by_label.pop(label))
        for label, spec in wanted.items():
            if label not in self._by_label:
                server = _Server(spec, self._servers.link(spec), new_id("item"))
                self._by_label[label] = server
                server.listing = asyncio.create_task(
                    self._list(server), name=f"{self._session_id}:mcp-list:{label}"
                )

    async def _list(self, server: _Server) -> None:
        label = server.spec.label
        self._emit(msg.ToolsListing(server.item_id, label, self._last_item_id()))
        try:
            listed = await server.link.tools(self.settings.list_timeout_s)
        except ToolFailure as exc:
            log.warning("mcp server %s: %s", label, exc, extra={"session_id": self._session_id})
            server.error = str(exc)
            self._emit(msg.ToolsListed(server.item_id, label, error=server.error))
            return
        server.tools = [tool for tool in listed if server.spec.offers(tool.name, tool.read_only)]
        shown = tuple(tool.to_realtime() for tool in server.tools)
        self._emit(msg.ToolsListed(server.item_id, label, shown))

    async def ready(self) -> None:
        """Wait for listings under way (each bounded by its timeout)."""
        listings = [s.listing for s in self._by_label.values() if s.listing is not None]
        if listings:
            await asyncio.wait(listings)

    def listings(self) -> list[tuple[str, str, list[dict[str, Any]], str | None]]:
        """Each listing that has ended: (its item id, the server's label, its tools as
        listed, why it failed)."""
        return [
            (s.item_id, label, [tool.to_realtime() for tool in s.tools], s.error)
            for label, s in self._by_label.items()
            if s.listing is not None and s.listing.done()
        ]

    def chat_tools(self, taken: set[str]) -> list[Tool]:
        """The servers' tools for the LLM: not those named like one in `taken` (the
        client's functions), at most tools.max_tools."""
        tools: list[Tool] = []
        for server in self._by_label.values():
            for tool in server.tools:
                if tool.name in taken or len(tools) >= self.settings.max_tools:
                    continue
                taken = taken | {tool.name}
                function = {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                }
                tools.append({"type": "function", "function": function})
        return tools

    def server_of(
        self, name: str, taken: set[str] | frozenset[str] = frozenset()
    ) -> McpSpec | None:
        """The server whose tool `name` is, if a server's and not one of `taken` (the
        client's functions, which chat_tools() left the servers' out for)."""
        if name in taken:
            return None
        for server in self._by_label.values():
            if any(tool.name == name for tool in server.tools):
                return server.spec
        return None

    async def call(self, label: str, name: str, arguments: str) -> str:
        """Run the tool; ToolFailure if it cannot be run or fails."""
        server = self._by_label.get(label)
        if server is None:
            raise ToolFailure("protocol_error", f"no MCP server {label!r} in this session")
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ToolFailure("protocol_error", "the arguments are not a JSON object", -32602)
        started = time.monotonic()
        failed = True
        try:
            output = await server.link.call(name, parsed, self.settings.call_timeout_s)
            failed = False
        finally:
            self._servers.counted(label, time.monotonic() - started, failed=failed)
        return output[: self.settings.max_result_chars]

    def ask_approval(self, item_id: str, pending: Pending) -> None:
        self._approvals[item_id] = pending
        while len(self._approvals) > 16:  # bounded: the oldest unanswered is forgotten
            self._approvals.pop(next(iter(self._approvals)))

    def answered(self, request_id: str) -> Pending | None:
        """The call an approval response is about (asked once only)."""
        return self._approvals.pop(request_id, None)

    def _drop(self, server: _Server) -> None:
        label = server.spec.label
        if label in self._borrowed:  # the session's own, which it lets go itself
            self._borrowed.discard(label)
            return
        if server.listing is not None:
            server.listing.cancel()
        # An approval asked for the server it was: not for another under its label.
        for request_id in [k for k, p in self._approvals.items() if p.server == label]:
            del self._approvals[request_id]
        if not server.spec.operator:
            _closing.spawn(server.link.aclose(), f"mcp-close:{label}")

    def let_go(self) -> None:
        """aclose() in the background: a reply's own servers do not hold up the next turn."""
        _closing.spawn(self.aclose(), f"{self._session_id}:mcp-let-go")

    async def aclose(self) -> None:
        mine = [s for label, s in self._by_label.items() if label not in self._borrowed]
        servers, self._by_label = mine, {}
        for server in servers:
            if server.listing is not None:
                server.listing.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(
                *(s.link.aclose() for s in servers if not s.spec.operator),
                return_exceptions=True,
            )


_closing = TaskSet()  # closes under way: held until they end
