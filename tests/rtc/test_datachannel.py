"""The events channel's bounds, on a stand-in for aiortc's channel (its buffered amount is
what a peer that stops acknowledging leaves behind; the real peer is in test_event_limits)."""

from __future__ import annotations

import pytest

from app.errors import MessageTooLarge
from app.rtc.datachannel import EVENTS_LABEL, HIGH_WATER_BYTES, STALLED_BYTES, PeerEvents


class StandIn:
    label = EVENTS_LABEL
    readyState = "open"  # noqa: N815 (aiortc's name)

    def __init__(self, buffered: int = 0, max_message: int = 262_144) -> None:
        self.bufferedAmount = buffered  # noqa: N815
        self.max_message = max_message
        self.sent: list[str] = []

    def on(self, *_: object) -> None:
        pass

    def send(self, text: str) -> None:
        if len(text) > self.max_message:
            raise ValueError(f"only supports messages up to {self.max_message} bytes")
        self.sent.append(text)
        self.bufferedAmount += len(text)


def channel_on(stand_in: StandIn) -> tuple[PeerEvents, list[str]]:
    stalled: list[str] = []
    channel = PeerEvents("sess_t", on_stalled=lambda: stalled.append("stalled"))
    channel.attach(stand_in)  # type: ignore[arg-type]
    return channel, stalled


def test_a_peer_that_stops_reading_loses_deltas_first_then_its_call() -> None:
    stand_in = StandIn(buffered=HIGH_WATER_BYTES + 1)
    channel, stalled = channel_on(stand_in)
    channel.send_text("delta", droppable=True)
    channel.send_text("done")
    assert stand_in.sent == ["done"] and channel.dropped == 1 and stalled == []

    stand_in.bufferedAmount = STALLED_BYTES + 1
    channel.send_text("done again")
    assert stand_in.sent == ["done"] and stalled == ["stalled"]


def test_an_event_over_the_peers_message_size_is_refused_by_name() -> None:
    channel, stalled = channel_on(StandIn(max_message=100))
    with pytest.raises(MessageTooLarge, match="up to 100 bytes"):
        channel.send_text("x" * 101)
    assert stalled == []


def test_a_failing_handler_does_not_escape_into_aiortc(caplog: pytest.LogCaptureFixture) -> None:
    channel, _ = channel_on(StandIn())
    handled: list[str | bytes] = []

    def broken(data: str | bytes) -> None:
        handled.append(data)
        raise RuntimeError("a bug")

    channel.on_message = broken
    channel._received("{}")  # raised into aiortc's DTLS loop before, ending the call
    channel._received("[]")
    assert handled == ["{}", "[]"]
    assert caplog.text.count("event handling failed") == 2 and "a bug" in caplog.text
