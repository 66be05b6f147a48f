"""What an MCP tool costs a reply, on the embedded agent (openai SDK, Realtime WebSocket).

    python -m bench.tools              # 6 questions each way
    python -m bench.tools --runs 10

A typed question is answered twice over: by a session with an MCP server's tool it
needs (the tests' orders server, over streamable HTTP on this machine), and by a session
without tools asked a plain question. Prints, p50 and max: from response.create to the
first audio delta; the tool's own call (mcp_call.in_progress to .completed); and the
LLM's choice of the tool (response.create to the call's item). It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from bench import machine
from tests.support.mcp_server import McpHttpServer
from tests.support.server import ServerProcess


async def ask(url: str, question: str, tools: list[dict[str, Any]]) -> dict[str, float]:
    """One question in a fresh session: the moments that matter, in seconds after
    response.create."""
    sdk = AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-anything")
    marks: dict[str, float] = {}
    async with sdk.realtime.connect(model="embedded") as conn:
        await conn.session.update(
            session={"type": "realtime", "tools": tools,  # type: ignore[typeddict-item]
                     "audio": {"input": {"turn_detection": None}}}
        )  # fmt: skip
        async for event in conn:
            if event.type == "session.updated":
                break
        if tools:
            async for event in conn:
                if event.type == "mcp_list_tools.completed":
                    break
        await conn.conversation.item.create(
            item={"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": question}]}
        )  # fmt: skip
        start = time.perf_counter()
        await conn.response.create()
        async for event in conn:
            at = time.perf_counter() - start
            if event.type == "response.output_item.added" and event.item.type == "mcp_call":
                marks.setdefault("tool chosen", at)
            elif event.type == "response.mcp_call.in_progress":
                marks["call started"] = at
            elif event.type == "response.mcp_call.completed":
                marks["tool call"] = at - marks.get("call started", at)
            elif event.type == "response.output_audio.delta":
                marks.setdefault("first audio", at)
            elif event.type == "response.done":
                break
    return marks


def report(name: str, runs: list[dict[str, float]], key: str) -> None:
    got = sorted(run[key] for run in runs if key in run)
    if not got:
        print(f"  {name:28} -")
        return
    print(f"  {name:28} p50 {statistics.median(got) * 1000:6.0f} ms   max {got[-1] * 1000:6.0f} ms"
          f"   ({len(got)}/{len(runs)})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="questions each way")
    args = parser.parse_args(argv)
    print(machine())
    orders = McpHttpServer().start()
    tool = {"type": "mcp", "server_label": "orders", "server_url": orders.url,
            "allowed_tools": ["order_status"], "require_approval": "never"}  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        server = ServerProcess(
            ["--max-sessions", "1", "--llm-temperature", "0",
             "--tools-mcp-allowed-urls", "http://127.0.0.1:*/mcp"],
            Path(folder) / "server.log",
        )  # fmt: skip
        server.wait_healthy()
        with_tool: list[dict[str, float]] = []
        without: list[dict[str, float]] = []
        try:
            for n in range(args.runs):  # alternated, so neither gets the warmer machine
                with_tool.append(asyncio.run(ask(server.url, f"Where is my order {40 + n}?",
                                                 [tool])))  # fmt: skip
                without.append(asyncio.run(ask(server.url, "What is the capital of France?", [])))
        finally:
            server.stop()
            orders.stop()
    print(f"{args.runs} typed questions each way, one session at a time:")
    report("first audio, with the tool", with_tool, "first audio")
    report("first audio, no tool", without, "first audio")
    report("LLM chose the tool", with_tool, "tool chosen")
    report("the tool's call (HTTP)", with_tool, "tool call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
