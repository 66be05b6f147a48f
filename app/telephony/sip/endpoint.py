"""SIP over UDP below the calls (server.py): which datagrams are read at all, parsing,
the 400 for a malformed request, replies sent back where requests came from (RFC 3581, as
a caller behind NAT needs), and final answers kept for retransmitted requests.

A datagram from outside sip.allow is dropped before anything else is done with it: not
parsed, not answered. Parsing is linear in a datagram's size (message.py), and capped.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import cast

from app.telephony.sip import message as sip
from app.telephony.sip.answered import Answered
from app.telephony.sip.auth import SourceFilter
from app.telephony.sip.message import SipMessage, SipParseError

log = logging.getLogger(__name__)

Headers = list[tuple[str, str]]


class SipEndpoint(asyncio.DatagramProtocol):
    def __init__(self, allow: list[str]) -> None:
        self._filter = SourceFilter(allow)
        self._answered = Answered()  # final responses, for retransmitted requests
        self._transport: asyncio.DatagramTransport | None = None
        self.port = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport is not a subclass of asyncio's; it has the same methods.
        self._transport = cast(asyncio.DatagramTransport, transport)
        self.port = int(self._transport.get_extra_info("sockname")[1])

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        source = (addr[0], addr[1])
        if not self._filter.admits(source[0]):
            return  # before anything is read of it
        if not data.strip():
            return  # a keepalive (RFC 5626 CRLF)
        try:
            message = sip.parse(data)
        except SipParseError as exc:
            self._malformed(exc, source)
            return
        if not message.method:
            self._response_received(message)
            return
        answered = self._answered.get(message)
        if answered is not None:
            self._send(answered, source)  # a retransmission: the caller missed our answer
        else:
            self._request_received(message, source)

    def _request_received(self, request: SipMessage, source: tuple[str, int]) -> None:
        raise NotImplementedError

    def _response_received(self, response: SipMessage) -> None:
        raise NotImplementedError

    def _to_tag(self, request: SipMessage, status: int) -> str:
        """Our tag for the To header of a reply to `request` ("": none yet)."""
        return ""

    def _malformed(self, exc: SipParseError, source: tuple[str, int]) -> None:
        log.warning("malformed SIP from %s:%d: %s", *source, exc)
        request = exc.message
        # A 400 needs the request's Via and dialog headers; without them nothing can answer.
        answerable = request is not None and request.method not in ("", "ACK")
        if request is None or not answerable:
            return
        if all(request.get(name) for name in ("Via", "From", "To", "Call-ID")):
            reason = re.sub(r"[\r\n]", " ", str(exc))[:100]
            request.headers = [(k, v) for k, v in request.headers if k != "CSeq"] + [
                ("CSeq", f"{_cseq_number(request)} {request.method}")
            ]
            self._reply(request, source, 400, f"Bad Request ({reason})")

    def _reply(
        self,
        request: SipMessage,
        source: tuple[str, int],
        status: int,
        reason: str,
        headers: Headers = (),  # type: ignore[assignment]
    ) -> None:
        data = sip.response(request, status, reason, to_tag=self._to_tag(request, status),
                            source=source, headers=list(headers))  # fmt: skip
        if status >= 200 and request.method != "INVITE":
            self._answered.remember(request, data)  # a BYE sent again gets its 200 again
        self._send(data, source)

    def _final(
        self,
        request: SipMessage,
        source: tuple[str, int],
        status: int,
        reason: str,
        headers: Headers = (),  # type: ignore[assignment]
        to_tag: str = "",
    ) -> None:
        """A final refusal of an INVITE: sent once, and again for each retransmitted
        INVITE. Not on timer G as RFC 3261 has it: that sends a source nobody verified
        up to 11 packets for its one, and the caller's own retransmissions (timer A)
        recover a lost refusal just as well."""
        data = sip.response(request, status, reason, to_tag=to_tag or sip.new_tag(),
                            source=source, headers=list(headers))  # fmt: skip
        self._answered.remember(request, data)
        self._send(data, source)

    def _send(self, data: bytes, destination: tuple[str, int]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(data, destination)


def _cseq_number(request: SipMessage) -> int:
    number = (request.get("CSeq") or "").split(" ")[0]
    return int(number) if sip.is_number(number) else 0
