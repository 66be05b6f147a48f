"""Client secrets (ephemeral keys) with the official openai SDK: minted with the server's
key, used as a Bearer on calls and the WebSocket, carrying their session config."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import openai
import pytest
import websockets
from openai import AsyncOpenAI

from app.api.auth import ClientSecrets
from clients import AgentClient
from tests.support.server import ServerProcess


async def test_a_minted_key_works_until_it_expires_and_brings_its_session(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "4", "--server-api-key", "s3cret")
    admin = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="s3cret")
    minted = await admin.realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 60},
        session={"type": "realtime", "instructions": "Speak like a pirate."},
    )
    assert minted.value.startswith("ek_") and 55 < minted.expires_at - time.time() <= 60
    assert minted.session.instructions == "Speak like a pirate."  # type: ignore[union-attr]

    # The key opens a WebRTC call; the call starts with the minted session.
    browser = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=minted.value)
    peer = AgentClient(server.url)
    try:
        answer = await browser.realtime.calls.create(sdp=await peer.offer())
        await peer.accept({"session_id": "call", "sdp": answer.text})
        created = await peer.wait_for("session.created", timeout_s=20)
        assert created["session"]["instructions"] == "Speak like a pirate."
    finally:
        await peer.close()
    # And a WebSocket, as a browser SDK sends it.
    url = server.url.replace("http://", "ws://") + "/v1/realtime"
    protocols = ["realtime", f"openai-insecure-api-key.{minted.value}"]
    async with websockets.connect(url, subprotocols=protocols) as ws:  # type: ignore[arg-type]
        created = json.loads(await ws.recv())
        assert created["session"]["instructions"] == "Speak like a pirate."

    # Keys that are not keys.
    with pytest.raises(openai.AuthenticationError):
        await browser.realtime.client_secrets.create()  # a client secret cannot mint
    unknown = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="ek_not-one-of-ours")
    async with httpx.AsyncClient(timeout=20) as http:
        for token, why in (("ek_not-one-of-ours", "expired client secret"), ("wrong", "API key")):
            refused = await http.post(
                f"{server.url}/v1/realtime/calls",
                content=await AgentClient(server.url).offer(),
                headers={"Content-Type": "application/sdp", "Authorization": f"Bearer {token}"},
            )
            assert refused.status_code == 401 and why in refused.json()["error"]["message"]
        # A session the server cannot give is refused when minted, not at every call.
        for session, word in (({"output_modalities": ["text"]}, "output_modalities"),
                              ({"instructions": 42}, "instructions")):  # fmt: skip
            bad = await http.post(
                f"{server.url}/v1/realtime/client_secrets",
                json={"session": session},
                headers={"Authorization": "Bearer s3cret"},
            )
            assert bad.status_code == 400 and word in bad.json()["error"]["message"], word
        # The page's own endpoint is off unless the operator turns it on.
        assert (await http.post(f"{server.url}/v1/page/client_secret")).status_code == 404
    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(
            url, subprotocols=["realtime", "openai-insecure-api-key.ek_x"]
        ):  # type: ignore[list-item]
            pass
    await admin.close()
    await browser.close()
    await unknown.close()


async def test_the_page_can_get_a_key_where_the_operator_allows_it(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--server-api-key", "s3cret", "--server-page-client-secrets", "true"
    )
    peer = AgentClient(server.url)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
            key = (await http.post("/v1/page/client_secret")).json()["value"]
            offer = {"sdp": await peer.offer(), "type": "offer"}
            assert (await http.post("/offer", json=offer)).status_code == 401
            response = await http.post(
                "/offer", json=offer, headers={"Authorization": f"Bearer {key}"}
            )
        assert response.status_code == 200
        await peer.accept(response.json())
        await peer.wait_for("session.created", timeout_s=20)
    finally:
        await peer.close()


def test_secrets_expire_and_the_store_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    store = ClientSecrets()
    value, secret = store.mint(10, None)
    assert store.find(value) is secret and secret.expires_at == 1010
    now[0] = 1010.0
    assert store.find(value) is None, "expired"
    monkeypatch.setattr("app.api.auth.MAX_SECRETS", 3)
    values = [store.mint(60 + n, None)[0] for n in range(5)]
    assert [store.find(v) is not None for v in values] == [False, False, True, True, True]
