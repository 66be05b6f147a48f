"""The call's RTP socket stays open whatever ports the OS hands out."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from app.telephony.sip import rtp
from app.telephony.sip.rtp import RtpPacket, RtpStream, build
from app.telephony.sip.sdp import AudioOffer

OFFER = AudioOffer("127.0.0.1", 40000, 0, "ulaw", None, 20)


def free_odd_ports(count: int) -> list[int]:
    found: list[int] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1] | 1
    while len(found) < count:
        port = port + 2 if port + 2 < 65535 else 20001
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as test:
            try:
                test.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
    return found


async def test_when_every_port_offered_is_odd_the_last_one_is_kept_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    odd = iter(free_odd_ports(rtp.EVEN_PORT_TRIES))
    bind = loop.create_datagram_endpoint

    async def only_odd(factory: Any, local_addr: tuple[str, int], **kwargs: Any) -> Any:
        return await bind(factory, local_addr=(local_addr[0], next(odd)), **kwargs)

    monkeypatch.setattr(loop, "create_datagram_endpoint", only_odd)
    heard: list[bytes] = []
    stream = RtpStream("sess_test", OFFER, heard.append, lambda _: None)
    port = await stream.open("127.0.0.1")
    monkeypatch.undo()
    assert port % 2 == 1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as phone:
            phone.sendto(build(RtpPacket(0, 1, 160, 7, b"\xff" * 160)), ("127.0.0.1", port))
            for _ in range(100):
                if stream.packets_in:
                    break
                await asyncio.sleep(0.01)
        assert stream.packets_in == 1 and heard, "the socket it answered with still listens"
    finally:
        stream.close()
