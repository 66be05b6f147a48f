"""Request bodies have bounds, and the key is checked before a body is read."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx

from tests.support.server import ServerProcess

MIB = 1024 * 1024


FILE_PART = (
    b'--b\r\nContent-Disposition: form-data; name="sdp"; filename="offer.sdp"\r\n'
    b"Content-Type: application/sdp\r\n\r\n"
)


async def chunks(total: int, size: int = 64 * 1024, first: bytes = b"") -> AsyncIterator[bytes]:
    """A body with no Content-Length (chunked): its size shows only as it arrives."""
    yield first
    sent = len(first)
    while sent < total:
        yield b"x" * size
        sent += size


async def test_bodies_over_the_bound_get_413_and_the_server_goes_on(
    echo_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        declared = await http.post(
            "/v1/realtime/calls", content=b"x" * (2 * MIB),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )  # fmt: skip
        # A well-formed multipart file part that goes on and on.
        streamed = await http.post(
            "/v1/realtime/calls", content=chunks(2 * MIB, first=FILE_PART),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )  # fmt: skip
        sdp = await http.post(
            "/v1/realtime/calls", content=chunks(256 * 1024),
            headers={"content-type": "application/sdp"},
        )  # fmt: skip
        offer = await http.post("/offer", content=chunks(512 * 1024),
                                headers={"content-type": "application/json"})  # fmt: skip
        for response in (declared, streamed, sdp, offer):
            assert response.status_code == 413, (response.status_code, response.text)
            assert response.json()["error"]["type"] == "invalid_request_error"
        assert (await http.get("/healthz")).status_code == 200


async def test_the_key_is_checked_before_the_offer_is_read(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", "k3y")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        # Valid JSON, but an SDP over any offer's size: without the key, 401 comes first.
        big = await http.post("/offer", json={"sdp": "v" * 100_000, "type": "offer"})
        assert big.status_code == 401
        keyed = await http.post("/offer", json={"sdp": "v" * 100_000, "type": "offer"},
                                headers={"Authorization": "Bearer k3y"})  # fmt: skip
        assert keyed.status_code == 400 and "sdp" in keyed.json()["error"]["message"]


async def test_a_multipart_part_that_is_not_utf8_gets_400(echo_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        response = await http.post(
            "/v1/realtime/calls", files={"sdp": ("offer.sdp", b"v=0\xff\xfe", "application/sdp")}
        )
    assert response.status_code == 400
    assert "UTF-8" in response.json()["error"]["message"]
