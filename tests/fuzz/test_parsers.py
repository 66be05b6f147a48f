"""Hostile bytes at every parser an outsider reaches: each refuses with its one
documented error, never anything else (which would be a 500, a dropped call, or a
SIP server that stops answering)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import SignallingError
from app.rtc.candidates import keep_usable
from app.rtc.sdp import audio_rate_for_offer
from app.rtc.trickle import IceFragment, parse_fragment
from app.telephony.mediastream.playout import MarkedPlayout
from app.telephony.mediastream.twilio import BadStreamMessage, TwilioDialect
from app.telephony.sip import message as sip
from app.telephony.sip.sdp import AudioOffer, BadSdp, NotAcceptable, read_offer
from tests.fuzz.strategies import json_values
from tests.session.fakes import make_session

OFFER = (
    "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 111 0\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\n"
    "a=rtpmap:111 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\na=sendrecv\r\na=rtcp-mux\r\n"
    "a=ice-ufrag:abcd\r\na=ice-pwd:0123456789abcdef0123456789\r\n"
    "a=fingerprint:sha-256 " + ":".join(["AB"] * 32) + "\r\na=setup:actpass\r\n"
    "a=candidate:1 1 udp 2122260223 127.0.0.1 50000 typ host\r\n"
)
INVITE = (
    "INVITE sip:agent@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK1\r\n"
    "From: <sip:a@b>;tag=1\r\nTo: <sip:agent@127.0.0.1>\r\nCall-ID: x@y\r\nCSeq: 1 INVITE\r\n"
    "Contact: <sip:a@127.0.0.1:5070>\r\nContent-Type: application/sdp\r\n"
    "Content-Length: 0\r\n\r\n"
)
SIP_SDP = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\n"  # noqa: E501


def mutations(text: str) -> st.SearchStrategy[str]:
    """`text` with lines dropped, repeated, swapped, or cut and spliced with junk."""
    lines = text.split("\r\n")
    junk = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    return st.lists(
        st.one_of(st.sampled_from(lines), junk, junk.map(lambda j: f"a={j}"),
                  st.sampled_from(lines).map(lambda line: line[: len(line) // 2])),
        max_size=len(lines) + 5,
    ).map("\r\n".join)  # fmt: skip


FUZZ = settings(max_examples=300, deadline=None)
REFUSED = object()


def refused_or(parse: Callable[[Any], Any], data: Any, errors: type | tuple[type, ...]) -> Any:
    """What `parse` made of `data`, or REFUSED if it raised one of `errors` (and any other
    exception fails the test)."""
    try:
        return parse(data)
    except errors:
        return REFUSED


@FUZZ
@given(st.one_of(mutations(OFFER), st.text(max_size=300)))
def test_webrtc_offers_refuse_with_a_signalling_error(sdp: str) -> None:
    assert keep_usable(sdp).count("a=candidate") <= sdp.count("a=candidate")
    assert refused_or(audio_rate_for_offer, sdp, SignallingError) in (48_000, 8_000, REFUSED)


@FUZZ
@given(st.one_of(mutations("a=ice-ufrag:x\r\na=ice-pwd:y\r\nm=audio 9 UDP 0\r\na=mid:0\r\n"
                           "a=candidate:1 1 udp 1 10.0.0.1 5000 typ host\r\na=end-of-candidates"),
                 st.text(max_size=200)))  # fmt: skip
def test_trickled_fragments_refuse_with_a_signalling_error(text: str) -> None:
    fragment = refused_or(parse_fragment, text, SignallingError)
    assert fragment is REFUSED or isinstance(fragment, IceFragment)


@FUZZ
@given(st.one_of(mutations(INVITE).map(str.encode), st.binary(max_size=300)))
def test_sip_messages_refuse_with_a_parse_error(data: bytes) -> None:
    message = refused_or(sip.parse, data, sip.SipParseError)
    assert message is REFUSED or isinstance(message, sip.SipMessage)


@FUZZ
@given(st.one_of(mutations(SIP_SDP), st.text(max_size=300)))
def test_sip_offers_refuse_with_bad_sdp_or_not_acceptable(sdp: str) -> None:
    offer = refused_or(read_offer, sdp, (BadSdp, NotAcceptable))
    assert offer is REFUSED or isinstance(offer, AudioOffer)


STREAM_EVENTS = st.builds(
    lambda kind, fields: {"event": kind, **fields},
    st.one_of(st.sampled_from(["connected", "start", "media", "mark", "dtmf", "stop",
                               "error"]), st.text(max_size=10)),
    st.dictionaries(st.sampled_from(["start", "media", "mark", "dtmf", "streamSid",
                                     "stream_id", "payload"]), json_values, max_size=4),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(STREAM_EVENTS.map(json.dumps), st.text(max_size=100)), max_size=8))
async def test_media_stream_messages_refuse_with_a_bad_stream_message(
    messages: list[str],
) -> None:
    session, _, _, _ = make_session()
    transport: Any = SimpleNamespace(session_id=session.id, ended=asyncio.Event())
    dialect = TwilioDialect(transport)
    dialect.attach(session, MarkedPlayout(session.id, 8000, _sink, lambda name: None))
    try:
        for data in messages:
            assert refused_or(dialect.parse, data, BadStreamMessage) in (None, REFUSED)
        assert isinstance(dialect.stream_sid, str)
    finally:
        await session.close()


async def _sink(payload: bytes) -> None:
    pass
