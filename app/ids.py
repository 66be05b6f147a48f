"""Identifiers for sessions, items and responses: a prefix that says what, then random hex."""

from __future__ import annotations

import uuid


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"
