"""Logging setup: one line per record, with the session id when a record carries one.

Log messages carry what clients sent (a stream's id, a SIP Call-ID, an event's type): a
line break in one would forge a line of its own, and a megabyte of one would be a
megabyte of log. So every message is written with its control characters escaped and
clipped to MAX_MESSAGE_CHARS; tracebacks keep their lines.

Lines are written by a thread of their own: a log write can block (stdout a pipe that a
collector drains slowly, a file on a busy disk), and on the event loop it would hold up
every call. What waits to be written is bounded; past it lines are dropped and counted.
"""

from __future__ import annotations

import collections
import logging
import sys
import threading
from typing import TextIO

MAX_MESSAGE_CHARS = 4000
MAX_WAITING_LINES = 10_000
FLUSH_S = 5.0  # the longest flush() waits (at exit) for a stalled output
# C0 and C1 controls, DEL, and Unicode's own line and paragraph separators.
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` as one clipped line: control characters escaped."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return text.translate(_ESCAPES)


class _SessionFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        session_id = getattr(record, "session_id", None)
        record.session = f" [{one_line(str(session_id), 80)}]" if session_id else ""
        return True


class _OneLineFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = one_line(record.message)
        return super().formatMessage(record)


class LineWriter(logging.Handler):
    """Formats a record where it is logged; writes it to `stream` from its own thread."""

    def __init__(self, stream: TextIO, capacity: int = MAX_WAITING_LINES) -> None:
        super().__init__()
        self.stream = stream
        self._capacity = capacity
        self._lines: collections.deque[str] = collections.deque()
        self._changed = threading.Condition()
        self._writing = False  # lines taken from the deque, not yet written
        self._dropped = 0
        self._closed = False
        threading.Thread(target=self._write_forever, name="log-writer", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._changed:
            if len(self._lines) >= self._capacity:
                self._dropped += 1
                return
            if self._dropped:
                self._lines.append(f"({self._dropped} log lines dropped: written slower than made)")
                self._dropped = 0
            self._lines.append(line)
            self._changed.notify_all()

    def flush(self) -> None:
        """Wait (FLUSH_S at most) until every line logged so far is written."""
        with self._changed:
            self._changed.wait_for(lambda: not self._lines and not self._writing, FLUSH_S)

    def close(self) -> None:
        """The thread ends once what was logged is written."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        super().close()

    def _write_forever(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._lines) or self._closed)
                if not self._lines:
                    return
                lines, self._writing = list(self._lines), True
                self._lines.clear()
            try:
                self.stream.write("".join(f"{line}\n" for line in lines))
                self.stream.flush()
            except (OSError, ValueError):
                pass  # stdout closed or gone: nowhere left to tell it
            finally:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()


def flush_logs() -> None:
    """Wait until every line logged so far is written (FLUSH_S at most)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Records to `stream` (stderr), one line each, through a LineWriter."""
    handler = LineWriter(stream or sys.stderr)
    handler.addFilter(_SessionFilter())
    handler.setFormatter(
        _OneLineFormatter("%(asctime)s %(levelname)-7s %(name)s%(session)s: %(message)s")
    )
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, LineWriter):
            old.close()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aioice/aiortc log every candidate pair, faster-whisper every transcription.
    for noisy in ("aioice", "aiortc", "faster_whisper"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
