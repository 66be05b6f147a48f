"""Offers aiortc would trip over or should not trust, and the HTTP edges around them:
each gets a clear 4xx in the one error shape, and no slot is held."""

from __future__ import annotations

import re

import httpx
import pytest

from clients import AgentClient
from tests.support.server import ServerProcess

FINGERPRINT = re.compile(r"a=fingerprint:sha-256 [^\r\n]*")
MANGLED = {
    "payload type 999": lambda sdp: re.sub(r"(m=audio \d+ \S+ )(\d+)", r"\g<1>999", sdp),
    "payload type 200": lambda sdp: re.sub(r"(m=audio \d+ \S+ )(\d+)", r"\g<1>200", sdp),
    "format not a number": lambda sdp: re.sub(r"(m=audio \d+ \S+ )[\d ]+", r"\g<1>abc", sdp),
    "no fingerprint": lambda sdp: re.sub(r"a=fingerprint:[^\r\n]*\r\n", "", sdp),
    "md5 fingerprint": lambda sdp: FINGERPRINT.sub("a=fingerprint:md5 AA:BB:CC", sdp),
    "malformed fingerprint": lambda sdp: FINGERPRINT.sub("a=fingerprint:sha-256 zz:11", sdp),
    # The profile names no DTLS, but aiortc runs it anyway: a fingerprint on every m-line.
    "RTP/SAVPF, no fingerprint": lambda sdp: re.sub(
        r"a=fingerprint:[^\r\n]*\r\n", "", sdp.replace("UDP/TLS/RTP/SAVPF", "RTP/SAVPF")
    ),
    "RTP/AVP, no fingerprint": lambda sdp: re.sub(
        r"a=fingerprint:[^\r\n]*\r\n", "", sdp.replace("UDP/TLS/RTP/SAVPF", "RTP/AVP")
    ),
}


@pytest.mark.parametrize("mangle", MANGLED.values(), ids=MANGLED.keys())
async def test_offers_aiortc_would_trip_over_get_400_and_hold_no_slot(
    echo_server: ServerProcess, mangle: object
) -> None:
    assert callable(mangle)
    offer = mangle(await AgentClient(echo_server.url).offer())
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=20) as http:
        before = (await http.get("/v1/pool")).json()["in_use"]
        for route, headers in (("/v1/realtime/calls", {"content-type": "application/sdp"}),
                               ("/whip", {"content-type": "application/sdp"})):  # fmt: skip
            response = await http.post(route, content=offer, headers=headers)
            assert response.status_code == 400, (route, response.text)
            assert response.json()["error"]["message"]
        response = await http.post("/offer", json={"sdp": offer, "type": "offer"})
        assert response.status_code == 400, response.text
        assert (await http.get("/v1/pool")).json()["in_use"] == before


async def test_http_edges_answer_in_the_error_shape(echo_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=20) as http:
        wrong_method = await http.get("/offer")
        assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
        assert "POST" in wrong_method.json()["error"]["message"]
        assert (await http.delete("/v1/realtime/client_secrets")).status_code == 405
        missing = await http.get("/no/such/page")
        assert missing.status_code == 404 and missing.json()["error"]["type"]
        assert (await http.head("/healthz")).status_code == 200
        assert (await http.head("/readyz")).status_code in (200, 503)
        # The page is still the page.
        page = await http.get("/")
        assert page.status_code == 200 and "<html" in page.text.lower()
