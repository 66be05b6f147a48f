"""SIP's pieces on their own: messages, SDP offers and answers, RTP and RFC 4733 keys,
digest authentication, and their bounds against hostile input. The INVITE is the one
baresip sends (Debian 12's 1.0.0)."""

from __future__ import annotations

import hashlib
import time

import pytest

from app.telephony.sip import auth as auth_module
from app.telephony.sip import message as sip
from app.telephony.sip.auth import DigestAuth, SourceFilter, digest_fields
from app.telephony.sip.rtp import KeyEvents, RtpPacket, build, parse
from app.telephony.sip.sdp import BadSdp, NotAcceptable, answer, read_offer

OFFER = (
    "v=0\r\no=- 1655487522 619540855 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\n"
    "t=0 0\r\na=tool:baresip 1.0.0\r\nm=audio 30156 RTP/AVP 0 8 101\r\n"
    "a=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\n"
    "a=fmtp:101 0-15\r\na=sendrecv\r\na=ptime:20\r\n"
)
INVITE = (
    "INVITE sip:agent@127.0.0.1:5070 SIP/2.0\r\n"
    "Via: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK3e60aa1416978bdd;rport\r\n"
    "Contact: <sip:alice-0x55c9701b93a0@127.0.0.1:5080>\r\nMax-Forwards: 70\r\n"
    "To: <sip:agent@127.0.0.1:5070>\r\nFrom: <sip:alice@127.0.0.1:5080>;tag=d5e39cb790f40eeb\r\n"
    "Call-ID: 8cbd0faa0b4195dd\r\nCSeq: 28483 INVITE\r\nContent-Type: application/sdp\r\n"
    f"Content-Length: {len(OFFER)}\r\n\r\n{OFFER}"
).encode()


def test_an_invite_is_read_and_answered_with_its_dialog_headers() -> None:
    invite = sip.parse(INVITE)
    assert (invite.method, invite.uri, invite.call_id) == (
        "INVITE", "sip:agent@127.0.0.1:5070", "8cbd0faa0b4195dd",
    )  # fmt: skip
    assert invite.cseq == (28483, "INVITE") and invite.branch == "z9hG4bK3e60aa1416978bdd"
    assert invite.from_tag == "d5e39cb790f40eeb" and invite.to_tag == ""
    assert invite.body.decode() == OFFER
    reply = sip.parse(sip.response(invite, 180, "Ringing", to_tag="abc", source=("10.0.0.9", 5099)))
    assert (reply.status, reply.reason, reply.to_tag) == (180, "Ringing", "abc")
    assert reply.get("Via") == (
        "SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK3e60aa1416978bdd;rport=5099;received=10.0.0.9"
    )
    assert reply.get("CSeq") == "28483 INVITE" and reply.get("Content-Length") == "0"


def test_compact_headers_and_folded_lines_are_read() -> None:
    text = INVITE.decode().replace("Call-ID:", "i:").replace("Via:", "v:")
    text = text.replace("Max-Forwards: 70", "Max-Forwards:\r\n 70")
    message = sip.parse(text.encode())
    assert message.call_id == "8cbd0faa0b4195dd" and message.get("Max-Forwards") == "70"


def test_folded_lines_are_unfolded_in_one_pass_and_counted_first() -> None:
    """Unfolding added to the line for each continuation, copying it again each time: a
    64 KiB datagram of folded lines took 52 ms, and 40 a second stalled the server."""
    many = INVITE.decode().replace("Max-Forwards: 70", "X-Long: a" + "\r\n b" * 150)
    assert sip.parse(many.encode()).get("X-Long") == "a" + " b" * 150
    flood = ("INVITE sip:a@b SIP/2.0\r\nX: \U0001f600" + "\n " * 32_700 + "\r\n\r\n").encode()
    took = []
    for _ in range(3):
        started = time.perf_counter()
        with pytest.raises(sip.SipParseError, match="more than 200 header lines"):
            sip.parse(flood)
        took.append(time.perf_counter() - started)
    assert min(took) < 0.01, f"{min(took) * 1000:.1f} ms"


@pytest.mark.parametrize(
    ("data", "problem", "answerable"),
    [
        (b"HELLO\r\n\r\n", "not a SIP request or status line", False),
        (b"\xff\xfe", "not UTF-8", False),
        (INVITE.replace(b"CSeq: 28483 INVITE", b"CSeq: abc INVITE"), "CSeq", True),
        (INVITE.replace(b"CSeq: 28483 INVITE", b"CSeq: 1 BYE"), "CSeq", True),
        (INVITE.replace(b"Call-ID: 8cbd0faa0b4195dd\r\n", b""), "missing Call-ID", False),
        (INVITE.replace(b"Max-Forwards: 70", b"Max Forwards 70"), "malformed header", True),
        (INVITE.replace(b"Content-Length: ", b"Content-Length: 9"), "shorter than", True),
        (INVITE + b"x" * 70_000, "over", False),
        (INVITE.replace(b"CSeq: 28483", "CSeq: ²".encode()), "CSeq", True),
        (INVITE.replace(b"Content-Length: ", b"Content-Length: " + b"9" * 5000), "number", True),
    ],
    ids=["garbage", "binary", "cseq-nan", "cseq-method", "no-call-id", "header", "length", "big",
         "cseq-superscript", "length-huge"],
)  # fmt: skip
def test_malformed_messages_are_refused_by_name(
    data: bytes, problem: str, answerable: bool
) -> None:
    with pytest.raises(sip.SipParseError, match=problem) as refused:
        sip.parse(data)
    partial = refused.value.message
    can_answer = partial is not None and all(
        partial.get(name) for name in ("Via", "From", "To", "Call-ID")
    )
    assert can_answer == answerable


def test_the_offer_gives_the_callers_first_g711_codec_and_its_keypad_events() -> None:
    offer = read_offer(OFFER)
    assert (offer.address, offer.port, offer.payload_type, offer.law) == (
        "127.0.0.1", 30156, 0, "ulaw",
    )  # fmt: skip
    assert offer.dtmf_payload_type == 101
    alaw_first = read_offer(OFFER.replace("RTP/AVP 0 8 101", "RTP/AVP 9 8 0 101"))
    assert (alaw_first.payload_type, alaw_first.law) == (8, "alaw"), "G.722 is skipped"
    text = answer(offer, "192.0.2.10", 40000)
    assert "c=IN IP4 192.0.2.10" in text and "m=audio 40000 RTP/AVP 0 101" in text
    assert "a=rtpmap:101 telephone-event/8000" in text and text.endswith("\r\n")
    assert read_offer(text).port == 40000, "our answer reads as SDP too"


@pytest.mark.parametrize(
    ("sdp", "error", "problem"),
    [
        (OFFER.replace("RTP/AVP 0 8 101", "RTP/AVP 9 101"), NotAcceptable, "no common codec"),
        (OFFER.replace("RTP/AVP", "RTP/SAVP"), NotAcceptable, "plain RTP/AVP"),
        (OFFER.replace("m=audio 30156", "m=audio 0"), NotAcceptable, "disabled"),
        (OFFER.replace("m=audio", "m=video"), NotAcceptable, "no audio"),
        (OFFER.replace("c=IN IP4 127.0.0.1", "c=IN IP4 nowhere"), BadSdp, "not an IP address"),
        ("hello", BadSdp, "v=0"),
        (OFFER.replace("m=audio 30156", "m=audio x"), BadSdp, "number"),
    ],
)
def test_offers_we_cannot_take_say_why(sdp: str, error: type[Exception], problem: str) -> None:
    with pytest.raises(error, match=problem):
        read_offer(sdp)


def test_rtp_packets_round_trip_and_rtcp_is_not_rtp() -> None:
    packet = RtpPacket(0, 65535, 4_294_967_200, 0xDEADBEEF, b"\xff" * 160, marker=True)
    assert parse(build(packet)) == packet
    assert parse(b"\x80\xc8" + bytes(30)) is None, "an RTCP sender report"
    assert parse(b"\x00\x00" + bytes(12)) is None, "version 0"
    assert parse(b"\x80") is None


def test_a_key_press_of_several_packets_is_one_key() -> None:
    keys = KeyEvents()

    def event(timestamp: int, key: int, end: bool = False) -> RtpPacket:
        payload = bytes([key, 0x80 if end else 0, 0, 160])
        return RtpPacket(101, 1, timestamp, 1, payload)

    packets = [event(8000, 5), event(8000, 5), event(8000, 5, True), event(8000, 5, True),
               event(9600, 11), event(9600, 11), event(11200, 5),
               RtpPacket(101, 1, 1, 1, bytes([16, 0, 0, 0]))]  # fmt: skip
    pressed = [keys.key(packet) for packet in packets]
    assert [key for key in pressed if key is not None] == ["5", "#", "5"]


URI = "sip:agent@127.0.0.1:5070"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def authorization(
    nonce: str, *, password: str = "s3cret", nc: int = 1, uri: str = URI, qop: bool = True
) -> str:
    ha1, ha2 = md5(f"alice:voice-agent:{password}"), md5(f"INVITE:{uri}")
    if not qop:  # RFC 2069's older form, without nc
        return (f'Digest username="alice", realm="voice-agent", nonce="{nonce}", '
                f'uri="{uri}", response="{md5(f"{ha1}:{nonce}:{ha2}")}"')  # fmt: skip
    response = md5(f"{ha1}:{nonce}:{nc:08x}:abcd:auth:{ha2}")
    return (f'Digest username="alice", realm="voice-agent", nonce="{nonce}", '
            f'uri="{uri}", response="{response}", algorithm=MD5, '
            f'cnonce="abcd", qop=auth, nc={nc:08x}')  # fmt: skip


def nonce_of(challenge: str) -> str:
    fields = digest_fields(challenge)
    assert fields is not None and fields["qop"] == "auth" and fields["algorithm"] == "MD5"
    return fields["nonce"]


def test_digest_authentication_as_a_phone_answers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = DigestAuth("alice", "s3cret", "voice-agent")
    call = {"source": "192.0.2.5", "call_id": "call-1"}
    nonce = nonce_of(auth.challenge(**call))
    assert auth.check("INVITE", URI, authorization(nonce), **call) == "ok"
    assert auth.check("INVITE", URI, authorization(nonce, password="wrong"), **call) == "bad"
    assert auth.check("INVITE", URI, authorization("1.2.forged"), **call) == "bad"
    assert auth.check("INVITE", URI, None, **call) == "bad"
    assert auth.check("INVITE", URI, "Basic YWxpY2U6czNjcmV0", **call) == "bad"
    stamp = nonce.split(".")[0]
    old = nonce.replace(stamp, str(int(stamp) - 3600 * 10**9), 1)
    assert auth.check("INVITE", URI, authorization(old), **call) == "bad", "signing needs the key"
    monkeypatch.setattr(auth_module, "NONCE_TTL_S", 0)
    assert auth.check("INVITE", URI, authorization(nonce, nc=2), **call) == "stale", "expired"


def test_a_captured_answer_cannot_be_replayed() -> None:
    """The probe's replay: one captured Authorization answered every new call. Now the
    nonce is for one call from one address, each nc counts once, and the uri must be
    the request's."""
    auth = DigestAuth("alice", "s3cret", "voice-agent")
    call = {"source": "192.0.2.5", "call_id": "call-1"}
    nonce = nonce_of(auth.challenge(**call))
    captured = authorization(nonce)
    assert auth.check("INVITE", URI, captured, **call) == "ok"
    assert auth.check("INVITE", URI, captured, **call) == "stale", "the same nc again"
    assert auth.check("INVITE", URI, authorization(nonce, nc=2), **call) == "ok", "the next nc"
    assert auth.check("INVITE", URI, captured, source="192.0.2.5", call_id="call-2") == "bad"
    assert auth.check("INVITE", URI, captured, source="198.51.100.9", call_id="call-1") == "bad"
    fresh = nonce_of(auth.challenge(**call))
    other_uri = "sip:someone-else@127.0.0.1:5070"
    assert auth.check("INVITE", URI, authorization(fresh, uri=other_uri), **call) == "bad"
    assert auth.check("INVITE", URI, authorization(fresh, qop=False), **call) == "bad"
    assert auth.check("INVITE", URI, authorization(fresh), **call) == "ok"


def test_the_nonces_remembered_are_bounded_and_the_forgotten_are_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(auth_module, "MAX_NONCES", 3)
    auth = DigestAuth("alice", "s3cret", "voice-agent")
    calls = [{"source": "192.0.2.5", "call_id": f"call-{n}"} for n in range(5)]
    nonces = [nonce_of(auth.challenge(**call)) for call in calls]
    for nonce, call in zip(nonces, calls, strict=True):
        assert auth.check("INVITE", URI, authorization(nonce), **call) == "ok"
    assert len(auth._used) <= 3
    # The first were forgotten: their nc cannot be checked, so they are stale (a phone
    # asks for a fresh nonce; a replay gets nothing more), and fresh ones still work.
    assert auth.check("INVITE", URI, authorization(nonces[0], nc=2), **calls[0]) == "stale"
    again = nonce_of(auth.challenge(**calls[0]))
    assert auth.check("INVITE", URI, authorization(again), **calls[0]) == "ok"


@pytest.mark.parametrize(
    "text",
    ["a" * 60_000, "a=" * 30_000, '"' * 60_000, "," * 60_000, 'a="' + "x" * 60_000,
     "a=b " * 15_000, "a = " * 15_000, "<" * 60_000],
    ids=["word", "pairs", "quotes", "commas", "open-quote", "spaced", "equals", "angles"],
)  # fmt: skip
def test_reading_hostile_headers_takes_linear_time(text: str) -> None:
    """A regular expression over the Authorization header once took 47 s at 60 KB,
    quadratic in its length, with the whole server frozen meanwhile."""
    auth = DigestAuth("alice", "s3cret", "voice-agent")
    started = time.perf_counter()
    digest_fields("Digest " + text)
    auth.check("INVITE", URI, "Digest " + text, source="192.0.2.5", call_id="c")
    sip.param(text, "tag")
    sip.uri_of(text)
    assert time.perf_counter() - started < 0.2


def test_header_sizes_are_capped() -> None:
    long_contact = INVITE.replace(b"Contact: <", b"Contact: <" + b"x" * sip.MAX_LINE_CHARS)
    with pytest.raises(sip.SipParseError, match="Contact header over") as refused:
        sip.parse(long_contact)
    assert refused.value.message is not None and refused.value.message.get("Via"), "a 400 goes"
    authorization = b"Authorization: Digest " + b"a" * sip.MAX_VALUE_CHARS["Authorization"]
    with pytest.raises(sip.SipParseError, match="Authorization header over"):
        sip.parse(INVITE.replace(b"Max-Forwards: 70", authorization))
    with pytest.raises(sip.SipParseError, match="first line"):
        sip.parse(b"INVITE sip:" + b"a" * sip.MAX_LINE_CHARS + b" SIP/2.0\r\n\r\n")


def test_parameters_and_contact_uris_are_read() -> None:
    via = "SIP/2.0/UDP 10.0.0.1:5060;rport;branch=z9hG4bKabc , SIP/2.0/UDP b;branch=z9hG4bKdef"
    assert sip.param(via, "branch") == "z9hG4bKabc" and sip.param(via, "rport") is None
    assert sip.param("<sip:a@b;tag=uri>;TAG = 12ab ;x=1", "tag") == "12ab"
    assert sip.param("<sip:a@b>;tag=;tag=7", "tag") == "7"
    assert sip.uri_of('"Alice" <sip:alice@10.0.0.1:5080;transport=udp>;expires=60') == (
        "sip:alice@10.0.0.1:5080;transport=udp"
    )
    assert sip.uri_of("sip:bare@10.0.0.1") is None and sip.uri_of("<>") is None


def test_the_allowlist_takes_networks_and_refuses_the_rest() -> None:
    allow = SourceFilter(["10.0.0.0/8", "192.0.2.7"])
    assert allow.allows("10.20.30.40") and allow.allows("192.0.2.7")
    assert not allow.allows("192.0.2.8") and not allow.allows("not-an-ip")
    assert SourceFilter([]).allows("203.0.113.1")
