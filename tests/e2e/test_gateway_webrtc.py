"""A WebRTC stack that is not aiortc calls the agent as a telephony gateway's leg would:
GStreamer's webrtcbin, offering PCMU only, with no data channel, RSA DTLS certificate,
over WHIP and over /offer. tests/support/gst_webrtc_client.py is that caller; it runs on
Debian's Python, where GStreamer's bindings are."""

from __future__ import annotations

import asyncio
import json
import subprocess
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from app.audio.resample import Resampler
from tests.support.server import ServerProcess, until_in_use
from tests.support.speech import transcribe, words

pytestmark = pytest.mark.e2e

CLIENT = Path(__file__).parents[1] / "support" / "gst_webrtc_client.py"
SYSTEM_PYTHON = "/usr/bin/python3"
PROBE = "import gi; gi.require_version('GstWebRTC', '1.0'); from gi.repository import GstWebRTC"


@pytest.fixture(scope="module", autouse=True)
def _gstreamer() -> None:
    probe = subprocess.run([SYSTEM_PYTHON, "-c", PROBE], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("GStreamer's webrtcbin is not installed (make test installs it)")


async def call(
    signalling: str, url: str, wav: Path, out: Path, duration_s: float
) -> dict[str, Any]:
    """Run the GStreamer caller; its last line is a JSON summary of the call."""
    process = await asyncio.create_subprocess_exec(
        SYSTEM_PYTHON, str(CLIENT), f"--{signalling}", url, "--wav", str(wav), "-o", str(out),
        "--duration", str(duration_s),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), duration_s + 60)
    lines = stdout.decode().strip().splitlines()
    assert process.returncode == 0 and lines, f"the caller failed:\n{stderr.decode()[-3000:]}"
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def heard(whisper: Any, recording: Path) -> str:
    with wave.open(str(recording)) as wav:
        rate = wav.getframerate()
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    return transcribe(whisper, np.frombuffer(Resampler(48_000).pcm(pcm, rate), np.int16))


async def test_a_gateway_leg_over_whip_hears_a_spoken_reply_and_delete_frees_the_slot(
    agent_server: ServerProcess, speech: Callable[[str], Path], whisper: Any, tmp_path: Path
) -> None:
    question = speech("What is the capital of France?")
    summary = await call("whip", f"{agent_server.url}/whip", question, tmp_path / "reply.wav", 16)
    assert summary["http_status"] == 201 and summary["connected"], summary
    assert summary["location"].startswith("/whip/sess_") and summary["etag"]
    assert summary["delete_status"] == 200, "the caller hung up with DELETE"
    # DELETE answers once the call is over, so the slot is already free.
    pool = await until_in_use(agent_server.url, 0, timeout_s=1)
    assert all(slot["transport"] is None for slot in pool["slots"])
    reply = heard(whisper, tmp_path / "reply.wav")
    assert len(words(reply)) >= 3, f"Whisper hears the agent's reply on the PCMU leg: {reply!r}"


async def test_the_same_leg_works_through_offer(
    echo_server: ServerProcess, speech: Callable[[str], Path], whisper: Any, tmp_path: Path
) -> None:
    """/offer, JSON-wrapped SDP, and the echo agent: what the leg says comes back to it."""
    said = "Please read back my account number."
    summary = await call(
        "offer", f"{echo_server.url}/offer", speech(said), tmp_path / "echo.wav", 8
    )
    assert summary["http_status"] == 200 and summary["connected"], summary
    assert summary["session_id"].startswith("sess_")
    # webrtcbin sends no RTCP BYE when it stops; the media timeout would end the call, but
    # a gateway that knows the call is over hangs up.
    async with httpx.AsyncClient() as http:
        hangup = await http.delete(f"{echo_server.url}/v1/realtime/calls/{summary['session_id']}")
    assert hangup.status_code == 200
    echoed = heard(whisper, tmp_path / "echo.wav")
    assert {"account", "number"} <= set(words(echoed)), echoed
