"""One connection to a real MCP server: the tests' own over streamable HTTP, and
mcp-server-time from PyPI over stdio. It lists, calls, fails in OpenAI's kinds, and
connects again when the server comes back."""

from __future__ import annotations

import json
import sys

import pytest

from app.tools.mcp_link import TIMED_OUT, McpLink, ToolFailure
from app.tools.specs import McpSpec
from tests.support.mcp_server import McpHttpServer


async def test_a_server_that_restarts_is_connected_to_again() -> None:
    first = McpHttpServer().start()
    link = McpLink(McpSpec("orders", url=first.url))
    try:
        assert await link.call("order_status", {"order": "1"}, 5) == (
            "Order 1 has shipped and arrives on Tuesday."
        )
        first.stop()
        with pytest.raises(ToolFailure) as down:
            await link.call("order_status", {"order": "2"}, 5)
        assert down.value.kind == "http_error"
        again = McpHttpServer(first.port).start()
        try:
            assert "Order 3" in await link.call("order_status", {"order": "3"}, 5)
        finally:
            await link.aclose()
            again.stop()
    finally:
        first.stop()


async def test_failures_come_in_openais_kinds() -> None:
    server = McpHttpServer().start()
    link = McpLink(McpSpec("orders", url=server.url))
    try:
        with pytest.raises(ToolFailure) as failed:
            await link.call("broken", {"order": "1"}, 5)
        assert failed.value.kind == "tool_execution_error"
        assert "broken" in str(failed.value)
        with pytest.raises(ToolFailure) as slow:
            await link.call("hang", {"order": "1"}, 0.3)
        assert (slow.value.kind, slow.value.code) == ("protocol_error", TIMED_OUT)
        assert "Order 4" in await link.call("order_status", {"order": "4"}, 5), "still works"
    finally:
        await link.aclose()
        server.stop()
    nobody = McpLink(McpSpec("down", url=f"http://127.0.0.1:{server.port}/mcp"))
    with pytest.raises(ToolFailure) as refused:
        await nobody.tools(5)
    assert refused.value.kind == "http_error"


async def test_a_local_command_over_stdio() -> None:
    command = (sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
    link = McpLink(McpSpec("clock", command=command, operator=True))
    try:
        names = [tool.name for tool in await link.tools(20)]
        assert names == ["get_current_time", "convert_time"]
        told = json.loads(await link.call("get_current_time", {"timezone": "Asia/Tokyo"}, 10))
        assert told["timezone"] == "Asia/Tokyo" and told["datetime"].endswith("+09:00")
    finally:
        await link.aclose()
