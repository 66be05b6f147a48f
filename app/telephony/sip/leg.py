"""One SIP call's media and lifetime, as app/calls sees a transport: RTP in and out, the
paced voice track, connected on the caller's ACK (its slot is claimed then, and RTP goes
out only after it), ended on BYE or by us."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.audio.playout import PacedPlayout
from app.tasks import CloseOnce, cancel_task, spawn
from app.telephony.sip.rtp import RtpStream
from app.telephony.sip.sdp import AudioOffer


@dataclass(frozen=True, slots=True)
class Invite:
    """What an incoming call's INVITE tells the application that decides on it."""

    headers: list[tuple[str, str]]
    ringing: Callable[[], None]  # sends 180 Ringing while it decides


class SipLeg:
    watches_media = True  # a phone sends RTP all the time, silence included

    def __init__(self, session_id: str, offer: AudioOffer) -> None:
        self.session_id = session_id
        self.offer = offer
        self.outbound = PacedPlayout(8_000, owner=session_id)
        self.rtp: RtpStream | None = None
        self.port = 0
        self.connected = asyncio.Event()  # the caller's ACK
        self.ended = asyncio.Event()
        # The call's slot and session, claimed at the ACK (a refusal raised): set by the
        # calls side. Before it, a call holds only its record and this RTP socket.
        self.claim: Callable[[], None] = lambda: None
        self.on_close: Callable[[], None] = lambda: None  # the SIP side: BYE, if still up
        # Asks the caller to call another address (REFER): set by the SIP side.
        self.transfer: Callable[[str], Awaitable[None]] | None = None
        self._on_pcm: Callable[[bytes], None] = lambda pcm: None  # nothing before the ACK
        self._on_key: Callable[[str], None] = lambda key: None
        self._sender: asyncio.Task[None] | None = None
        self._closer = CloseOnce(self._close, f"{session_id}:sip-close")

    async def bind(self, host: str) -> int:
        """Bind the RTP socket, for the answer; return its port. Nothing is sent, and
        what comes in is dropped, until the call is confirmed."""
        self.rtp = RtpStream(self.session_id, self.offer, self._pcm, self._key)
        self.port = await self.rtp.open(host)
        return self.port

    def confirm(self) -> None:
        """The caller's ACK: the call's slot and session (a refusal raised), then RTP."""
        self.claim()
        self.connected.set()

    def attach(self, on_pcm: Callable[[bytes], None], on_key: Callable[[str], None]) -> None:
        """The session that hears the caller and speaks to it (the calls side, claiming)."""
        assert self.rtp is not None, "bound before it is answered"
        self._on_pcm, self._on_key = on_pcm, on_key
        self._sender = spawn(self._send(self.rtp), f"{self.session_id}:rtp-out")

    def discard(self) -> None:
        """A call never confirmed: its socket goes, and nothing else was claimed."""
        if self._sender is not None:
            self._sender.cancel()  # attached, then refused: it waits for an ACK in vain
        if self.rtp is not None:
            self.rtp.close()
        self.ended.set()

    def _pcm(self, pcm: bytes) -> None:
        self._on_pcm(pcm)

    def _key(self, key: str) -> None:
        self._on_key(key)

    async def _send(self, rtp: RtpStream) -> None:
        # Not before the ACK: an INVITE from a forged source is never ACKed.
        await self.connected.wait()
        await rtp.send_from(self.outbound)  # which waits for the caller's RTP

    async def wait_connected(self, timeout_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.connected.wait()
        return self.connected.is_set() and not self.ended.is_set()

    def send_key(self, key: str) -> None:
        """Press a key to the caller (RFC 4733; ValueError if it cannot be sent)."""
        if self.rtp is None:
            raise ValueError("the call's media is not up yet")
        self.rtp.send_key(key)

    def last_input_at(self) -> float | None:
        return self.rtp.last_input_at if self.rtp is not None else None

    async def flush(self, timeout_s: float) -> None:
        """Nothing queued beside the audio; the call's end is the BYE."""

    async def close(self) -> None:
        await self._closer()

    async def _close(self) -> None:
        try:
            self.outbound.stop()
            await cancel_task(self._sender)
            if self.rtp is not None:
                self.rtp.close()
        finally:
            self.ended.set()
            self.on_close()
