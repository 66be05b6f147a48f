"""What both OpenAI dialects' client events share: the refusal, the base of every
event (unknown fields ignored), and the client's own id for an event."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class BadEvent(ValueError):
    """A client event that was refused; the session goes on."""

    def __init__(self, message: str, code: str = "invalid_value", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


class ClientEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    event_id: str | None = None


def event_id_of(event: dict[str, Any]) -> str | None:
    """The client's own id for its event, to name it in an answer."""
    event_id = event.get("event_id")
    return event_id if isinstance(event_id, str) else None
