"""Whose RTP a call takes and where its own goes: nothing before the ACK and the caller's
first packet, and only the caller gets it. Loopback has many addresses: 127.0.0.1 is
the caller's (its SDP's and signalling's), 127.0.0.2 a stranger's."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from app.telephony.sip.leg import SipLeg
from app.telephony.sip.rtp import LATCH_RUN, RtpPacket, RtpStream, build, parse
from app.telephony.sip.sdp import AudioOffer

CALLER, STRANGER = "127.0.0.1", "127.0.0.2"


class Socket:
    """A UDP socket on one loopback address that counts the RTP it gets."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.address: tuple[str, int] = self.sock.getsockname()
        self.sequence = 0

    def send(self, port: int, *, ssrc: int = 7, skip: int = 0) -> None:
        self.sequence += 1 + skip
        packet = RtpPacket(0, self.sequence & 0xFFFF, self.sequence * 160, ssrc, b"\xff" * 160)
        self.sock.sendto(build(packet), ("127.0.0.1", port))

    def received(self) -> int:
        count = 0
        while True:
            try:
                data = self.sock.recv(2048)
            except BlockingIOError:
                return count
            count += parse(data) is not None


@pytest.fixture
def sockets() -> Iterator[dict[str, Socket]]:
    made = {name: Socket(host) for name, host in
            [("caller", CALLER), ("sdp", CALLER), ("stranger", STRANGER)]}  # fmt: skip
    yield made
    for each in made.values():
        each.sock.close()


@pytest.fixture
async def leg(sockets: dict[str, Socket]) -> AsyncIterator[tuple[SipLeg, list[bytes]]]:
    """A leg whose offer names the `sdp` socket, as an INVITE from 127.0.0.1 would."""
    offer = AudioOffer(CALLER, sockets["sdp"].address[1], 0, "ulaw", None, 20, CALLER)
    heard: list[bytes] = []
    made = SipLeg("sess_test", offer)
    await made.bind("127.0.0.1")
    made.attach(heard.append, lambda key: None)
    yield made, heard
    await made.close()


async def test_nothing_is_sent_before_the_ack_and_the_callers_first_packet(
    leg: tuple[SipLeg, list[bytes]], sockets: dict[str, Socket]
) -> None:
    """The reflection: an INVITE naming someone else's port, never ACKed, made the
    server stream RTP there (751 packets in 15 s)."""
    call, _ = leg
    await asyncio.sleep(0.5)
    assert sockets["sdp"].received() == 0, "not before the ACK"
    call.connected.set()
    await asyncio.sleep(0.5)
    assert sockets["sdp"].received() == 0, "not before the caller's RTP"
    sockets["caller"].send(call.port)  # from another port of its address: NAT
    await asyncio.sleep(0.5)
    assert sockets["caller"].received() >= 10, "20 ms packets, to where the caller's came from"
    assert sockets["sdp"].received() == 0


async def test_a_strangers_packet_first_does_not_take_the_call(
    leg: tuple[SipLeg, list[bytes]], sockets: dict[str, Socket]
) -> None:
    """The hijack: a stranger who sent one packet first got the agent's audio, and the
    caller's packets were dropped."""
    call, heard = leg
    call.connected.set()
    caller, stranger = sockets["caller"], sockets["stranger"]
    stranger.send(call.port)
    await asyncio.sleep(0.2)
    assert heard == [] and stranger.received() == 0
    caller.send(call.port)
    for _ in range(LATCH_RUN + 2):  # even in sequence, once the caller's own address spoke
        stranger.send(call.port, ssrc=9)
    await asyncio.sleep(0.5)
    assert len(heard) == 1, "only the caller's packet reached the session"
    assert caller.received() >= 10 and stranger.received() == 0


async def test_media_from_elsewhere_is_taken_after_a_run_in_sequence_until_the_caller_speaks(
    sockets: dict[str, Socket],
) -> None:
    """A PBX may send its media from a server other than its signalling's: that source is
    taken after LATCH_RUN packets in sequence, and gives way to the caller's own address."""
    offer = AudioOffer("192.0.2.7", 4000, 0, "ulaw", None, 20, "127.0.0.1")
    heard: list[bytes] = []
    stream = RtpStream("sess_test", offer, heard.append, lambda key: None)
    port = await stream.open("127.0.0.1")
    stranger, caller = sockets["stranger"], sockets["caller"]
    try:
        for _ in range(LATCH_RUN - 1):
            stranger.send(port)
        stranger.send(port, skip=3)  # a gap: the run starts again
        for _ in range(LATCH_RUN - 2):
            stranger.send(port)
        await asyncio.sleep(0.1)
        assert not stream.latched.is_set() and heard == []
        stranger.send(port)
        await asyncio.sleep(0.1)
        assert stream.latched.is_set() and len(heard) == 1, "a run of LATCH_RUN"
        caller.send(port)
        stranger.send(port)
        await asyncio.sleep(0.1)
        assert len(heard) == 2, "the signalling's address took over; the other is dropped"
    finally:
        stream.close()
