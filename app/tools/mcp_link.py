"""One connection to an MCP server, through the official `mcp` SDK: streamable HTTP to a
URL, or stdio to a command the operator configured.

The SDK's client must be entered and left in one task (anyio's cancel scopes), so an
owner task holds it open; calls come from any session's task and may run at once. A
connection that drops is made again at the next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

from app.tools.specs import McpSpec

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0

FailureKind = Literal["protocol_error", "tool_execution_error", "http_error"]


class ToolFailure(Exception):
    """A listing or call that did not work, in the kinds OpenAI's mcp_call error has."""

    def __init__(self, kind: FailureKind, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code

    def as_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.kind, "message": str(self)}
        if self.kind != "tool_execution_error":
            error["code"] = self.code
        return error


# MCP's code for a request that timed out (the SDK raises it too).
TIMED_OUT = -32001


class _Closed(Exception):
    """The connection is gone (the server restarted, the process ended)."""

    def __init__(self, message: str, client: Any) -> None:
        super().__init__(message)
        self.client = client


@dataclass(frozen=True, slots=True)
class ServerTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    annotations: dict[str, Any] | None = None

    def to_realtime(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "input_schema": self.input_schema}
        if self.description:
            shown["description"] = self.description
        if self.annotations:
            shown["annotations"] = self.annotations
        return shown


class McpLink:
    def __init__(self, spec: McpSpec) -> None:
        self.spec = spec
        self._client: Any = None  # mcp.Client, while connected
        self._owner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()  # the current owner's
        self._connecting = asyncio.Lock()
        self._listing: list[ServerTool] | None = None  # of this connection
        self._closed = False  # for good (aclose): a call after it does not connect again

    @property
    def name(self) -> str:
        return self.spec.label

    async def tools(self, timeout_s: float) -> list[ServerTool]:
        """The server's tools (listed once a connection)."""
        async with _deadline(timeout_s, "listing its tools"):
            client = await self._connected()
            if self._listing is None:
                listed = await client.list_tools()
                self._listing = [_server_tool(tool) for tool in listed.tools]
        return list(self._listing)

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> str:
        """The tool's result as text; ToolFailure if it failed or said it did. A
        connection found closed is made again once, and the call sent again."""
        async with _deadline(timeout_s, f"calling {name}"):
            try:
                result = await self._call_once(name, arguments)
            except _Closed as closed:
                log.info("mcp server %s: connection closed; connecting again", self.spec.label)
                await self._reset(closed.client)
                try:
                    result = await self._call_once(name, arguments)
                except _Closed as exc:
                    raise ToolFailure("http_error", f"the server went away: {exc}") from None
        text = _text(result)
        if result.is_error:
            raise ToolFailure("tool_execution_error", text or "the tool failed")
        return text

    async def _call_once(self, name: str, arguments: dict[str, Any]) -> Any:
        from mcp import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        client = await self._connected()
        try:
            return await client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise _Closed(str(exc), client) from None
            raise ToolFailure("protocol_error", str(exc), exc.code) from None
        except ToolFailure:
            raise
        except Exception as exc:  # the transport's own errors: the connection is gone
            raise _Closed(f"{type(exc).__name__}: {exc}", client) from None

    async def _connected(self) -> Any:
        async with self._connecting:
            if self._closed:
                raise ToolFailure("http_error", "the session let this server go")
            if self._client is not None and self._owner is not None and not self._owner.done():
                return self._client
            self._listing = None
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            closing = self._closing = asyncio.Event()
            owner = self._owner = asyncio.create_task(
                self._own(ready, closing), name=f"mcp:{self.spec.label}"
            )
            try:
                self._client = await ready
            except asyncio.CancelledError:
                owner.cancel()
                raise
            return self._client

    async def _own(self, ready: asyncio.Future[Any], closing: asyncio.Event) -> None:
        """Holds one connection open until `closing` is set, or until it drops."""
        from mcp import Client

        client = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(await self._transport(stack), mode="legacy")
                )
                if ready.done():  # whoever waited for it gave up
                    return
                ready.set_result(client)
                await closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # noqa: BLE001 - an ExceptionGroup from the SDK's tasks
            why = _cause(exc)
            if not ready.done():
                ready.set_exception(ToolFailure("http_error", f"cannot connect: {why}"))
            else:
                log.warning("mcp server %s: connection lost: %s", self.spec.label, why)
        finally:
            if client is not None and self._client is client:  # not a newer one's
                self._client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.spec.command:
            from mcp import StdioServerParameters

            command, *args = self.spec.command
            return StdioServerParameters(command=command, args=args)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(self.spec.headers), timeout=30.0)
        )
        return streamable_http_client(self.spec.url, http_client=http)

    async def _reset(self, client: Any) -> None:
        """Let `client`'s connection go, unless another caller did already; the next use
        makes a new one."""
        async with self._connecting:
            if self._client is not client:
                return
            self._client = None
            await self._disconnect()

    async def aclose(self) -> None:
        """For good: calls after it fail, and do not connect again."""
        self._closed = True
        await self._disconnect()

    async def _disconnect(self) -> None:
        self._closing.set()
        owner, self._owner = self._owner, None
        if owner is None or owner.done():
            return
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await asyncio.shield(owner)
        except (TimeoutError, Exception):
            owner.cancel()
        except asyncio.CancelledError:
            owner.cancel()
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we were cancelled ourselves; the owner's own cancel is no error here


@contextlib.asynccontextmanager
async def _deadline(timeout_s: float, doing: str) -> Any:
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise ToolFailure(
            "protocol_error", f"no answer within {timeout_s:g} s {doing}", TIMED_OUT
        ) from None


def _server_tool(tool: Any) -> ServerTool:
    hints = tool.annotations
    annotations = hints.model_dump(by_alias=True, exclude_none=True) if hints is not None else None
    return ServerTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema or {"type": "object"}),
        read_only=bool(hints is not None and hints.read_only_hint),
        annotations=annotations or None,
    )


def _text(result: Any) -> str:
    """What the tool said: its text parts, else its structured result."""
    import json

    texts = [part.text for part in result.content if getattr(part, "type", "") == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return ""


def _cause(exc: BaseException) -> str:
    """The first real error inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
