"""The media path's CPU per call: a SIP call (plain RTP, G.711) against a WebRTC call
(DTLS-SRTP, Opus), on the same echo server.

    python -m bench.sip_media               # 1 and 4 calls of each
    python -m bench.sip_media --calls 1 2 4

SIP callers are baresip phones, each saying a sentence every 6 s (its microphone is a
WAV of sentence and silence, repeated); WebRTC callers are aiortc peers doing the same
(bench.capacity's steady_media). The echo agent answers each sentence, so the server's
media path sees speech both ways and silence, as in a conversation. Only the server
process's CPU is counted, over a 24 s window after the calls are up. It prints figures;
it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import wave
from pathlib import Path

from bench import machine
from bench.capacity import steady_media
from bench.latency import cpu_s
from tests.support.baresip import Baresip
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.speech import speak_to_wav, telephone_pcm

WINDOW_S = 24.0


def phone_microphone(speech48k: Path, out: Path, seconds: float) -> Path:
    """The sentence, then silence to 6 s, over and over for `seconds`."""
    said = telephone_pcm(speech48k)
    cycle = said + bytes(max(0, 6 * 8_000 * 2 - len(said)))
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8_000)
        wav.writeframes(cycle * int(seconds / 6 + 1))
    return out


async def steady_sip(server: ServerProcess, calls: int, mic: Path, folder: Path) -> float:
    phones = [Baresip(folder / f"phone{calls}-{i}", mic) for i in range(calls)]
    try:
        for phone in phones:
            await phone.connect()
            await phone.command("dial", f"sip:agent@127.0.0.1:{server.sip_port}")
            await phone.wait_for("CALL_ESTABLISHED")
        await until_in_use(server.url, calls, state="active")
        await asyncio.sleep(3)
        cpu0, wall0 = cpu_s(server.proc.pid), time.monotonic()
        await asyncio.sleep(WINDOW_S)
        return (cpu_s(server.proc.pid) - cpu0) / (time.monotonic() - wall0) * 100 / calls
    finally:
        for phone in phones:
            await phone.stop()
        await until_in_use(server.url, 0, timeout_s=30)


async def compare(server: ServerProcess, counts: list[int], wav: Path, mic: Path,
                  folder: Path) -> None:  # fmt: skip
    print(f"calls  SIP/RTP G.711 %/call  WebRTC Opus %/call  ({WINDOW_S:.0f} s window)")
    for calls in counts:
        sip = await steady_sip(server, calls, mic, folder)
        webrtc = await steady_media(server.url, server.proc.pid, calls, wav, WINDOW_S)
        print(f"{calls:>5} {sip:>20.1f} {webrtc:>19.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="sip-media-"))
    wav = folder / "sentence.wav"
    speak_to_wav("Please read back my account number.", wav)
    mic = phone_microphone(wav, folder / "phone-mic.wav", WINDOW_S + 30)
    server = ServerProcess(
        ["--agent", "echo", "--max-sessions", str(max(args.calls)),
         "--sip-port", str(free_udp_port())],
        folder / "server.log",
    )  # fmt: skip
    server.wait_healthy()
    try:
        asyncio.run(compare(server, args.calls, wav, mic, folder))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
