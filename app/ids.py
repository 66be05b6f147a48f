"""Identifiers for sessions, items and responses: a prefix that says what, then random hex."""

from __future__ import annotations

import uuid

# Of an id a client sent, what an error quotes back: enough to tell it by, and never the
# whole of a 5,000-character one.
SHOWN_CHARS = 64


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def shown(id_: str) -> str:
    """An id a client sent, as an error message quotes it: its first SHOWN_CHARS."""
    return repr(id_[:SHOWN_CHARS]) + ("…" if len(id_) > SHOWN_CHARS else "")
