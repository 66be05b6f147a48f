"""One aiortc peer connection: negotiation, tracks, data channel, and its end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from aiortc import (
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamTrack

from app.errors import SignallingError
from app.rtc.candidates import MAX_REMOTE_CANDIDATES, keep_usable, usable
from app.rtc.datachannel import MAX_MESSAGE_BYTES, PeerEvents
from app.rtc.inbound import InboundAudio
from app.rtc.outbound import PacedAudioTrack
from app.rtc.patches import release_audio_promptly
from app.rtc.sdp import audio_rate_for_offer, ice_ufrag, sent_audio_codec
from app.rtc.trickle import IceFragment
from app.tasks import CloseOnce, cancel_task, spawn

log = logging.getLogger(__name__)


class RtcPeer:
    def __init__(
        self,
        session_id: str,
        ice_servers: list[dict[str, str]],
        *,
        dtx: bool = True,
        event_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        """`ice_servers`: RTCIceServer dictionaries, as ServerSettings.ice_config() gives;
        `event_bytes`: the largest client event taken on the data channel."""
        self.session_id = session_id
        self._dtx = dtx
        servers = [RTCIceServer(**entry) for entry in ice_servers]
        # An explicit empty list: aiortc's default would try a public STUN server.
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=servers))
        self.connected = asyncio.Event()
        self.ended = asyncio.Event()
        self.events = PeerEvents(
            session_id, on_stalled=self.ended.set, max_message_bytes=event_bytes
        )
        self._trickled = 0  # remote candidates taken after the offer
        self.outbound: PacedAudioTrack | None = None
        self.inbound: InboundAudio | None = None
        self._mic: MediaStreamTrack | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closer = CloseOnce(self._close, f"{session_id}:peer-close")
        self.pc.on("track", self._on_track)
        self.pc.on("datachannel", self._on_datachannel)
        self.pc.on("connectionstatechange", self._on_state)

    async def answer(self, offer_sdp: str) -> str:
        """Apply the offer and return the answer SDP with every ICE candidate in it."""
        rate = audio_rate_for_offer(offer_sdp)
        offer_sdp = keep_usable(offer_sdp)
        try:
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except (ValueError, TypeError, KeyError, StopIteration, AssertionError) as exc:
            detail = str(exc) or "a value out of range"
            raise SignallingError(f"SDP offer rejected: {detail}") from exc
        self.outbound = PacedAudioTrack(rate, owner=self.session_id)
        self.pc.addTrack(self.outbound)
        # aiortc gathers all candidates inside setLocalDescription: no trickle needed.
        await self.pc.setLocalDescription(await self.pc.createAnswer())
        answer = str(self.pc.localDescription.sdp)
        if sent_audio_codec(answer) == "audio/opus":
            self.outbound.send_opus_packets(dtx=self._dtx)
        return answer

    @property
    def remote_ufrag(self) -> str | None:
        """The ICE credentials the offer came with: a fragment with others restarts ICE."""
        remote = self.pc.remoteDescription
        return ice_ufrag(remote.sdp) if remote is not None else None

    @property
    def local_ufrag(self) -> str | None:
        local = self.pc.localDescription
        return ice_ufrag(local.sdp) if local is not None else None

    async def add_candidates(self, fragment: IceFragment) -> None:
        """Candidates the peer trickled after its offer (a WHIP PATCH); unusable ones, and
        any past MAX_REMOTE_CANDIDATES for the call, are dropped (app/rtc/candidates.py)."""
        for candidate in fragment.candidates:
            if not usable(candidate) or self._trickled >= MAX_REMOTE_CANDIDATES:
                continue
            self._trickled += 1
            try:
                await self.pc.addIceCandidate(candidate)
            except ValueError as exc:
                raise SignallingError(f"ICE candidate rejected: {exc}") from exc
        if fragment.ended:
            await self.pc.addIceCandidate(None)

    def bind(
        self,
        on_pcm: Callable[[bytes], None],
        on_open: Callable[[], None],
        on_message: Callable[[str | bytes], None],
    ) -> None:
        """Route inbound audio (16 kHz PCM) and event-channel messages; starts reading the mic."""
        self.events.on_open = on_open
        self.events.on_message = on_message
        if self._mic is None:
            raise SignallingError("the offer carried no audio track to listen to")
        self.inbound = InboundAudio(self._mic, on_pcm)
        self._reader = spawn(self.inbound.run(), f"{self.session_id}:mic")

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._mic is None:
            self._mic = track
            release_audio_promptly(self.pc, track)

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        self.events.attach(channel)

    def _on_state(self) -> None:
        state = self.pc.connectionState
        log.info("peer connection %s", state, extra={"session_id": self.session_id})
        if state == "connected":
            self.connected.set()
        elif state in ("failed", "closed"):
            self.ended.set()

    watches_media = True  # a WebRTC microphone sends packets all the time, even in silence

    def last_input_at(self) -> float | None:
        return self.inbound.last_frame_at if self.inbound is not None else None

    async def flush(self, timeout_s: float) -> None:
        await self.events.flush(timeout_s)

    async def wait_connected(self, timeout_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.connected.wait()
        return self.connected.is_set() and not self.ended.is_set()

    async def close(self) -> None:
        """Idempotent; concurrent callers wait for the same close."""
        await self._closer()

    async def _close(self) -> None:
        try:
            self.events.close()
            if self.outbound is not None:
                self.outbound.stop()
            await cancel_task(self._reader)
            await self.pc.close()
        finally:
            self.ended.set()
