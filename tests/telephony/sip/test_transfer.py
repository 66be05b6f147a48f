"""What a transfer may target, and what a caller's NOTIFY says of the new call."""

from __future__ import annotations

from app.telephony.sip.message import SipMessage
from app.telephony.sip.transfer import transfer_status, valid_target


def test_targets_are_sip_or_tel_uris_that_cannot_break_a_header() -> None:
    assert valid_target("sip:desk@pbx.example.com")
    assert valid_target("tel:+14155550123")
    assert valid_target("sips:agent@10.0.0.1:5061;transport=tls")
    for bad in ("http://example.com", "sip:a b", "sip:a>\r\nX: y", "", "sip:" + "a" * 300):
        assert not valid_target(bad), bad


def test_a_notify_says_how_the_new_call_went() -> None:
    def notify(event: str, body: bytes) -> SipMessage:
        return SipMessage(method="NOTIFY", headers=[("Event", event)], body=body)

    assert transfer_status(notify("refer", b"SIP/2.0 200 OK\r\n")) == 200
    assert transfer_status(notify("refer;id=7", b"SIP/2.0 100 Trying")) == 100
    assert transfer_status(notify("presence", b"SIP/2.0 200 OK")) is None
    assert transfer_status(notify("refer", b"nonsense")) is None
