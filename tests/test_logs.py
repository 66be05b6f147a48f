"""What clients send cannot forge log lines or flood the log, and a log that cannot be
written does not hold up the server."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from app.logs import MAX_MESSAGE_CHARS, LineWriter, configure_logging


class Written(io.StringIO):
    def getvalue(self) -> str:
        """What was logged so far, once the writer's thread has written it."""
        logging.getLogger().handlers[0].flush()
        return super().getvalue()


@pytest.fixture
def written() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    out = Written()
    configure_logging("info", stream=out)
    try:
        yield out
    finally:
        root.handlers[0].close()
        root.handlers[:] = saved
        root.setLevel(level)


def test_a_line_break_from_a_client_cannot_forge_a_line(written: io.StringIO) -> None:
    forged = "MZ1\n2026-12-01 00:00:00,000 ERROR app.calls [sess_admin]: FORGED LINE"
    session = "sess_1\r\nX"
    logging.getLogger("app.test").info("media stream %s started", forged,
                                       extra={"session_id": session})  # fmt: skip
    lines = written.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "MZ1\\n2026-12-01" in lines[0] and "[sess_1\\r\\nX]" in lines[0]


def test_a_huge_string_is_clipped(written: io.StringIO) -> None:
    logging.getLogger("app.test").warning("stream id %s", "x" * 5_000_000)
    line = written.getvalue()
    assert len(line) < MAX_MESSAGE_CHARS + 200
    assert "(5000010 characters)" in line


def test_tracebacks_keep_their_lines(written: io.StringIO) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("app.test").exception("failed on %s", "a\nb")
    lines = written.getvalue().splitlines()
    assert "failed on a\\nb" in lines[0]
    assert lines[1] == "Traceback (most recent call last):" and lines[-1] == "ValueError: boom"


class Stuck(io.StringIO):
    """An output that takes nothing until let go: stdout piped to a collector that stopped
    reading, or a file on a disk that stalls."""

    def __init__(self) -> None:
        super().__init__()
        self.stuck = threading.Event()
        self.go = threading.Event()

    def write(self, text: str) -> int:
        self.stuck.set()
        self.go.wait()
        return super().write(text)


def test_a_stuck_output_holds_up_no_caller_and_what_overflows_is_counted() -> None:
    out = Stuck()
    writer = LineWriter(out, capacity=5)
    log = logging.getLogger("app.test.stuck")
    log.addHandler(writer)
    log.propagate = False
    try:
        log.warning("line 0")
        assert out.stuck.wait(timeout=30)  # the writer's thread holds it
        caller = threading.Thread(target=lambda: [log.warning("line %d", n) for n in range(1, 20)])
        caller.start()
        caller.join(timeout=30)
        assert not caller.is_alive(), "logging waited for the output"
        out.go.set()
        writer.flush()
        lines = out.getvalue().splitlines()
        # Five wait behind it; the rest are counted.
        assert lines[:6] == [f"line {n}" for n in range(6)], lines
        log.warning("after")
        writer.flush()
        assert out.getvalue().splitlines()[6:] == [
            "(14 log lines dropped: written slower than made)",
            "after",
        ]
    finally:
        out.go.set()
        log.removeHandler(writer)
        writer.close()
