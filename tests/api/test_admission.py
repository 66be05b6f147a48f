"""Who may take a slot, by where the call comes from: one address holds at most its share
of the slots (unless it calls with the server's own key), IPv6 clients count by their
/64, and a server answers only to Host names it knows (DNS rebinding)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
import websockets

from app.calls.admission import Caller, client_key
from clients import AgentClient
from tests.api.test_access import KEY, bearer, mint
from tests.support.metrics import scrape
from tests.support.server import ServerProcess


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb:cccc:dddd:eeee", "2001:db8:1:2::/64"),  # the same host's /64
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:198.51.100.1", "198.51.100.1"),  # IPv4 in IPv6 is the IPv4 client
        ("not-an-address", "not-an-address"),
    ],
)
def test_clients_are_counted_by_address_or_ipv6_64(address: str, key: str) -> None:
    assert client_key(address) == key
    assert Caller(key).limited and not Caller(key, vouched=True).limited


async def offer_with(http: httpx.AsyncClient, headers: dict[str, str]) -> httpx.Response:
    offer = {"sdp": await AgentClient(str(http.base_url)).offer(), "type": "offer"}
    return await http.post("/offer", json=offer, headers=headers)


async def test_one_address_holds_at_most_its_share_of_the_slots(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "4", "--server-api-key", KEY,
                          "--limits-address-slots", "0.5")  # fmt: skip
    secret = await mint(server)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        held = [await offer_with(http, bearer(secret)) for _ in range(2)]
        assert [r.status_code for r in held] == [200, 200]
        third = await offer_with(http, bearer(secret))
        assert third.status_code == 429, third.text
        assert third.json()["error"]["type"] == "rate_limit_exceeded"
        assert "already holds 2 calls" in third.json()["error"]["message"]
        assert int(third.headers["retry-after"]) >= 1
        # The Realtime WebSocket is held to the same share: an error event, then 1008.
        url = server.url.replace("http://", "ws://") + "/v1/realtime"
        protocols = ["realtime", f"openai-insecure-api-key.{secret}"]
        async with websockets.connect(url, subprotocols=protocols) as ws:  # type: ignore[list-item]
            error = json.loads(await ws.recv())
            assert error["error"]["type"] == "rate_limit_exceeded"
        # The server's own key is the operator's backend, calling for many: not held to it.
        vouched = await offer_with(http, bearer(KEY))
        assert vouched.status_code == 200, vouched.text
        metrics = await scrape(server.url)
        refused = (("outcome", "address_limit"), ("transport", "webrtc"))
        assert metrics[("voice_agent_calls_total", refused)] == 1
        # An ended call gives its slot back to its address.
        await http.delete(f"/v1/realtime/calls/{held[0].json()['session_id']}",
                          headers=bearer(secret))  # fmt: skip
        again = await offer_with(http, bearer(secret))
        assert again.status_code == 200, again.text
    # Another address has its own share.
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(base_url=server.url, timeout=30, transport=other) as http:
        assert (await offer_with(http, bearer(secret))).status_code in (200, 503)


async def test_a_developers_own_tabs_on_this_machine_are_not_held_to_a_share(
    start_server: Callable[..., ServerProcess],
) -> None:
    """Out of the box (loopback exempt), a third tab on this machine gets a slot of four;
    held to the limits, it is refused, with one time to retry in."""
    limits = ("--agent", "echo", "--max-sessions", "4", "--limits-address-slots", "0.5")
    spared = start_server(*limits, "--limits-loopback-exempt", "true")
    async with httpx.AsyncClient(base_url=spared.url, timeout=30) as http:
        answers = [await offer_with(http, {}) for _ in range(3)]
        assert [r.status_code for r in answers] == [200, 200, 200], answers[-1].text
    held = start_server(*limits)
    async with httpx.AsyncClient(base_url=held.url, timeout=30) as http:
        answers = [await offer_with(http, {}) for _ in range(3)]
        assert [r.status_code for r in answers] == [200, 200, 429]
        message = answers[-1].json()["error"]["message"]
        assert message.count(" s") == 1 and answers[-1].headers["retry-after"] in message


async def test_only_known_host_names_are_answered(
    start_server: Callable[..., ServerProcess],
) -> None:
    """A page on evil.example whose name resolves to 127.0.0.1 sends Host: evil.example
    (and Origin: http://evil.example): the origin guard alone would take it as the
    server's own page."""
    server = start_server("--agent", "echo", "--server-allowed-hosts", "voice.example.com")
    rebound = {
        "Host": f"evil.example:{server.port}",
        "Origin": f"http://evil.example:{server.port}",
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for method, path in (("POST", "/offer"), ("GET", "/v1/pool"), ("GET", "/")):
            refused = await http.request(method, path, headers=rebound)
            assert refused.status_code == 400, (path, refused.text)
            assert "server.allowed_hosts" in refused.json()["error"]["message"]
        for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "[::1]",
                     "voice.example.com", "VOICE.example.com.:443"):  # fmt: skip
            answer = await http.get("/v1/pool", headers={"Host": host})
            assert answer.status_code == 200, host
    # The socket goes to 127.0.0.1; the URL's name is what the Host header says.
    url = f"ws://evil.example:{server.port}/v1/realtime"
    with pytest.raises(websockets.InvalidStatus) as refused_ws:
        async with websockets.connect(url, host="127.0.0.1", port=server.port):
            pass
    assert refused_ws.value.response.status_code == 403
