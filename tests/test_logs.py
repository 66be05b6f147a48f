"""What clients send cannot forge log lines or flood the log."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from app.logs import MAX_MESSAGE_CHARS, configure_logging


@pytest.fixture
def written() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    configure_logging("info")
    out = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)
    try:
        yield out
    finally:
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
