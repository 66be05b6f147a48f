"""Logging setup: one line per record, with the session id when a record carries one.

Log messages carry what clients sent (a stream's id, a SIP Call-ID, an event's type): a
line break in one would forge a line of its own, and a megabyte of one would be a
megabyte of log. So every message is written with its control characters escaped and
clipped to MAX_MESSAGE_CHARS; tracebacks keep their lines.
"""

from __future__ import annotations

import logging

MAX_MESSAGE_CHARS = 4000
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


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_SessionFilter())
    handler.setFormatter(
        _OneLineFormatter("%(asctime)s %(levelname)-7s %(name)s%(session)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aioice/aiortc log every candidate pair, faster-whisper every transcription.
    for noisy in ("aioice", "aiortc", "faster_whisper"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
