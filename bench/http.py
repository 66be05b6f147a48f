"""What the server's HTTP and WebSocket layers cost a request: GET /readyz on one kept-alive
connection and on a new connection each time, and a Realtime WebSocket opened until its
session.created. Run it against a server already started (any agent):

    python -m bench.http --url http://127.0.0.1:8000 [--requests 2000] [--key K]

Prints p50/p95/p99 in milliseconds for each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx
import websockets

from bench import machine


def percentiles(samples: list[float]) -> str:
    cuts = statistics.quantiles(samples, n=100)
    return f"p50 {cuts[49]:.2f}  p95 {cuts[94]:.2f}  p99 {cuts[98]:.2f} ms (n={len(samples)})"


async def timed(count: int, once: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await once()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--sockets", type=int, default=100)
    parser.add_argument("--key", default="")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    print(machine())

    async with httpx.AsyncClient(timeout=10) as kept:
        await kept.get(f"{args.url}/readyz")
        alive = await timed(args.requests, lambda: kept.get(f"{args.url}/readyz"))
    print(f"GET /readyz, kept alive:      {percentiles(alive)}")

    host, port = args.url.removeprefix("http://").rsplit(":", 1)

    async def fresh() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /readyz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert (await reader.read()).startswith(b"HTTP/1.1 ")
        writer.close()

    new = await timed(args.requests // 4, fresh)
    print(f"GET /readyz, new connection:  {percentiles(new)}")

    socket_url = args.url.replace("http://", "ws://") + "/v1/realtime?model=x"

    async def opened() -> None:
        async with websockets.connect(socket_url, additional_headers=headers) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"

    sockets = await timed(args.sockets, opened)
    print(f"WebSocket to session.created: {percentiles(sockets)}")


if __name__ == "__main__":
    asyncio.run(main())
