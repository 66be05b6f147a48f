"""Realtime client events the tests send often."""

from __future__ import annotations

from typing import Any


def user_text(text: str) -> dict[str, Any]:
    """A typed user message, as conversation.item.create's `item`."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def create_user_text(text: str) -> dict[str, Any]:
    return {"type": "conversation.item.create", "item": user_text(text)}
