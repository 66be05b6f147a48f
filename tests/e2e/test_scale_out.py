"""Two agent replicas behind a real HAProxy (deploy/haproxy/haproxy.cfg, as documented):
calls are admitted by /readyz, and a call's follow-ups reach the replica that holds it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import websockets
from aiortc import RTCSessionDescription

from clients import AgentClient
from tests.support.pressure import watching
from tests.support.server import REPO, ServerProcess, free_port, until_in_use

pytestmark = pytest.mark.e2e

REPLICAS = ("a1", "a2")
UPDATE = {"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief."}}


@contextlib.contextmanager
def haproxy(replicas: dict[str, ServerProcess], log: Path) -> Iterator[str]:
    """deploy/haproxy/haproxy.cfg in front of `replicas` (by their names, a1 and a2); its
    URL, once a health check has passed."""
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (make test installs it)")
    port = free_port()
    env = {**os.environ, "VOICE_LB_BIND": f"127.0.0.1:{port}"}
    env |= {f"VOICE_REPLICA_{name.upper()}": f"127.0.0.1:{r.port}" for name, r in replicas.items()}
    with open(log, "wb") as out:
        proxy = subprocess.Popen(
            ["haproxy", "-db", "-f", str(REPO / "deploy" / "haproxy" / "haproxy.cfg")],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # up once a health check has passed: /readyz through the proxy
            assert proxy.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        proxy.terminate()
        proxy.wait(10)


@pytest.fixture(scope="module")
def balancer(
    start_module_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, ServerProcess]]]:
    flags = ("--agent", "echo", "--max-sessions", "1", "--server-replica")
    replicas = {name: start_module_server(*flags, name) for name in REPLICAS}
    with haproxy(replicas, tmp_path_factory.mktemp("haproxy") / "haproxy.log") as url:
        yield url, replicas


async def call(url: str) -> tuple[AgentClient, httpx.Response]:
    """A WebRTC call offered through the proxy, as the OpenAI SDKs offer one."""
    client = AgentClient(url)
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.post(
            f"{url}/v1/realtime/calls",
            content=await client.offer(),
            headers={"content-type": "application/sdp"},
        )
    if response.status_code == 201:
        await client.pc.setRemoteDescription(RTCSessionDescription(response.text, "answer"))
        await client.wait_for("session.created", timeout_s=20)
    else:
        await client.close()
    return client, response


async def call_when_admitted(url: str, attempts: int = 40) -> tuple[AgentClient, httpx.Response]:
    """What a client does with 503: wait Retry-After (capped here) and offer again."""
    for _ in range(attempts):
        client, response = await call(url)
        if response.status_code != 503:
            return client, response
        await asyncio.sleep(min(float(response.headers["retry-after"]), 0.5))
    raise AssertionError(f"not admitted after {attempts} tries")


def replica_of(response: httpx.Response) -> str:
    return response.headers["location"].rsplit("/", 1)[1].split("_")[1]


def in_use(replica: ServerProcess) -> int:
    return int(httpx.get(f"{replica.url}/v1/pool", timeout=5).json()["in_use"])


async def test_calls_spread_over_replicas_and_follow_ups_find_theirs(
    balancer: tuple[str, dict[str, ServerProcess]],
) -> None:
    url, replicas = balancer
    clients: list[AgentClient] = []
    try:
        first, one = await call(url)
        second, two = await call(url)
        clients += [first, second]
        assert (one.status_code, two.status_code) == (201, 201), (one.text, two.text)
        # Each call landed on its own replica, and its id says which.
        assert {replica_of(one), replica_of(two)} == set(REPLICAS)
        assert all(in_use(r) == 1 for r in replicas.values())

        third, three = await call(url)
        assert three.status_code == 503 and int(three.headers["retry-after"]) >= 1
        assert three.json()["error"]["type"] == "session_limit_reached"

        # Hanging up through the proxy frees the replica that held the call, even though
        # the proxy had it out of turn (full) at that moment.
        holder = replica_of(one)
        async with httpx.AsyncClient(timeout=10) as http:
            hangup = await http.post(f"{url}{one.headers['location']}/hangup")
        assert hangup.status_code == 200
        await until_in_use(replicas[holder].url, 0)
        other = next(name for name in REPLICAS if name != holder)
        assert in_use(replicas[other]) == 1, "the other replica's call goes on"

        # The freed slot takes the next call.
        fourth, four = await call_when_admitted(url)
        clients.append(fourth)
        assert four.status_code == 201 and replica_of(four) == holder

        # A sideband controller of that call, through the proxy, reaches it too.
        call_id = four.headers["location"].rsplit("/", 1)[1]
        sideband = f"ws://{url.removeprefix('http://')}/v1/realtime?call_id={call_id}"
        async with websockets.connect(sideband) as ws:
            await ws.send(json.dumps(UPDATE))
            async with asyncio.timeout(10):
                while json.loads(await ws.recv())["type"] != "session.updated":
                    pass

        # DELETE, the other follow-up, also finds its replica.
        async with httpx.AsyncClient(timeout=10) as http:
            deleted = await http.delete(f"{url}{two.headers['location']}")
            unknown = await http.delete(f"{url}/v1/realtime/calls/sess_{other}_0000")
        assert deleted.status_code == 200
        assert unknown.status_code == 404, "an unknown call on a live replica is 404"
        await until_in_use(replicas[other].url, 0)
    finally:
        for client in clients:
            await client.close()


async def test_a_client_behind_the_balancer_cannot_forge_its_address(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """HAProxy's option forwardfor adds its own X-Forwarded-For line after the client's:
    the replica trusts the balancer (limits.trusted_proxies) and so that last line, not
    the addresses a client writes itself. Before issue 48 the first line counted, and a
    client naming a new address each time held 4 of 4 slots where its share is 2, and an
    honest caller was refused."""
    server = start_server("--agent", "echo", "--max-sessions", "4", "--limits-address-slots",
                          "0.5", "--limits-trusted-proxies", "127.0.0.1/32")  # fmt: skip
    with haproxy({"a1": server, "a2": server}, tmp_path / "haproxy.log") as url:
        socket_url = url.replace("http://", "ws://") + "/v1/realtime?model=x"

        async def first_event(source: str, forged: str | None) -> dict:
            claim = {"X-Forwarded-For": forged} if forged else {}
            ws = await websockets.connect(socket_url, local_addr=(source, 0),
                                          additional_headers=claim)  # fmt: skip
            sockets.append(ws)
            return dict(json.loads(await asyncio.wait_for(ws.recv(), 20)))

        sockets: list[websockets.ClientConnection] = []
        async with watching(server) as pressure:
            forged = ("127.0.0.1", "10.9.0.1", "10.9.0.2", "10.9.0.3")
            firsts = [await first_event("127.0.0.2", address) for address in forged]
            normal = await first_event("127.0.0.3", None)  # another client, honest
        for ws in sockets:
            await ws.close()
    assert [event["type"] for event in firsts[:2]] == ["session.created"] * 2
    for refused in firsts[2:]:
        assert refused["type"] == "error", "127.0.0.2's share is 2 of 4 slots"
        assert refused["error"]["type"] == "rate_limit_exceeded", refused
    assert normal["type"] == "session.created", "the other slots are left to others"
    assert pressure.worst_readyz_s < 1.0 and pressure.grown_mb < 200, pressure
