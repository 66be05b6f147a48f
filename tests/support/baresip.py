"""baresip (Debian's baresip-core), a real SIP phone, driven through its ctrl_tcp module:
it dials, speaks a WAV as its microphone, presses keys (RFC 4733), hangs up, and records
what it hears (the sndfile module writes each call's decoded audio to a WAV)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.server import free_port

CONFIG = """\
poll_method\tepoll
# No audio player: ALSA's null device spins a core per phone; sndfile records anyway.
sip_listen\t127.0.0.1:{sip_port}
call_max_calls\t4
audio_source\taufile,{microphone}
ausrc_srate\t8000
auplay_srate\t8000
ausrc_channels\t1
auplay_channels\t1
net_interface\t127.0.0.1
rtp_ports\t{rtp_low}-{rtp_high}
jitter_buffer_delay\t1-10
module_path\t/usr/lib/baresip/modules
module\tg711.so
module\taufile.so
module\tsndfile.so
module_tmp\taccount.so
module_app\tmenu.so
module_app\tctrl_tcp.so
ctrl_tcp_listen\t127.0.0.1:{ctrl_port}
snd_path\t{recordings}
statmode_default\toff
"""


def have_baresip() -> bool:
    return shutil.which("baresip") is not None and Path("/usr/lib/baresip/modules").is_dir()


class Baresip:
    """One phone. Its microphone WAV (8 kHz mono s16) must last the whole call: baresip
    hangs up when its file source ends."""

    def __init__(self, folder: Path, microphone: Path) -> None:
        self.folder = folder
        self.recordings = folder / "recordings"
        self.recordings.mkdir(parents=True, exist_ok=True)
        self._microphone = microphone
        self._log = open(folder / "baresip.log", "wb")  # noqa: SIM115 - closed in stop()
        self._launch()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.events: list[dict[str, Any]] = []
        self._tokens = 0

    def _launch(self) -> None:
        # baresip also binds SIP over TLS on the SIP port + 1, which no free_port() checked.
        sip_port, ctrl_port = free_port(), free_port()
        rtp_low = 20_000 + (sip_port % 400) * 100
        (self.folder / "config").write_text(CONFIG.format(
            sip_port=sip_port, microphone=self._microphone, ctrl_port=ctrl_port,
            rtp_low=rtp_low, rtp_high=rtp_low + 99, recordings=self.recordings,
        ))  # fmt: skip
        (self.folder / "accounts").write_text(
            f"<sip:phone@127.0.0.1:{sip_port}>;regint=0;answermode=manual;audio_codecs=PCMU,PCMA\n"
        )
        self._ctrl_port = ctrl_port
        self._process = subprocess.Popen(
            ["baresip", "-f", str(self.folder)], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    async def connect(self, timeout_s: float = 15.0, launches: int = 3) -> None:
        """Waits for the ctrl_tcp socket; a phone that lost a race for one of its ports
        (another process bound it between free_port() and baresip) starts again on others."""
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    self._reader, self._writer = await asyncio.open_connection(
                        "127.0.0.1", self._ctrl_port
                    )
                    return
                except OSError:
                    if self._process.poll() is not None:
                        launches -= 1
                        if launches == 0 or "Address already in use" not in self.log():
                            raise RuntimeError(f"baresip exited:\n{self.log()}") from None
                        self._launch()
                    await asyncio.sleep(0.1)

    async def command(self, name: str, params: str = "") -> dict[str, Any]:
        assert self._writer is not None
        self._tokens += 1
        token = f"t{self._tokens}"
        body = json.dumps({"command": name, "params": params, "token": token}).encode()
        self._writer.write(b"%d:%s," % (len(body), body))
        await self._writer.drain()
        async with asyncio.timeout(10):
            while True:
                message = await self._read()
                if message.get("response") and message.get("token") == token:
                    if not message.get("ok"):
                        raise RuntimeError(f"baresip {name} failed: {message}\n{self.log()}")
                    return message

    async def wait_for(self, kind: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The first event of `kind` (CALL_ESTABLISHED, CALL_CLOSED, ...), seen or to come."""
        async with asyncio.timeout(timeout_s):
            while True:
                for event in self.events:
                    if event.get("type") == kind:
                        return event
                await self._read()

    async def _read(self) -> dict[str, Any]:
        """One netstring-framed JSON message; events are kept."""
        assert self._reader is not None
        length = int((await self._reader.readuntil(b":"))[:-1])
        message: dict[str, Any] = json.loads((await self._reader.readexactly(length + 1))[:-1])
        if message.get("event"):
            self.events.append(message)
        return message

    def heard(self) -> Path:
        """The WAV of what the phone heard in its (last) call."""
        decoded = sorted(self.recordings.glob("*-dec.wav"))
        assert decoded, f"baresip recorded nothing:\n{self.log()}"
        return decoded[-1]

    def log(self) -> str:
        return (self.folder / "baresip.log").read_text(errors="replace")[-4000:]

    async def stop(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(
                RuntimeError, OSError, TimeoutError, asyncio.IncompleteReadError
            ):
                await self.command("quit")
            self._writer.close()
        try:
            await asyncio.wait_for(asyncio.to_thread(self._process.wait), 5)
        except TimeoutError:
            self._process.kill()
        self._log.close()
