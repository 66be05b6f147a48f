"""What a transfer may target, what a caller's NOTIFY says of the new call, and keys
pressed to a caller."""

from __future__ import annotations

import struct

from app.telephony.sip.message import SipMessage
from app.telephony.sip.rtp import KeySender
from app.telephony.sip.transfer import allowed_target, transfer_status, valid_target


def test_targets_are_sip_or_tel_uris_that_cannot_break_a_header() -> None:
    assert valid_target("sip:desk@pbx.example.com")
    assert valid_target("tel:+14155550123")
    assert valid_target("sips:agent@10.0.0.1:5061;transport=tls")
    for bad in ("http://example.com", "sip:a b", "sip:a>\r\nX: y", "", "sip:" + "a" * 300):
        assert not valid_target(bad), bad


def test_a_target_cannot_smuggle_headers_a_second_uri_or_a_route() -> None:
    for bad in (
        "sip:desk@pbx.example.com?Replaces=abc",  # headers in the REFER the caller sends
        "sip:desk@pbx.example.com,sip:premium@toll.example",
        "sip:desk@pbx.example.com;maddr=198.51.100.9",
        "sip:desk@pbx.example.com;MADDR =198.51.100.9",
        "sip:dèsk@pbx.example.com",
        "tel:+1415\t555",
    ):
        assert not valid_target(bad), bad


def test_only_targets_an_operator_lists_are_allowed() -> None:
    patterns = ["sip:*@pbx.example.com", "tel:+1415555*", "sip:reception@10.0.0.1:5060"]
    assert allowed_target("sip:desk@pbx.example.com", patterns)
    assert allowed_target("SIP:Desk@PBX.example.com", patterns)
    assert allowed_target("tel:+14155550123", patterns)
    assert allowed_target("sip:reception@10.0.0.1:5060", patterns)
    for refused in (
        "sip:desk@pbx.example.com.evil.example",  # the host is the whole host
        "sip:a@evil.example;x=@pbx.example.com",  # '*' does not run past @ or ;
        "sip:desk@pbx.example.com;transport=tcp",
        "tel:+19005550100",
        "sip:reception@10.0.0.1:5061",
        "sip:reception@10.0.0.1",
        # In a tel: pattern '*' is digits: not a second number, a '+' or a path.
        "tel:+1415555%2C+19005550000",
        "tel:+1415555+19005550000",
        "tel:+1415555/19005550000",
        "tel:+1415555;phone-context=example.com",
    ):
        assert not allowed_target(refused, patterns), refused
    assert allowed_target("tel:+1415555", patterns), "a run of none is a run of digits"
    assert not allowed_target("sip:desk@pbx.example.com", []), "no patterns: no transfers"


def test_a_notify_says_how_the_new_call_went() -> None:
    def notify(event: str, body: bytes) -> SipMessage:
        return SipMessage(method="NOTIFY", headers=[("Event", event)], body=body)

    assert transfer_status(notify("refer", b"SIP/2.0 200 OK\r\n")) == 200
    assert transfer_status(notify("refer;id=7", b"SIP/2.0 100 Trying")) == 100
    assert transfer_status(notify("presence", b"SIP/2.0 200 OK")) is None
    assert transfer_status(notify("refer", b"nonsense")) is None


def test_a_key_pressed_to_the_caller_is_eight_rfc_4733_packets() -> None:
    sender = KeySender()
    sender.add("#")
    packets = [sender.next_payload() for _ in range(8)]
    assert not sender.busy
    events = [struct.unpack("!BBH", payload) for payload, _, _ in packets]
    assert {event for event, _, _ in events} == {11}, "# is event 11"
    assert [duration for _, _, duration in events] == [160, 320, 480, 640, 800, 800, 800, 800]
    assert [bool(flags & 0x80) for _, flags, _ in events] == [False] * 5 + [True] * 3
    assert [first for _, first, _ in packets] == [True] + [False] * 7
    assert [last for _, _, last in packets] == [False] * 7 + [True]
