"""A call's recording: both sides on the caller's clock, the agent's audio where it
started playing, cut where an interruption stopped it; kept for its retention only."""

from __future__ import annotations

import asyncio
import io
import os
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from app.calls.recordings import RecordingStore
from app.config import RecordingSettings
from app.session.recording import Recording


def tone(seconds: float, rate: int, amplitude: int = 8000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 440 * t) * amplitude).astype(np.int16).tobytes()


def channels(wav: bytes) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(io.BytesIO(wav)) as reader:
        assert reader.getnchannels() == 2 and reader.getframerate() == 16_000
        frames = np.frombuffer(reader.readframes(reader.getnframes()), dtype=np.int16)
    return frames[0::2], frames[1::2]


def test_the_agent_is_placed_where_the_caller_was_and_cut_where_it_stopped() -> None:
    recording = Recording(max_s=60)
    recording.heard(tone(1.0, 16_000))
    recording.played(tone(2.0, 24_000), 24_000)  # starts playing 1 s in
    recording.heard(bytes(16_000))  # half a second more of the caller: then the cut
    recording.cut()
    caller, agent = channels(recording.wav())
    assert len(caller) == 24_000
    assert not agent[:16_000].any(), "nothing of the agent before it started"
    assert np.abs(agent[16_200:23_800]).mean() > 3000, "its voice from then on"
    assert len(agent) == len(caller), "what was queued after the cut was not heard"


def test_a_recording_holds_at_most_its_length() -> None:
    recording = Recording(max_s=1)
    recording.heard(tone(3.0, 16_000))
    recording.played(tone(1.0, 16_000), 16_000)
    caller, agent = channels(recording.wav())
    assert len(caller) == 16_000 and not agent.any()


async def test_a_kept_recording_goes_when_its_retention_runs_out(tmp_path: Path) -> None:
    old = tmp_path / "sess_old.wav"
    old.write_bytes(b"left by an earlier process")
    os.utime(old, (time.time() - 10, time.time() - 10))
    store = RecordingStore(RecordingSettings(retention_s=0.3, dir=str(tmp_path)))
    store.start()
    assert not contents(tmp_path), "what an earlier process kept past its retention is gone"
    await store.keep("sess_a", b"RIFF")
    path = store.find("sess_a")
    assert path is not None and contents(path) == b"RIFF"
    await asyncio.sleep(0.5)
    assert store.find("sess_a") is None and not contents(tmp_path)
    off = RecordingStore(RecordingSettings(retention_s=0, dir=str(tmp_path)))
    await off.keep("sess_b", b"RIFF")
    assert off.find("sess_b") is None and not contents(tmp_path)


def contents(path: Path) -> bytes | list[Path]:
    """A file's bytes, or a folder's files."""
    return sorted(path.iterdir()) if path.is_dir() else path.read_bytes()


async def test_retention_holds_across_a_crash_and_a_restart(tmp_path: Path) -> None:
    settings = RecordingSettings(retention_s=60, dir=str(tmp_path))
    crashed = RecordingStore(settings)
    crashed.start()
    await crashed.keep("sess_fresh", b"RIFF fresh")
    await crashed.keep("sess_stale", b"RIFF stale")
    stale = tmp_path / "sess_stale.wav"
    os.utime(stale, (time.time() - 61, time.time() - 61))
    (tmp_path / "not an id.wav").write_bytes(b"RIFF")
    # No close(): the process died. The next one serves what is still within retention.
    restarted = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path)))
    restarted.start()
    assert restarted.find("sess_stale") is None and not stale.exists()
    assert not (tmp_path / "not an id.wav").exists()
    fresh = restarted.find("sess_fresh")
    assert fresh is not None and contents(fresh) == b"RIFF fresh"
    # ... until its own time is up, counted from when it was kept.
    os.utime(fresh, (time.time() - 59.7, time.time() - 59.7))
    soon = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path)))
    soon.start()
    assert soon.find("sess_fresh") is not None
    await asyncio.sleep(0.6)
    assert soon.find("sess_fresh") is None and not contents(tmp_path)
    # Stopped on purpose, a server leaves none behind.
    await soon.keep("sess_last", b"RIFF")
    soon.close()
    assert not contents(tmp_path)


async def test_recordings_over_the_disk_cap_are_refused_and_say_so(tmp_path: Path) -> None:
    store = RecordingStore(RecordingSettings(retention_s=0.4, dir=str(tmp_path),
                                             max_bytes=1024**2))  # fmt: skip
    store.start()
    await store.keep("sess_a", bytes(700_000))
    await store.keep("sess_b", bytes(700_000))
    assert store.find("sess_a") is not None
    assert store.find("sess_b") is None and "recordings.max_bytes" in (
        store.refusal("sess_b") or ""
    )
    assert contents(tmp_path) == [tmp_path / "sess_a.wav"], "nothing of it was written"
    await asyncio.sleep(0.6)  # the first goes: room again
    await store.keep("sess_c", bytes(700_000))
    assert store.find("sess_c") is not None


async def test_a_recording_is_never_named_outside_its_folder(tmp_path: Path) -> None:
    store = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path / "kept")))
    store.start()
    for bad in ("../escaped", "/etc/passwd", "a/b", "", "x" * 100):
        with pytest.raises(ValueError, match="session id"):
            await store.keep(bad, b"RIFF")
        assert store.find(bad) is None
    assert not contents(tmp_path / "kept")
    store.close()
