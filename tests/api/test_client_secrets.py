"""Client secrets (ephemeral keys) with the official openai SDK: minted with the server's
key, used as a Bearer on calls and the WebSocket, carrying their session config."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import openai
import pytest
import websockets
from openai import AsyncOpenAI

from app.api.secret_store import QUOTAS, SESSION_BYTES, ClientSecrets, QuotaFull
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


def test_secrets_expire_and_a_full_quota_refuses_rather_than_evicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    store = ClientSecrets(retire_s=100)
    value, secret = store.mint(10, None)
    assert store.find(value) is secret and secret.expires_at == 1010
    now[0] = 1010.0
    assert store.find(value) is None, "expired"
    # An expired secret may still end the calls it made, for as long as one may last.
    assert store.find(value, expired_ok=True) is secret
    monkeypatch.setitem(QUOTAS, "page", 3)
    pages = [store.mint(60 + n, None, kind="page")[0] for n in range(3)]
    with pytest.raises(QuotaFull) as full:
        store.mint(60, None, kind="page")
    assert full.value.retry_after_s == 60 and "3 page client secrets" in str(full.value)
    assert all(store.find(v) is not None for v in pages), "none was pushed out"
    # The API's secrets have a quota of their own: the page's flood does not touch it.
    api, _ = store.mint(60, None)
    assert store.find(api) is not None
    # A secret's session config counts against the bytes all of them may hold.
    with pytest.raises(QuotaFull, match="MiB of client secrets' session config"):
        store.mint(60, None, size=SESSION_BYTES + 1)
    now[0] = 1010.0 + 101
    assert store.find(value, expired_ok=True) is None, "forgotten after retire_s"
    assert store.mint(60, None, kind="page")[0], "room again once the first ones expired"


async def test_the_key_is_checked_before_the_body_is_read(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", "s3cret")
    body = b'{"session": {"instructions": "' + b"i" * 900_000 + b'"'  # malformed, and big
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        anonymous = await http.post("/v1/realtime/client_secrets", content=body,
                                    headers={"content-type": "application/json"})  # fmt: skip
        assert anonymous.status_code == 401, "not 400: the body is no business of a stranger"
        keyed = await http.post("/v1/realtime/client_secrets", content=body, headers={
            "content-type": "application/json", "Authorization": "Bearer s3cret"})  # fmt: skip
        assert keyed.status_code == 400 and "json" in keyed.json()["error"]["message"].lower()


async def test_page_mints_are_rate_limited_per_address(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--server-api-key", "s3cret", "--server-page-client-secrets", "true"
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        answers = [await http.post("/v1/page/client_secret") for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert answers[-1].json()["error"]["type"] == "rate_limit_exceeded"
        assert int(answers[-1].headers["retry-after"]) >= 1
        # The operator's own minting is untouched by it.
        minted = await http.post("/v1/realtime/client_secrets",
                                 headers={"Authorization": "Bearer s3cret"})  # fmt: skip
        assert minted.status_code == 200


async def test_a_call_can_be_hung_up_with_its_secret_after_the_secret_expired(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", "s3cret")
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        minted = await http.post("/v1/realtime/client_secrets", headers={
            "Authorization": "Bearer s3cret"}, json={"expires_after": {"seconds": 10}})  # fmt: skip
        secret = minted.json()["value"]
        peer = AgentClient(server.url)
        try:
            offer = {"sdp": await peer.offer(), "type": "offer"}
            keyed = {"Authorization": f"Bearer {secret}"}
            call = await http.post("/offer", json=offer, headers=keyed)
            assert call.status_code == 200, call.text
            await peer.accept(call.json())
            await peer.wait_for("session.created", timeout_s=20)
            await asyncio.sleep(max(0.0, minted.json()["expires_at"] - time.time()) + 1)
            again = await http.post("/offer", json=offer, headers=keyed)
            assert again.status_code == 401, "expired: no new calls"
            hangup = await http.delete(
                f"/v1/realtime/calls/{call.json()['session_id']}", headers=keyed
            )
            assert hangup.status_code == 200, hangup.text
        finally:
            await peer.close()
