"""With an API key set, what each route asks for: observing every call needs the server's
key, and a call made with a client secret answers to that secret (or the server's key)
alone."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from openai import AsyncOpenAI

from clients import AgentClient
from tests.support.server import ServerProcess

KEY = "s3cret"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def mint(server: ServerProcess) -> str:
    admin = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY)
    return (await admin.realtime.client_secrets.create()).value


async def call_with(http: httpx.AsyncClient, token: str, peer: AgentClient) -> str:
    """A connected WebRTC call made with `token`; its id."""
    response = await http.post(
        "/v1/realtime/calls", content=await peer.offer(),
        headers={"Content-Type": "application/sdp", **bearer(token)},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    await peer.accept({"session_id": "call", "sdp": response.text})
    await peer.wait_for("session.created", timeout_s=20)
    return response.headers["location"].rsplit("/", 1)[-1]


async def test_observing_every_call_needs_the_servers_key(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", KEY)
    secret = await mint(server)
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        for route in ("/v1/pool", "/v1/stats", "/v1/usage"):
            for headers in ({}, bearer("wrong"), bearer(secret)):
                refused = await http.get(route, headers=headers)
                assert refused.status_code == 401, (route, headers)
                assert refused.json()["error"]["type"] == "invalid_request_error"
            assert (await http.get(route, headers=bearer(KEY))).status_code == 200, route
        # The page's config is open, less the operator's system prompt.
        assert "instructions" not in (await http.get("/v1/config")).json()
        assert "instructions" in (await http.get("/v1/config", headers=bearer(KEY))).json()
        assert "instructions" in (await http.get("/v1/config", headers=bearer(secret))).json()
        for route in ("/docs", "/openapi.json"):
            assert (await http.get(route)).status_code == 404, route
        assert (await http.get("/healthz")).status_code == 200


async def test_a_call_answers_to_the_secret_that_made_it_or_the_servers_key(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "2", "--server-api-key", KEY)
    mine, theirs = await mint(server), await mint(server)
    first, second = AgentClient(server.url), AgentClient(server.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        try:
            my_call = await call_with(http, mine, first)
            admins_call = await call_with(http, KEY, second)
            # Another secret, or one that did not make the call, cannot end it: 404, as
            # for a call that does not exist.
            for call_id, token in ((my_call, theirs), (admins_call, mine)):
                for end in (http.delete, lambda url, **kw: http.post(f"{url}/hangup", **kw)):
                    refused = await end(f"/v1/realtime/calls/{call_id}", headers=bearer(token))
                    assert refused.status_code == 404, (call_id, token)
            pool = (await http.get("/v1/pool", headers=bearer(KEY))).json()
            assert [slot["state"] for slot in pool["slots"]] == ["active", "active"]
            # Its own secret can, and the server's key can end any.
            ended = await http.post(f"/v1/realtime/calls/{my_call}/hangup", headers=bearer(mine))
            assert ended.status_code == 200
            ended = await http.delete(f"/v1/realtime/calls/{admins_call}", headers=bearer(KEY))
            assert ended.status_code == 200
            pool = (await http.get("/v1/pool", headers=bearer(KEY))).json()
            assert pool["in_use"] == 0
        finally:
            await first.close()
            await second.close()


async def test_deciding_transferring_and_recordings_need_the_servers_key(
    start_server: Callable[..., ServerProcess],
) -> None:
    """Live's routes that act on a call the caller did not make (or on every call): a
    client secret is one caller's, and not enough for any of them; under /v1 as well."""
    server = start_server("--agent", "echo", "--server-api-key", KEY)
    secret = await mint(server)
    session = {"session": {"type": "live", "model": "m"}}
    routes = [
        (method, prefix + route, body)
        for prefix in ("", "/v1")
        for method, route, body in (
            ("POST", "/live/sessions/sess_x/accept", session),
            ("POST", "/live/sessions/sess_x/reject", {"status_code": 486}),
            ("POST", "/live/sessions/sess_x/refer", {"target_uri": "tel:+14155550123"}),
            ("GET", "/live/sessions/sess_x/content", None),
        )
    ]
    async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
        for method, route, body in routes:
            for headers in ({}, bearer("wrong"), bearer(secret)):
                refused = await http.request(method, route, json=body, headers=headers)
                assert refused.status_code == 401, (route, headers, refused.text)
            allowed = await http.request(method, route, json=body, headers=bearer(KEY))
            # With the key: no such call, or (a transfer) none allowed by the operator.
            assert allowed.status_code == (403 if route.endswith("refer") else 404), (
                route, allowed.text,
            )  # fmt: skip
        for sneaky in ("..%2F..%2Fetc%2Fpasswd", "..", "%2Fetc%2Fpasswd", "sess_x.wav"):
            sneaked = await http.get(f"/live/sessions/{sneaky}/content", headers=bearer(KEY))
            assert sneaked.status_code == 404 and b"root:" not in sneaked.content, sneaky
