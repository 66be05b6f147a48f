"""Logging setup: one line per record, with the session id when a record carries one."""

from __future__ import annotations

import logging


class _SessionFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        session_id = getattr(record, "session_id", None)
        record.session = f" [{session_id}]" if session_id else ""
        return True


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler()
    handler.addFilter(_SessionFilter())
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)-7s %(name)s%(session)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aioice/aiortc log every candidate pair, faster-whisper every transcription.
    for noisy in ("aioice", "aiortc", "faster_whisper"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
