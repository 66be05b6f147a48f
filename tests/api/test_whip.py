"""WHIP (RFC 9725) against a real server process, with aiortc as the client: the 201 and
its headers, trickled candidates, the refusals, and DELETE freeing the slot.

A stack that is not aiortc (GStreamer's webrtcbin) speaks through /whip in tests/e2e."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from tests.support.server import ServerProcess, until_in_use

SDP = {"content-type": "application/sdp"}
FRAGMENT = {"content-type": "application/trickle-ice-sdpfrag"}


class WhipCaller:
    """An audio-only aiortc peer with no data channel, as a gateway leg offers."""

    def __init__(self) -> None:
        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("audio", direction="sendrecv")

    async def offer(self, *, candidates: bool = True) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        sdp = str(self.pc.localDescription.sdp)
        if not candidates:  # a trickling client sends them later, by PATCH
            sdp = "".join(
                line
                for line in sdp.splitlines(True)
                if not line.startswith(("a=candidate", "a=end-of-candidates"))
            )
        return sdp

    def candidate_lines(self) -> list[str]:
        return re.findall(r"^a=candidate:.*$", self.pc.localDescription.sdp, re.M)

    async def accept(self, answer: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20) as client:
        yield client


async def publish(
    http: httpx.AsyncClient, server: ServerProcess, caller: WhipCaller, **offer: bool
) -> httpx.Response:
    return await http.post(f"{server.url}/whip", content=await caller.offer(**offer), headers=SDP)


async def test_whip_answers_201_with_location_etag_and_ice_servers(
    start_server: Callable[..., ServerProcess], http: httpx.AsyncClient
) -> None:
    server = start_server(
        "--agent", "echo", "--server-ice-servers", "stun:127.0.0.1:3478,turn:127.0.0.1:3478",
        "--server-ice-username", "gw", "--server-ice-credential", "pw",
    )  # fmt: skip
    caller = WhipCaller()
    try:
        response = await publish(http, server, caller)
        assert response.status_code == 201, response.text
        assert response.headers["content-type"].startswith("application/sdp")
        assert response.text.startswith("v=0") and "a=candidate" in response.text
        location = response.headers["location"]
        assert re.fullmatch(r"/whip/sess_[0-9a-f]+", location)
        assert re.fullmatch(r'"[^"]+"', response.headers["etag"])
        assert response.headers["accept-patch"] == "application/trickle-ice-sdpfrag"
        links = response.headers.get_list("link")
        assert links == [
            '<stun:127.0.0.1:3478>; rel="ice-server"',
            '<turn:127.0.0.1:3478>; rel="ice-server"; username="gw"; credential="pw"; '
            'credential-type="password"',
        ]
        await caller.accept(response.text)
        pool = await until_in_use(server.url, 1, state="active")
        (slot,) = [slot for slot in pool["slots"] if slot["state"] == "active"]
        assert slot["transport"] == "whip" and location.endswith(slot["session_id"])
        # DELETE ends the call, and the slot is free when it answers.
        deleted = await http.delete(f"{server.url}{location}")
        assert deleted.status_code == 200
        assert (await http.get(f"{server.url}/v1/pool")).json()["in_use"] == 0
        assert (await http.delete(f"{server.url}{location}")).status_code == 404
    finally:
        await caller.pc.close()


async def test_trickled_candidates_and_the_patch_refusals(
    echo_server: ServerProcess, http: httpx.AsyncClient
) -> None:
    caller = WhipCaller()
    try:
        response = await publish(http, echo_server, caller, candidates=False)
        assert response.status_code == 201, response.text
        resource, etag = (
            f"{echo_server.url}{response.headers['location']}",
            response.headers["etag"],
        )
        ufrag = re.search(r"a=ice-ufrag:(\S+)", caller.pc.localDescription.sdp)
        pwd = re.search(r"a=ice-pwd:(\S+)", caller.pc.localDescription.sdp)
        assert ufrag and pwd
        head = f"a=ice-ufrag:{ufrag[1]}\r\na=ice-pwd:{pwd[1]}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"
        fragment = head + "a=mid:0\r\n" + "".join(f"{c}\r\n" for c in caller.candidate_lines())
        patched = await http.patch(
            resource, content=fragment + "a=end-of-candidates\r\n",
            headers={**FRAGMENT, "if-match": etag},
        )  # fmt: skip
        assert patched.status_code == 204, patched.text
        await caller.accept(response.text)
        await until_in_use(echo_server.url, 1, state="active")

        stale = await http.patch(
            resource, content=fragment, headers={**FRAGMENT, "if-match": '"x"'}
        )
        assert stale.status_code == 412
        restart = head.replace(ufrag[1], "newfrag1")
        restarted = await http.patch(
            resource, content=restart, headers={**FRAGMENT, "if-match": "*"}
        )
        assert (
            restarted.status_code == 422 and "ICE restart" in restarted.json()["error"]["message"]
        )
        malformed = await http.patch(resource, content="a=candidate:nonsense\r\n", headers=FRAGMENT)
        assert malformed.status_code == 400 and "candidate" in malformed.json()["error"]["message"]
        as_json = await http.patch(
            resource, content="{}", headers={"content-type": "application/json"}
        )
        assert as_json.status_code == 415
        unknown = await http.patch(
            f"{echo_server.url}/whip/sess_nope", content=fragment, headers=FRAGMENT
        )
        assert unknown.status_code == 404
        # None of that hurt the call.
        pool = (await http.get(f"{echo_server.url}/v1/pool")).json()
        assert [slot["state"] for slot in pool["slots"] if slot["transport"] == "whip"] == [
            "active"
        ]
        assert (await http.delete(resource)).status_code == 200
    finally:
        await caller.pc.close()


async def test_whip_refusals_full_pool_bad_sdp_and_wrong_type(
    start_server: Callable[..., ServerProcess], http: httpx.AsyncClient
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    first, second = WhipCaller(), WhipCaller()
    try:
        assert (
            await http.post(f"{server.url}/whip", content="v=0\r\nbogus", headers=SDP)
        ).status_code == 400
        not_sdp = await http.post(f"{server.url}/whip", json={"sdp": await first.offer()})
        assert not_sdp.status_code == 415
        too_big = await http.post(
            f"{server.url}/whip", content="v=0\r\n" + "a=x\r\n" * 20_000, headers=SDP
        )
        assert too_big.status_code == 413
        created = await publish(http, server, first)
        assert created.status_code == 201
        full = await publish(http, server, second)
        assert full.status_code == 503 and int(full.headers["retry-after"]) >= 1
        assert full.json()["error"]["type"] == "session_limit_reached"
        assert (await http.delete(f"{server.url}{created.headers['location']}")).status_code == 200
        again = await http.post(
            f"{server.url}/whip", content=await WhipCaller().offer(), headers=SDP
        )
        assert again.status_code == 201
        await http.delete(f"{server.url}{again.headers['location']}")
    finally:
        await first.pc.close()
        await second.pc.close()
