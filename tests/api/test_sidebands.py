"""Sideband controllers (/live/sessions/{id}/attach, /v1/realtime?call_id=): each hears all
of a call's audio, so a call and a client address may hold only so many; a client secret
attaches to none; a seat is given back as its controller leaves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
import websockets
from openai import AsyncOpenAI

from tests.support.server import ServerProcess

KEY = "s3cret"


def ws_url(server: ServerProcess) -> str:
    return server.url.replace("http", "ws", 1)


@asynccontextmanager
async def live_session(server: ServerProcess, token: str | None = None) -> AsyncIterator[str]:
    """A Live WebSocket session, held open; its id."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(ws_url(server) + "/live/sessions",
                                  additional_headers=headers) as ws:  # fmt: skip
        await ws.send(json.dumps({"type": "session.start", "session": {"model": "m"}}))
        while (event := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] != (
            "session.started"
        ):
            assert event["type"] != "error", event
        yield event["session"]["id"]


def attach_url(server: ServerProcess, session_id: str, route: str) -> str:
    if route == "live":
        return f"{ws_url(server)}/live/sessions/{session_id}/attach"
    return f"{ws_url(server)}/v1/realtime?call_id={session_id}"


async def attached(stack: AsyncExitStack, url: str, token: str | None = None) -> Any:
    """A sideband that got its seat: it answers an event it does not know (unknown_event),
    where one with no seat is sent sideband_limit_reached and closed."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ws = await stack.enter_async_context(websockets.connect(url, additional_headers=headers))
    await ws.send(json.dumps({"type": "no.such.event"}))
    while (event := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] != "error":
        pass  # the call's own events
    assert event["error"]["code"] == "unknown_event", event
    return ws


async def refused(url: str, token: str | None = None) -> dict[str, Any]:
    """The error a sideband with no seat is sent, before its socket is closed (1008)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(url, additional_headers=headers) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert error["type"] == "error", error
    return error["error"]


async def stats(server: ServerProcess, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        response = await http.get("/v1/stats", headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json())


async def test_a_call_and_an_address_hold_only_so_many_sidebands(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--max-sessions", "4", "--limits-address-slots", "1",
        "--limits-call-sidebands", "2", "--limits-address-sidebands", "3",
        "--limits-loopback-exempt", "false",
    )  # fmt: skip
    async with live_session(server) as first, live_session(server) as second:
        async with AsyncExitStack() as stack:
            await attached(stack, attach_url(server, first, "live"))
            await attached(stack, attach_url(server, first, "realtime"))
            # The call's two seats are taken, by either route.
            for route in ("live", "realtime"):
                error = await refused(attach_url(server, first, route))
                assert error["code"] == "sideband_limit_reached", error
                assert "call" in error["message"], error
            leaving = await attached(stack, attach_url(server, second, "live"))
            # This address holds 3: no seat on any call.
            error = await refused(attach_url(server, second, "realtime"))
            assert error["code"] == "sideband_limit_reached", error
            assert "127.0.0.1" in error["message"], error
            await leaving.close()
            for _ in range(100):  # its seat is given back as its socket goes
                if (await stats(server))["sidebands"] == 2:
                    break
                await asyncio.sleep(0.1)
            await attached(stack, attach_url(server, second, "realtime"))
            assert (await stats(server))["sidebands"] == 3
        # Every controller gone: all seats are free again.
        async with AsyncExitStack() as stack:
            for call in (first, first, second):
                await attached(stack, attach_url(server, call, "live"))
        error = await refused(attach_url(server, "sess_unknown", "live"))
        assert error["code"] == "session_not_found", error
        error = await refused(attach_url(server, "sess_unknown", "realtime"))
        assert error["code"] == "call_not_found", error
    async with websockets.connect(ws_url(server) + "/v1/realtime") as ws:
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "session.created"


async def test_a_client_secret_attaches_to_no_call_and_the_key_to_a_calls_few_seats(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--server-api-key", KEY, "--limits-call-sidebands", "1",
        "--limits-address-sidebands", "1", "--limits-loopback-exempt", "false",
    )  # fmt: skip
    admin = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY)
    secret = (await admin.realtime.client_secrets.create()).value
    await admin.close()
    async with live_session(server, secret) as own, live_session(server, KEY) as other:
        for call in (own, other):  # not even the call its own secret made
            for route in ("live", "realtime"):
                for token in (secret, None, "wrong"):
                    with pytest.raises(websockets.InvalidStatus, match="403"):
                        headers = {"Authorization": f"Bearer {token}"} if token else {}
                        url = attach_url(server, call, route)
                        async with websockets.connect(url, additional_headers=headers) as ws:
                            await ws.recv()
        async with AsyncExitStack() as stack:
            # The key is an operator's: not held to an address's seats, but to a call's.
            await attached(stack, attach_url(server, own, "live"), KEY)
            await attached(stack, attach_url(server, other, "realtime"), KEY)
            error = await refused(attach_url(server, own, "realtime"), KEY)
            assert error["code"] == "sideband_limit_reached", error
