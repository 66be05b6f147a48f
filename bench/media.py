"""The media path's CPU per call, calls held per core, and where the time goes.

    python -m bench.media                          # 1 and 4 calls, uvloop and asyncio
    python -m bench.media --calls 1 4 8 --loops uvloop
    python -m bench.media --profile                # + py-spy's split at the largest count
    python -m bench.media --server=--audio-echo-cancellation=true   # any server flags

The echo agent answers, so only the media path runs: for WebRTC, ICE, DTLS-SRTP, RTP,
Opus decode and encode, resampling, VAD and pacing; for SIP, plain RTP and G.711.
WebRTC callers are aiortc peers and SIP callers baresip phones, each saying a sentence
every 6 s, so the server sees speech both ways and silence, as in a conversation. Only
the server process's CPU is counted, over a window after the calls are up. Calls per
core = 100 / the CPU % per call at that count. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import machine
from bench.latency import cpu_s
from clients import AgentClient, load_wav
from tests.support.baresip import Baresip
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.speech import speak_to_wav, telephone_pcm

WINDOW_S = 24.0
PY_SPY = Path(sys.executable).parent / "py-spy"  # the dev extra's, next to this Python
SETTLE_S = 3.0
SENTENCE = "Please read back my account number."

# A sample whose thread waits (a lock, a condition, the GIL, epoll) is idle, not cost.
IDLE = ("epoll_pwait", "epoll_wait", "PyThread_acquire_lock_timed", "pthread_cond_timedwait",
        "pthread_cond_wait", "take_gil", "sem_clockwait", "sem_timedwait")  # fmt: skip
SOCKET_CALLS = ("sendmsg", "recvmsg", "sendto", "recvfrom")
# Otherwise the innermost Python frame decides its share, the first match winning, so time
# in C (libopus, libsrtp, libuv) counts towards the Python code that called it.
SPLIT = [
    ("SRTP and DTLS (pylibsrtp, OpenSSL)", ("rtcdtlstransport", "pylibsrtp", "OpenSSL")),
    ("Opus decode and encode (PyAV, libopus)", ("codecs/opus", "av/", "app/rtc/opus")),
    ("aiortc RTP: parse, jitter buffer, RTCP, send", ("aiortc/",)),
    ("ICE and STUN (aioice)", ("aioice/",)),
    ("ours: resample, VAD, pacing, session", ("app/",)),
    ("event loop: asyncio/uvloop, tasks, futures", ("asyncio/", "uvloop/", "selectors")),
    ("threads and queues (aiortc's decoder thread)", ("threading", "queue.py")),
]


async def held_webrtc(server: ServerProcess, calls: int, during: Callable[[], Awaitable[None]],
                      wav: Path) -> None:  # fmt: skip
    """Hold `calls` WebRTC calls, each saying `wav` every 6 s, while `during` runs."""
    said = load_wav(str(wav))
    clients = [AgentClient(server.url) for _ in range(calls)]
    for client in clients:
        await client.connect()

    async def talk(client: AgentClient) -> None:
        while True:
            client.mic.say(said)
            await asyncio.sleep(6)

    talkers = [asyncio.create_task(talk(client)) for client in clients]
    try:
        await asyncio.sleep(SETTLE_S)
        await during()
    finally:
        for task in talkers:
            task.cancel()
        await asyncio.gather(*(client.close() for client in clients))
        await until_in_use(server.url, 0, timeout_s=30)


def phone_microphone(speech48k: Path, out: Path, seconds: float = WINDOW_S + 30) -> Path:
    """The sentence, then silence to 6 s, over and over for `seconds`."""
    said = telephone_pcm(speech48k)
    cycle = said + bytes(max(0, 6 * 8_000 * 2 - len(said)))
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8_000)
        wav.writeframes(cycle * int(seconds / 6 + 1))
    return out


async def held_sip(server: ServerProcess, calls: int, during: Callable[[], Awaitable[None]],
                   mic: Path, folder: Path) -> None:  # fmt: skip
    """Hold `calls` SIP calls from baresip phones speaking `mic` while `during` runs."""
    phones = [Baresip(folder / f"phone{calls}-{i}-{time.monotonic_ns()}", mic)
              for i in range(calls)]  # fmt: skip
    try:
        for phone in phones:
            await phone.connect()
            await phone.command("dial", f"sip:agent@127.0.0.1:{server.sip_port}")
            await phone.wait_for("CALL_ESTABLISHED")
        await until_in_use(server.url, calls, state="active")
        await asyncio.sleep(SETTLE_S)
        await during()
    finally:
        for phone in phones:
            await phone.stop()
        await until_in_use(server.url, 0, timeout_s=30)


class CpuWindow:
    """The server's CPU % over one window, measured by `run`."""

    def __init__(self, pid: int, seconds: float) -> None:
        self.pid, self.seconds, self.percent = pid, seconds, 0.0

    async def run(self) -> None:
        cpu0, wall0 = cpu_s(self.pid), time.monotonic()
        await asyncio.sleep(self.seconds)
        self.percent = (cpu_s(self.pid) - cpu0) / (time.monotonic() - wall0) * 100


class Profile:
    """py-spy's samples of the server over one window, native frames included, as
    collapsed stacks (sampling pauses the process: the CPU figures come from other runs)."""

    def __init__(self, pid: int, seconds: float, out: Path) -> None:
        self.pid, self.seconds, self.out = pid, seconds, out

    async def run(self) -> None:
        command = [str(PY_SPY), "record", "--pid", str(self.pid), "--duration",
                   str(int(self.seconds)), "--rate", "100", "--format", "raw", "--native",
                   "-o", str(self.out)]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        await process.wait()


def category(frames: list[str]) -> str | None:
    """What a sample's thread was doing; None when it was waiting."""
    if any(mark in frame for frame in frames[-4:] for mark in IDLE):
        return None
    if frames[-1].startswith(SOCKET_CALLS):
        return "UDP send and receive (the kernel's socket calls)"
    python = [frame for frame in frames if ".py:" in frame]
    innermost = python[-1] if python else ""
    return next((label for label, keys in SPLIT if any(k in innermost for k in keys)), "other")


def split(raw: Path) -> list[tuple[str, float]]:
    """Each category's share of the samples where a thread was busy, largest first."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        name = category(stack.split(";"))
        if name is not None:
            counts[name] += int(count)
    total = sum(counts.values()) or 1
    return [(name, count / total * 100) for name, count in counts.most_common()]


HEADER = (
    "    loop  calls  WebRTC %/call  SIP %/call  WebRTC calls/core  SIP calls/core"
    f"  ({WINDOW_S:.0f} s windows)"
)


async def measure(server: ServerProcess, counts: list[int], wav: Path, mic: Path,
                  folder: Path, loop: str) -> None:  # fmt: skip
    """Print a row per call count: CPU per call and calls per core, both transports."""
    for calls in counts:
        row: dict[str, float] = {}
        window = CpuWindow(server.proc.pid, WINDOW_S)
        await held_webrtc(server, calls, window.run, wav)
        row["webrtc"] = window.percent / calls
        window = CpuWindow(server.proc.pid, WINDOW_S)
        await held_sip(server, calls, window.run, mic, folder)
        row["sip"] = window.percent / calls
        print(
            f"{loop:>8} {calls:>6} {row['webrtc']:>14.1f} {row['sip']:>11.1f} "
            f"{100 / row['webrtc']:>15.0f} {100 / row['sip']:>12.0f}",
            flush=True,
        )


async def profile(server: ServerProcess, calls: int, wav: Path, mic: Path,
                  folder: Path) -> None:  # fmt: skip
    for transport in ("webrtc", "sip"):
        raw = folder / f"profile-{transport}.txt"
        sampler = Profile(server.proc.pid, WINDOW_S, raw)
        if transport == "webrtc":
            await held_webrtc(server, calls, sampler.run, wav)
        else:
            await held_sip(server, calls, sampler.run, mic, folder)
        print(f"\nwhere the server's time goes, {transport}, {calls} calls (py-spy, {raw}):")
        for name, share in split(raw):
            print(f"  {share:5.1f}%  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--loops", nargs="+", choices=["uvloop", "asyncio"], default=["uvloop", "asyncio"]
    )
    parser.add_argument("--profile", action="store_true", help="also py-spy's split (uvloop)")
    parser.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="FLAG",
        help="more server flags, e.g. --server=--audio-noise-reduction=far_field (one each)",
    )
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="media-"))
    wav = folder / "sentence.wav"
    speak_to_wav(SENTENCE, wav)
    mic = phone_microphone(wav, folder / "phone-mic.wav")
    print(HEADER)
    for loop in args.loops:
        server = ServerProcess(
            ["--agent", "echo", "--max-sessions", str(max(args.calls)),
             "--sip-port", str(free_udp_port()), "--server-event-loop", loop, *args.server],
            folder / f"server-{loop}.log",
        )  # fmt: skip
        server.wait_healthy()
        try:
            asyncio.run(measure(server, args.calls, wav, mic, folder, loop))
            if args.profile and loop == args.loops[0]:
                asyncio.run(profile(server, max(args.calls), wav, mic, folder))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
