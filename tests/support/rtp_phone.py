"""A phone's media side in Python: μ-law RTP at 20 ms to the agent, what comes back kept,
and, like a handset or a line without echo cancellation, the agent's own voice sent back
to it as echo, `return_loss_db` quieter and `echo_delay_ms` late."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, cast

import numpy as np
import websockets

from app.audio import g711
from app.telephony.sip.rtp import RtpPacket, build, parse
from app.telephony.sip.sdp import read_offer
from tests.support.server import ServerProcess, until_in_use
from tests.support.sip_client import SipPeer

FRAME = 160  # samples: 20 ms at 8 kHz


class RtpPhone(asyncio.DatagramProtocol):
    def __init__(self, return_loss_db: float | None, echo_delay_ms: int = 100) -> None:
        self.heard = bytearray()  # the agent's audio, s16 at 8 kHz
        self._gain = None if return_loss_db is None else 10 ** (-return_loss_db / 20)
        self._echo: deque[np.ndarray] = deque([np.zeros(FRAME)] * (echo_delay_ms // 20))
        self._speech = bytearray()
        self._transport: asyncio.DatagramTransport | None = None
        self._remote: tuple[str, int] | None = None
        self._sender: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, return_loss_db: float | None) -> RtpPhone:
        phone = cls(return_loss_db)
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: phone, local_addr=("127.0.0.1", 0))
        return phone

    @property
    def port(self) -> int:
        assert self._transport is not None
        return int(self._transport.get_extra_info("sockname")[1])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        packet = parse(data)
        if packet is not None and packet.payload_type == 0:
            self.heard += g711.decode(packet.payload, "ulaw")

    def start(self, remote: tuple[str, int]) -> None:
        self._remote = remote
        self._sender = asyncio.create_task(self._send())

    def say(self, pcm8k: bytes) -> None:
        self._speech += pcm8k

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        start, sequence = loop.time(), 0
        heard_upto = 0
        while True:
            mic = np.zeros(FRAME)
            if self._speech:
                chunk = bytes(self._speech[: FRAME * 2]).ljust(FRAME * 2, b"\0")
                del self._speech[: FRAME * 2]
                mic = np.frombuffer(chunk, np.int16).astype(np.float64)
            if self._gain is not None:  # the agent's latest 20 ms, back into the microphone
                fresh = bytes(self.heard[heard_upto : heard_upto + FRAME * 2])
                heard_upto += len(fresh)
                self._echo.append(np.frombuffer(fresh.ljust(FRAME * 2, b"\0"), np.int16) * 1.0)
                mic = mic + self._echo.popleft() * self._gain
            pcm = np.clip(mic, -32768, 32767).astype(np.int16).tobytes()
            packet = RtpPacket(
                0, sequence & 0xFFFF, sequence * FRAME, 0x5EED, g711.encode(pcm, "ulaw")
            )
            assert self._transport is not None and self._remote is not None
            self._transport.sendto(build(packet), self._remote)
            sequence += 1
            await asyncio.sleep(max(0.0, start + sequence * 0.02 - loop.time()))

    def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
        if self._transport is not None:
            self._transport.close()


class PhoneCall:
    """A SIP call from an RtpPhone to `server`, with the call's events as a sideband
    controller hears them."""

    def __init__(self, signalling: SipPeer, phone: RtpPhone) -> None:
        self.signalling, self.phone = signalling, phone
        self.events: list[dict[str, Any]] = []
        self._ws: websockets.ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, server: ServerProcess, return_loss_db: float | None) -> PhoneCall:
        call = cls(await SipPeer.open(), await RtpPhone.open(return_loss_db))
        call_id, _ = call.signalling.invite(server.sip_port, rtp_port=call.phone.port)
        ok = await call.signalling.final(call_id=call_id)
        call.signalling.request("ACK", server.sip_port, call_id=call_id, to_tag=ok.to_tag)
        answer = read_offer(ok.body.decode())
        call.phone.start((answer.address, answer.port))
        pool = await until_in_use(server.url, 1, state="active")
        session_id = next(s["session_id"] for s in pool["slots"] if s["transport"] == "sip")
        call._ws = await websockets.connect(
            f"ws://127.0.0.1:{server.port}/v1/realtime?call_id={session_id}"
        )
        call._reader = asyncio.create_task(call._read())
        return call

    async def _read(self) -> None:
        assert self._ws is not None
        async for raw in self._ws:
            self.events.append(json.loads(raw))

    def count(self, kind: str) -> int:
        return sum(event["type"] == kind for event in self.events)

    async def until(self, kind: str, count: int = 1, timeout_s: float = 30) -> None:
        async with asyncio.timeout(timeout_s):
            while self.count(kind) < count:  # noqa: ASYNC110 - the reader fills events
                await asyncio.sleep(0.05)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        self.phone.close()
        self.signalling.close()
