"""A real MCP server for the tests, on the official `mcp` SDK over streamable HTTP,
served by uvicorn in a thread of its own. It counts the requests it receives, so a test
can show that a refused server heard nothing."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

ORDER_STATUS = "Order {order} has shipped and arrives on Tuesday."


def build() -> MCPServer:
    server = MCPServer("orders")

    @server.tool()
    def order_status(order: str) -> str:
        """Where a customer's order is: give its number."""
        return ORDER_STATUS.format(order=order)

    @server.tool()
    async def slow_lookup(order: str) -> str:
        """Looks an order up, slowly."""
        await asyncio.sleep(1.5)
        return ORDER_STATUS.format(order=order)

    @server.tool()
    async def hang(order: str) -> str:
        """Never answers."""
        await asyncio.sleep(3600)
        return ""

    @server.tool()
    def broken(order: str) -> str:
        """Always fails."""
        raise RuntimeError("the order database is down")

    return server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class McpHttpServer:
    def __init__(self, port: int = 0) -> None:
        self.port = port or _free_port()
        self.requests = 0
        app = build().streamable_http_app()

        async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.requests += 1
            await app(scope, receive, send)

        config = uvicorn.Config(
            counted, host="127.0.0.1", port=self.port, log_level="warning",
            timeout_graceful_shutdown=1,  # an open event stream would hold a stop
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="mcp-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpHttpServer:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return self
            time.sleep(0.01)
        raise RuntimeError("the MCP test server did not start")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
