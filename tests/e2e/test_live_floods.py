"""Every Live path under attack from four clients at once: its session socket
(/live/sessions), its sideband (/live/sessions/{id}/attach) and Realtime's sideband of the
same call (/v1/realtime?call_id=), each sent 4 MiB messages, JSON nested 100,000 deep and
binary frames, then opened and closed 100 times. (The deep JSON is more than a message
may hold, limits.ws_json_per_s: it closes the socket.) Targets, as for the older paths
(tests/e2e/test_floods.py): under 200 MB of RSS growth, no /readyz answer slower than
1 s, and the server's tasks, threads and open files back where they were."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable

import pytest
import websockets

from tests.e2e.test_floods import send_until_closed
from tests.support.pressure import watching
from tests.support.server import GAUGES, ServerProcess, gauges_after, server_stats

pytestmark = pytest.mark.e2e

log = logging.getLogger(__name__)

MIB = 1024 * 1024
START = json.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}})
# Just over the 4 MiB a WebSocket message may be: refused unread.
OVERSIZED = json.dumps({"type": "session.input_audio.append", "audio": "A" * (4 * MIB)})
DEEP = '{"type": "session.update", "session": ' + "[" * 100_000 + "]" * 100_000 + "}"
BINARY = bytes(range(256)) * 4096  # 1 MiB


async def started(url: str) -> websockets.ClientConnection:
    ws = await websockets.connect(url, max_size=None)
    await ws.send(START)
    while (event := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] != (
        "session.started"
    ):
        assert event["type"] != "error", event
    return ws


@contextlib.asynccontextmanager
async def live_call(base: str) -> AsyncIterator[str]:
    """A Live session held open for the sidebands to attack; its id."""
    ws = await started(f"{base}/live/sessions")
    await ws.send(json.dumps({"type": "session.input_audio.mute"}))
    session_id = await server_id(ws)
    try:
        yield session_id
    finally:
        await ws.close()


async def server_id(ws: websockets.ClientConnection) -> str:
    """The session id the session.started event (already read) named: asked again."""
    await ws.send(json.dumps({"type": "session.update", "session": {}}))
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if event["type"] == "session.updated":
            return str(event["session"]["id"])


async def test_every_live_path_holds_under_floods_and_churn(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "6",
                          "--limits-address-slots", "1")  # fmt: skip
    base = server.url.replace("http://", "ws://")
    errors: list[str] = []

    async def flood(url: str, start: bool, messages: list[str | bytes]) -> int | None:
        try:
            ws = await (started(url) if start else websockets.connect(url, max_size=None))
        except websockets.InvalidStatus:
            return None
        return await send_until_closed(ws, messages, errors)  # type: ignore[arg-type]

    async def floods(messages: list[str | bytes]) -> list[int | None]:
        """Four sessions and eight sidebands, each sending `messages`; their close codes."""
        return await asyncio.gather(
            *(flood(f"{base}/live/sessions", True, messages) for _ in range(4)),
            *(flood(url, False, messages) for url in sidebands for _ in range(4)),
        )

    async def sidebands_gone() -> None:
        for _ in range(100):  # the last sidebands' sockets close a little late
            if (await server_stats(server.url))["sidebands"] == 0:
                return
            await asyncio.sleep(0.1)
        raise AssertionError("sidebands left open")

    async def churn(url: str, start: bool) -> None:
        for _ in range(100):
            ws = await (started(url) if start else websockets.connect(url, max_size=None))
            await ws.close()

    async with live_call(base) as call:
        sidebands = (f"{base}/live/sessions/{call}/attach", f"{base}/v1/realtime?call_id={call}")
        # Warm: the first sessions and sidebands pay for imports and caches once.
        await churn(f"{base}/live/sessions", start=True)
        before = await server_stats(server.url)
        async with watching(server) as pressure:
            # Messages the session refuses one by one; then, once those sockets are gone,
            # one that ends each socket (its close may overtake answers sent before it).
            refusals = await floods([OVERSIZED, BINARY, BINARY])
            await sidebands_gone()
            closes = await floods([DEEP, BINARY])
            await asyncio.gather(churn(f"{base}/live/sessions", True),
                                 *(churn(url, False) for url in sidebands))  # fmt: skip
        log.info("Live floods: %s; closes %s, then %s; errors %s", pressure, refusals, closes,
                 set(errors))  # fmt: skip
        after = await gauges_after(server.url, before)
        await sidebands_gone()
    assert "invalid_message" in errors, "a message over 4 MiB is refused"
    assert "sideband_limit_reached" in errors, "8 sidebands on one call: 4 are refused"
    assert refusals.count(1008) == 4 and closes.count(1008) == 4, (refusals, closes)
    assert closes.count(1009) == 8, "JSON nested 100,000 deep is refused unparsed (1009)"
    assert pressure.worst_readyz_s < 1.0, pressure
    assert pressure.grown_mb < 200, pressure
    for gauge in GAUGES:
        assert after[gauge] <= before[gauge], (gauge, before, after)
