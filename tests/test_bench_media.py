"""bench.media's split of py-spy samples: waiting threads are not cost, and C time counts
towards the Python code that called it. bench.latency's waits at a reply's joins."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.latency import waits_at_joins
from bench.media import category, split

WAITING = [
    "decoder_worker (aiortc/rtcrtpreceiver.py:76)", "get (queue.py:171)",
    "_queue_SimpleQueue_get_impl (_queuemodule.c:253)",
    "PyThread_acquire_lock_timed (libpython3.11.so.1.0)", "0x7f9eb64aed90 (libc.so.6)",
]  # fmt: skip
OPUS_IN_C = [
    "PacedAudioTrack.recv (app/rtc/outbound.py:190)", "OpusPacketizer._encode (app/rtc/opus.py:76)",
    "0x7f9eb47c47be (libopus-114e2b1a.so.0.11)",
]  # fmt: skip
SENDING = ["Runner.run (asyncio/runners.py:118)", "sendmsg (libc.so.6)"]
RESAMPLING = ["RtpStream.datagram_received (app/telephony/sip/rtp.py:151)",
              "Resampler.frame (app/audio/resample.py:21)"]  # fmt: skip


def test_each_sample_is_idle_or_counted_where_its_python_caller_is() -> None:
    assert category(WAITING) is None
    assert category(OPUS_IN_C) is not None and category(OPUS_IN_C).startswith("Opus")
    assert category(SENDING) is not None and category(SENDING).startswith("UDP")
    assert category(RESAMPLING) is not None and category(RESAMPLING).startswith("ours")


def test_shares_are_of_busy_samples_only(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        f"{';'.join(WAITING)} 900\n{';'.join(OPUS_IN_C)} 30\n{';'.join(RESAMPLING)} 10\n"
    )
    shares = dict(split(raw))
    assert shares == {
        "Opus decode and encode (PyAV, libopus)": 75.0,
        "ours: resample, VAD, pacing, session": 25.0,
    }


def test_a_join_counts_only_the_silence_its_text_does_not_call_for() -> None:
    """bench.latency's waits: after "Sure," (a clause's 120 ms, and the 90 ms of edges) a
    silence of 0.5 s is a 0.29 s wait; inside a phrase the same silence is all wait."""
    voiced = [i * 0.02 for i in range(50)] + [1.5 + i * 0.02 for i in range(50)]
    # The second piece's delta arrives 45 ms before its voice is heard (lag_s).
    waits = waits_at_joins(voiced, [(0.0, "Sure,"), (1.455, " I can.")], lag_s=0.045)
    assert waits == pytest.approx([0.5 - 0.12 - 0.09])
    inside = waits_at_joins(voiced, [(0.0, "The capital of"), (1.455, " France")], lag_s=0.045)
    assert inside == pytest.approx([0.5 - 0.09])
    in_time = [i * 0.02 for i in range(100)]  # no silence at the join
    assert waits_at_joins(in_time, [(0.0, "Sure,"), (0.955, " I can.")], lag_s=0.045) == [0.0]
