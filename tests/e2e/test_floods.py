"""The security probe's two audio floods, replayed against a running server: what they
cost in memory and in event-loop stalls while they run (targets: under 200 MB of RSS
growth, no /readyz answer slower than 1 s). The SIP one is in tests/telephony/sip/test_server.py.

Before the fixes, four media streams each sending two 15 MiB media messages took RSS
from 193 MB to 4,021 MB and stalled the loop 3.2 s a message; four Realtime sockets on
one client secret, each appending 15 MiB of μ-law twice, took it to 3,915 MB and /readyz
to 6.2 s.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Callable

import httpx
import numpy as np
import pytest
import websockets

from app.audio import g711
from tests.support.pressure import watching
from tests.support.server import ServerProcess, until_in_use

pytestmark = pytest.mark.e2e

log = logging.getLogger(__name__)

MIB = 1024 * 1024
KEY = "k3y"
# The probe's attacks ran from one address against the defaults: the share of the slots
# one address may hold (half) is on here, as it is out of the box.
# webrtcvad takes loud noise for speech (Silero does not), so every second of the flood
# is an utterance held and played back: the most work and memory per second of audio.
SHARED = ("--agent", "echo", "--max-sessions", "4", "--limits-address-slots", "0.5",
          "--vad-detector", "webrtcvad")  # fmt: skip


def noise(seconds: float, rate: int) -> bytes:
    """Loud noise, which webrtcvad takes for speech."""
    rng = np.random.default_rng(7)
    return (rng.standard_normal(int(seconds * rate)) * 3000).astype(np.int16).tobytes()


async def opened(url: str, **kwargs: object) -> websockets.ClientConnection | None:
    """A socket the server took, or None for one it refused (at the handshake, or at once
    after it with a close)."""
    try:
        ws = await websockets.connect(url, max_size=None, **kwargs)  # type: ignore[arg-type]
    except websockets.InvalidStatus:
        return None
    return ws


async def send_until_closed(
    ws: websockets.ClientConnection, messages: list[str], errors: list[str] | None = None
) -> int | None:
    """Send each message, reading what comes back (the codes of `error` events into
    `errors`); the close code, once the server or we end it."""

    async def drain() -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for raw in ws:
                event = json.loads(raw)
                if event.get("type") == "error" and errors is not None:
                    errors.append(event["error"].get("code") or event["error"]["type"])

    reader = asyncio.create_task(drain())
    try:
        for message in messages:
            await ws.send(message)
        await asyncio.sleep(0.5)
    except websockets.ConnectionClosed:
        pass
    finally:
        await ws.close()
        await reader
    return ws.close_code


async def test_media_streams_need_the_key_and_cannot_flood_the_server(
    start_server: Callable[..., ServerProcess],
) -> None:
    keyed = start_server(*SHARED, "--server-api-key", KEY)
    stream = keyed.url.replace("http://", "ws://") + "/twilio/stream"
    async with httpx.AsyncClient() as http:
        assert (await http.post(f"{keyed.url}/twilio/voice")).status_code == 401
    refused = [await opened(stream) for _ in range(25)]
    assert refused == [None] * 25, "no credential, no stream"

    # Without any credential set (a trusted network), streams are open: what one address
    # can still do is bounded by the per-address limits and the message limits.
    server = start_server(*SHARED)
    stream = server.url.replace("http://", "ws://") + "/twilio/stream"
    ulaw = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}

    def media(payload: bytes) -> str:
        event = {"track": "inbound", "payload": base64.b64encode(payload).decode()}
        return json.dumps({"event": "media", "streamSid": "MZ1", "media": event})

    start = json.dumps({"event": "start", "streamSid": "MZ1",
                        "start": {"streamSid": "MZ1", "mediaFormat": ulaw}})  # fmt: skip
    huge = media(g711.encode(noise(15 * MIB / 8000, 8000), "ulaw"))  # 15 MiB of μ-law
    largest = media(g711.encode(noise(6, 8000), "ulaw"))  # 6 s: just under 64 KiB
    async with watching(server) as pressure:
        sockets = [await opened(stream) for _ in range(4)]
        closes = await asyncio.gather(
            *(send_until_closed(ws, [start, huge, huge]) for ws in sockets if ws is not None)
        )
        # Then the largest messages taken, as fast as they go: 20 minutes of audio each.
        sockets = [await opened(stream) for _ in range(2)]
        floods = await asyncio.gather(
            *(send_until_closed(ws, [start] + [largest] * 200) for ws in sockets if ws)
        )
    log.info("media stream flood: %s; closes %s, then %s", pressure, closes, floods)
    assert 1009 in closes, "a 15 MiB message is refused unread (message too big)"
    assert pressure.worst_readyz_s < 1.0, pressure
    assert pressure.grown_mb < 200, pressure
    await until_in_use(server.url, 0, timeout_s=30)


async def test_one_client_secret_cannot_flood_the_server_with_audio(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(*SHARED, "--server-api-key", KEY)
    async with httpx.AsyncClient() as http:
        minted = await http.post(f"{server.url}/v1/realtime/client_secrets",
                                 headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
    secret = minted.json()["value"]
    url = server.url.replace("http://", "ws://") + "/v1/realtime"
    protocols = ["realtime", f"openai-insecure-api-key.{secret}"]
    pcmu = json.dumps({"type": "session.update", "session": {"type": "realtime", "audio": {
        "input": {"format": {"type": "audio/pcmu"}}}}})  # fmt: skip

    def append(audio: bytes) -> str:
        return json.dumps({"type": "input_audio_buffer.append",
                           "audio": base64.b64encode(audio).decode()})  # fmt: skip

    huge = append(g711.encode(noise(15 * MIB / 8000, 8000), "ulaw"))  # 33 minutes
    # Just under the message limit: 6.5 minutes of μ-law, over the seconds one may carry.
    long = append(g711.encode(noise(390, 8000), "ulaw"))
    minute = append(noise(60, 24_000))  # the most one append takes: 60 s of pcm16
    errors: list[str] = []

    async def flood(messages: list[str]) -> int | None:
        ws = await opened(url, subprotocols=protocols)
        if ws is None:
            return None
        first = json.loads(await ws.recv())
        if first["type"] == "error":  # refused: this address holds its share already
            errors.append(first["error"]["type"])
            await ws.close()
            return ws.close_code
        return await send_until_closed(ws, messages, errors)

    async with watching(server) as pressure:
        closes = await asyncio.gather(*(flood([pcmu, huge, huge]) for _ in range(4)))
        # Then what fits a message: refused by its seconds, or taken a second at a time.
        floods = await asyncio.gather(*(flood([pcmu, long, minute, minute, minute] * 3)
                                        for _ in range(4)))  # fmt: skip
    log.info("Realtime audio flood: %s; closes %s, then %s", pressure, closes, floods)
    assert errors.count("rate_limit_exceeded") >= 4, "two of four sockets at a time, per address"
    assert 1009 in closes, "a 20 MiB message is refused unread (message too big)"
    assert "invalid_audio" in errors, "6.5 minutes in one append: refused by its seconds"
    assert pressure.worst_readyz_s < 1.0, pressure
    assert pressure.grown_mb < 200, pressure
    await until_in_use(server.url, 0, timeout_s=30, key=KEY)
