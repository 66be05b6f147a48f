"""A call's recording: both sides on the caller's clock, the agent's audio where it
started playing, cut where an interruption stopped it; kept for its retention only."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import threading
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


class Frames:
    """A FrameSink in memory."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.writes = 0

    def write(self, frames: bytes) -> None:
        self.data += frames
        self.writes += 1

    async def caught_up(self) -> None:
        return None

    def split(self) -> tuple[np.ndarray, np.ndarray]:
        frames = np.frombuffer(bytes(self.data), dtype=np.int16)
        return frames[0::2], frames[1::2]


def test_the_agent_is_placed_where_the_caller_was_and_cut_where_it_stopped() -> None:
    frames = Frames()
    recording = Recording(max_s=60, sink=frames)
    recording.heard(tone(1.0, 16_000))
    recording.played(tone(2.0, 24_000), 24_000)  # starts playing 1 s in
    recording.heard(bytes(16_000))  # half a second more of the caller: then the cut
    recording.cut()
    recording.finish()
    caller, agent = frames.split()
    assert len(caller) == 24_000
    assert not agent[:16_000].any(), "nothing of the agent before it started"
    assert np.abs(agent[16_200:23_800]).mean() > 3000, "its voice from then on"
    assert len(agent) == len(caller), "what was queued after the cut was not heard"


def test_a_recording_holds_at_most_its_length() -> None:
    frames = Frames()
    recording = Recording(max_s=1, sink=frames)
    recording.heard(tone(3.0, 16_000))
    recording.played(tone(1.0, 16_000), 16_000)
    recording.finish()
    caller, agent = frames.split()
    assert len(caller) == 16_000 and not agent.any()


def test_a_recording_goes_out_as_the_call_goes_holding_only_what_is_not_settled() -> None:
    """The caller's clock settles everything before it: written a couple of seconds at a
    time; the agent's audio ahead of it waits, and is cut or written later."""
    frames = Frames()
    recording = Recording(max_s=600, sink=frames)
    caller = tone(1.0, 16_000)
    for _ in range(60):
        recording.heard(caller)
    assert len(frames.data) == 60 * 16_000 * 4 and frames.writes == 30
    recording.played(tone(3.0, 16_000), 16_000)  # 3 s ahead of the caller
    recording.heard(caller)
    recording.heard(caller)  # 2 s on: those are written, the third waits
    assert len(frames.data) == 62 * 16_000 * 4
    recording.cut()  # the third second was not played after all
    recording.finish()
    left, right = frames.split()
    assert len(left) == len(right) == 62 * 16_000, "nothing of the cut was kept"
    assert np.abs(right[60 * 16_000 + 200 :]).mean() > 3000 and not right[: 60 * 16_000].any()


async def record(store: RecordingStore, session_id: str, pcm: bytes = b"") -> Recording:
    """A call recorded from start to end: the caller said `pcm`."""
    recording = store.open(session_id)
    recording.heard(pcm)
    await store.keep(session_id, recording)
    return recording


def wav_of(caller: bytes) -> bytes:
    """The WAV a call of only the caller's `caller` makes, as the wave module writes it."""
    stereo = np.zeros((len(caller) // 2, 2), dtype=np.int16)
    stereo[:, 0] = np.frombuffer(caller, dtype=np.int16)
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(2)
        writer.setsampwidth(2)
        writer.setframerate(16_000)
        writer.writeframes(stereo.tobytes())
    return out.getvalue()


async def test_a_recording_is_streamed_to_a_private_file_and_kept_whole(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "kept"
    folder.mkdir(mode=0o755)
    store = RecordingStore(RecordingSettings(retention_s=60, dir=str(folder)))
    store.start()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700, "only this user may look in"
    recording = store.open("sess_long")
    caller = tone(10.0, 16_000)
    for offset in range(0, len(caller), 640):  # 20 ms at a time, as a call sends it
        recording.heard(caller[offset : offset + 640])
    part = folder / "sess_long.wav.part"
    for _ in range(50):  # on disk as the call goes, and not served until it ends
        if part.exists() and part.stat().st_size >= 8 * 16_000 * 4:
            break
        await asyncio.sleep(0.02)
    assert part.stat().st_size >= 8 * 16_000 * 4 and store.find("sess_long") is None
    assert stat.S_IMODE(part.stat().st_mode) == 0o600, "only this user may read it"
    await store.keep("sess_long", recording)
    path = store.find("sess_long")
    assert path is not None and not part.exists()
    assert contents(path) == wav_of(caller), "the same WAV as one built whole"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    await record(store, "sess_silent")
    assert contents(folder / "sess_silent.wav") == wav_of(b""), "no audio: a WAV of none"
    store.close()


async def test_audio_sent_faster_than_the_disk_writes_waits_for_it(tmp_path: Path) -> None:
    """Where the writer falls behind (a busy machine: the probe's four 6-minute floods
    once dropped every recording at 16 MiB behind), the client's append waits at
    caught_up() for the disk, and nothing is dropped."""
    from concurrent.futures import ThreadPoolExecutor

    from app.calls import wav_file
    from app.calls.wav_file import WavFile

    gate = threading.Event()
    writer = ThreadPoolExecutor(1)
    writer.submit(gate.wait)  # the disk is stuck until the gate opens
    file = WavFile(tmp_path / "sess_slow.wav", writer, lambda size: None)
    recording = Recording(600, file)
    minute = tone(60.0, 16_000)  # 3.84 MB of frames: past CATCH_UP
    recording.heard(minute)
    waiting = asyncio.create_task(recording.caught_up())
    await asyncio.sleep(0.2)
    assert not waiting.done(), "it waits while the writer is stuck"
    gate.set()
    await asyncio.wait_for(waiting, 10)
    assert file.size - file._on_disk <= wav_file.CATCH_UP
    recording.heard(minute)  # a second minute after the wait: far under MAX_BEHIND
    recording.finish()
    assert await file.finish() is not None and file.dropped is None
    with wave.open(str(tmp_path / "sess_slow.wav")) as reader:
        assert reader.getnframes() >= 120 * 16_000, "every second kept"
    writer.shutdown()


def test_a_recordings_folder_must_be_this_users_own(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="recordings.dir"):
        RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path / "link")))


async def test_a_kept_recording_goes_when_its_retention_runs_out(tmp_path: Path) -> None:
    old = tmp_path / "sess_old.wav"
    old.write_bytes(b"left by an earlier process")
    os.utime(old, (time.time() - 10, time.time() - 10))
    store = RecordingStore(RecordingSettings(retention_s=0.3, dir=str(tmp_path)))
    store.start()
    assert not contents(tmp_path), "what an earlier process kept past its retention is gone"
    await record(store, "sess_a", tone(0.5, 16_000))
    path = store.find("sess_a")
    assert path is not None and contents(path) == wav_of(tone(0.5, 16_000))
    await asyncio.sleep(0.5)
    assert store.find("sess_a") is None and not contents(tmp_path)
    off = RecordingStore(RecordingSettings(retention_s=0, dir=str(tmp_path / "off")))
    assert not off.on and not (tmp_path / "off").exists(), "a server that keeps none"
    store.close()


def contents(path: Path) -> bytes | list[Path]:
    """A file's bytes, or a folder's files."""
    return sorted(path.iterdir()) if path.is_dir() else path.read_bytes()


async def test_retention_holds_across_a_crash_and_a_restart(tmp_path: Path) -> None:
    settings = RecordingSettings(retention_s=60, dir=str(tmp_path))
    crashed = RecordingStore(settings)
    crashed.start()
    await record(crashed, "sess_fresh", tone(0.2, 16_000))
    await record(crashed, "sess_stale", tone(0.3, 16_000))
    mid_call = crashed.open("sess_mid_call")
    mid_call.heard(tone(3.0, 16_000))
    for _ in range(50):  # being written when the process died
        if (tmp_path / "sess_mid_call.wav.part").exists():
            break
        await asyncio.sleep(0.02)
    stale = tmp_path / "sess_stale.wav"
    os.utime(stale, (time.time() - 61, time.time() - 61))
    (tmp_path / "not an id.wav").write_bytes(b"RIFF")
    # No close(): the process died. The next one serves what is still within retention.
    restarted = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path)))
    restarted.start()
    assert restarted.find("sess_stale") is None and not stale.exists()
    assert not (tmp_path / "not an id.wav").exists()
    assert not (tmp_path / "sess_mid_call.wav.part").exists(), "half a file is not kept"
    fresh = restarted.find("sess_fresh")
    assert fresh is not None and contents(fresh) == wav_of(tone(0.2, 16_000))
    # ... until its own time is up, counted from when it was kept.
    os.utime(fresh, (time.time() - 59.7, time.time() - 59.7))
    soon = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path)))
    soon.start()
    assert soon.find("sess_fresh") is not None
    await asyncio.sleep(0.6)
    assert soon.find("sess_fresh") is None and not contents(tmp_path)
    # Stopped on purpose, a server leaves none behind, nor what it was writing.
    await record(soon, "sess_last")
    soon.open("sess_unended").heard(tone(3.0, 16_000))
    soon.close()
    assert not contents(tmp_path)
    crashed.close()
    restarted.close()


async def test_recordings_over_the_disk_cap_are_refused_and_say_so(tmp_path: Path) -> None:
    """Those being written count as well as those kept: the cap is on the disk."""
    store = RecordingStore(RecordingSettings(retention_s=0.4, dir=str(tmp_path),
                                             max_bytes=1024**2))  # fmt: skip
    store.start()
    seven_tenths = bytes(350_000)  # 700 KB in stereo
    await record(store, "sess_a", seven_tenths)
    await record(store, "sess_b", seven_tenths)
    assert store.find("sess_a") is not None
    assert store.find("sess_b") is None and "recordings.max_bytes" in (
        store.refusal("sess_b") or ""
    )
    assert contents(tmp_path) == [tmp_path / "sess_a.wav"], "nothing of it is left"
    await asyncio.sleep(0.6)  # the first goes: room again, for one of two at once
    c, d = store.open("sess_c"), store.open("sess_d")
    c.heard(seven_tenths)
    d.heard(seven_tenths)
    await store.keep("sess_c", c)
    await store.keep("sess_d", d)
    assert store.find("sess_c") is not None and store.find("sess_d") is None
    assert "being written" in (store.refusal("sess_d") or "")
    store.close()


async def test_a_recording_is_never_named_outside_its_folder(tmp_path: Path) -> None:
    store = RecordingStore(RecordingSettings(retention_s=60, dir=str(tmp_path / "kept")))
    store.start()
    for bad in ("../escaped", "/etc/passwd", "a/b", "", "x" * 100):
        with pytest.raises(ValueError, match="session id"):
            store.open(bad)
        assert store.find(bad) is None
    assert not contents(tmp_path / "kept")
    store.close()
