"""A media stream's messages at the dialect, on a session with engine doubles: what a
hostile or broken carrier sends is refused with a reason, and nothing of it is kept."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from app.telephony.mediastream.playout import MarkedPlayout
from app.telephony.mediastream.twilio import MAX_MESSAGE_BYTES, BadStreamMessage, TwilioDialect
from tests.session.fakes import make_session

ULAW = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


async def _sink(payload: bytes) -> None:
    pass


@pytest.fixture
async def dialect() -> AsyncIterator[TwilioDialect]:
    session, _, _, _ = make_session()
    transport: Any = SimpleNamespace(session_id=session.id, ended=asyncio.Event())
    dialect = TwilioDialect(transport)
    dialect.attach(session, MarkedPlayout(session.id, 8000, _sink, lambda name: None))
    yield dialect
    await session.close()


def start(sid: object) -> str:
    return json.dumps({"event": "start", "streamSid": sid,
                       "start": {"streamSid": sid, "mediaFormat": ULAW}})  # fmt: skip


def test_a_message_over_the_bound_is_refused_before_it_is_parsed(dialect: TwilioDialect) -> None:
    dialect.parse(start("MZ1"))
    payload = base64.b64encode(bytes(MAX_MESSAGE_BYTES)).decode()
    huge = json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": payload}})
    with pytest.raises(BadStreamMessage, match=f"at most {MAX_MESSAGE_BYTES}"):
        dialect.parse(huge)
    assert dialect.last_media_at is None, "none of it reached the session"


@pytest.mark.parametrize(
    ("sid", "why"),
    [("MZ" + "1" * 1000, "a stream id of 1002 characters"), ({"a": 1}, "not text")],
)
def test_a_stream_id_must_be_a_short_text(dialect: TwilioDialect, sid: object, why: str) -> None:
    """It is kept, logged, and sent back on every message we send."""
    with pytest.raises(BadStreamMessage, match=why):
        dialect.parse(start(sid))
    assert dialect.stream_sid == ""


def test_a_telnyx_rate_out_of_range_is_a_bad_message_not_a_crash(dialect: TwilioDialect) -> None:
    fmt = '{"encoding": "PCMU", "sample_rate": 1e400, "channels": 1}'  # inf, once parsed
    data = '{"event": "start", "stream_id": "S1", "start": {"media_format": ' + fmt + "}}"
    with pytest.raises(BadStreamMessage, match="OverflowError"):
        dialect.parse(data)


def test_the_callers_audio_is_what_keeps_a_stream_alive(dialect: TwilioDialect) -> None:
    dialect.parse(start("MZ1"))
    assert dialect.last_media_at is None, "start and nothing else: silence on the wire"
    payload = base64.b64encode(bytes(160)).decode()
    dialect.parse(json.dumps({"event": "media", "streamSid": "MZ1",
                              "media": {"track": "inbound", "payload": payload}}))  # fmt: skip
    assert dialect.last_media_at is not None
