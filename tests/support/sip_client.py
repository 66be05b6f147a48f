"""A bare SIP user agent over UDP for tests that need to send what a phone would not:
hand-made requests, malformed ones, and the exchanges around them."""

from __future__ import annotations

import asyncio
import secrets
from typing import cast

from app.telephony.sip import message as sip
from app.telephony.sip.message import SipMessage

OFFER = (
    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
    "m=audio {port} RTP/AVP {formats}\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:9 G722/8000\r\na=rtpmap:101 telephone-event/8000\r\na=ptime:20\r\n"
)


class SipPeer(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received: asyncio.Queue[SipMessage] = asyncio.Queue()
        self.transport: asyncio.DatagramTransport | None = None
        self.port = 0

    @classmethod
    async def open(cls) -> SipPeer:
        loop = asyncio.get_running_loop()
        peer = cls()
        await loop.create_datagram_endpoint(lambda: peer, local_addr=("127.0.0.1", 0))
        return peer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)
        self.port = int(self.transport.get_extra_info("sockname")[1])

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received.put_nowait(sip.parse(data))

    def send(self, data: bytes, port: int) -> None:
        assert self.transport is not None
        self.transport.sendto(data, ("127.0.0.1", port))

    async def next(self, timeout_s: float = 10.0) -> SipMessage:
        return await asyncio.wait_for(self.received.get(), timeout_s)

    async def final(
        self, timeout_s: float = 10.0, call_id: str | None = None, cseq: int | None = None
    ) -> SipMessage:
        """The next response of 200 or above (to that call, that request, if given),
        skipping provisional ones and retransmitted answers to other requests."""
        while True:
            message = await self.next(timeout_s)
            if message.status < 200 or (call_id is not None and message.call_id != call_id):
                continue
            if cseq is not None and message.cseq[0] != cseq:
                continue
            return message

    def request(
        self,
        method: str,
        port: int,
        *,
        call_id: str,
        cseq: int = 1,
        branch: str | None = None,
        to_tag: str = "",
        headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
        body: bytes = b"",
    ) -> bytes:
        to = f"<sip:agent@127.0.0.1:{port}>" + (f";tag={to_tag}" if to_tag else "")
        data = sip.request(method, f"sip:agent@127.0.0.1:{port}", [
            ("Via", f"SIP/2.0/UDP 127.0.0.1:{self.port};branch={branch or sip.new_branch()};rport"),
            ("Max-Forwards", "70"), ("From", f"<sip:test@127.0.0.1:{self.port}>;tag=tester"),
            ("To", to), ("Call-ID", call_id), ("CSeq", f"{cseq} {method}"),
            ("Contact", f"<sip:test@127.0.0.1:{self.port}>"), *headers,
        ], body)  # fmt: skip
        self.send(data, port)
        return data

    def invite(
        self,
        port: int,
        *,
        formats: str = "0 8 101",
        call_id: str | None = None,
        branch: str | None = None,
        rtp_port: int = 40_000,
        **kwargs: object,
    ) -> tuple[str, str]:
        """Send an INVITE with an offer; return its Call-ID and branch."""
        call_id, branch = call_id or secrets.token_hex(8), branch or sip.new_branch()
        offer = OFFER.format(port=rtp_port, formats=formats).encode()
        self.request("INVITE", port, call_id=call_id, branch=branch, body=offer, **kwargs)  # type: ignore[arg-type]
        return call_id, branch

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
