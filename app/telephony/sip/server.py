"""A SIP user agent server over UDP (RFC 3261): answers calls from a PBX, a trunk or a
phone, and hangs them up. Each call claims a slot through `Calls.open_sip`.

INVITE (with an SDP offer) → 200 OK with our answer, repeated until the ACK (timer G),
after 100 Trying if it takes over 200 ms; or 486 Busy Here (full pool, or the caller's
address holds its share), 488 (no common codec), 503 (not ready, or too many new calls
from that address), 401 (digest challenge), 403 (source not allowed). CANCEL before the
answer → 487. BYE either way. OPTIONS (a PBX's keepalive) → 200. INFO with
application/dtmf-relay is a keypad press too. A malformed message → 400 naming the
problem, when it says enough to be answered; the server goes on.

A source is not verified until it ACKs, so a refusal costs one packet for each request:
it is sent once, and again only for a retransmitted INVITE (not on timer G).

Replies go back to where the request came from (RFC 3581, as a caller behind NAT
needs). Our BYE goes to the INVITE's source with the Record-Route set as Route.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from typing import Protocol, cast

from app.calls.admission import Caller, client_key
from app.config import SipSettings
from app.errors import TransferFailed
from app.tasks import TaskSet
from app.telephony.sip import message as sip
from app.telephony.sip.addresses import host_port, local_address
from app.telephony.sip.answered import Answered
from app.telephony.sip.auth import DigestAuth, SourceFilter
from app.telephony.sip.dialog import Dialog
from app.telephony.sip.leg import Invite, SipLeg
from app.telephony.sip.message import SipMessage, SipParseError
from app.telephony.sip.refusals import REFUSED, refusal
from app.telephony.sip.requests import Address, Requests, resends
from app.telephony.sip.sdp import AudioOffer, NotAcceptable, answer, read_offer
from app.telephony.sip.transfer import transfer_status

log = logging.getLogger(__name__)

ALLOW = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, NOTIFY"
MAX_DIALOGS = 1024  # beyond the pool, a flood of INVITEs is refused, not remembered
TRYING_S = 0.2  # RFC 3261 17.2.1: 100 Trying if the answer takes longer than this
LOG_CHARS = 64  # of a client's string (a Call-ID) in a log line
DTMF_RELAY = re.compile(r"^Signal[ \t]*=[ \t]*(\S)", re.MULTILINE | re.IGNORECASE)


class Calls(Protocol):
    async def open_sip(
        self, offer: AudioOffer, host: str, caller: Caller = ..., invite: Invite | None = None
    ) -> SipLeg: ...

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool: ...


class SipServer(asyncio.DatagramProtocol):
    def __init__(self, settings: SipSettings, calls: Calls, default_host: str) -> None:
        self.settings = settings
        self._calls = calls
        self._host = settings.host or default_host
        self._filter = SourceFilter(settings.allow)
        self._auth = (
            DigestAuth(settings.username, settings.password, settings.realm)
            if settings.password
            else None
        )
        # A trunk or PBX carries many callers from one address: with an allowlist or a
        # password, its calls are not held to one address's rate or share of the slots.
        self._vouched = bool(settings.allow) or self._auth is not None
        self._dialogs: dict[str, Dialog] = {}  # by Call-ID
        self._answered = Answered()  # final responses, for retransmitted requests
        self._requests = Requests(self._send, self._here)  # our BYEs and REFERs
        self._tasks = TaskSet()  # answering INVITEs, hanging up on BYEs, our own BYEs
        self._transport: asyncio.DatagramTransport | None = None
        self.port = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(
            lambda: self, local_addr=(self._host, self.settings.port)
        )
        log.info("SIP on udp/%s:%d", self._host, self.port)

    async def aclose(self, timeout_s: float = 2.0) -> None:
        """Give the BYEs of calls just ended a chance to be answered, then stop."""
        deadline = time.monotonic() + timeout_s
        while self._requests.pending and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await self._tasks.close()
        if self._transport is not None:
            self._transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport is not a subclass of asyncio's; it has the same methods.
        self._transport = cast(asyncio.DatagramTransport, transport)
        self.port = int(self._transport.get_extra_info("sockname")[1])

    # --- in -----------------------------------------------------------------------------

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        source = (addr[0], addr[1])
        if not data.strip():
            return  # a keepalive (RFC 5626 CRLF)
        try:
            message = sip.parse(data)
        except SipParseError as exc:
            self._malformed(exc, source)
            return
        if not message.method:
            self._requests.answered(message)
        elif not self._filter.allows(source[0]):
            log.warning("SIP %s from %s refused: not in sip.allow", message.method, source[0])
            self._reply(message, source, 403, "Forbidden")
        else:
            self._request_received(message, source)

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

    def _request_received(self, request: SipMessage, source: tuple[str, int]) -> None:
        answered = self._answered.get(request)
        if answered is not None:
            self._send(answered, source)  # a retransmission: the caller missed our answer
            return
        match request.method:
            case "INVITE" if not request.to_tag:
                self._invite(request, source)
            case "INVITE":  # a re-INVITE: the same media, refreshed
                self._reinvite(request, source)
            case "ACK":
                self._ack(request)
            case "CANCEL":
                self._cancel(request, source)
            case "BYE":
                self._bye(request, source)
            case "OPTIONS":
                self._reply(request, source, 200, "OK",
                            headers=[("Allow", ALLOW), ("Accept", "application/sdp")])  # fmt: skip
            case "INFO":
                self._info(request, source)
            case "NOTIFY":
                self._notify(request, source)
            case _:
                self._reply(request, source, 405, "Method Not Allowed", headers=[("Allow", ALLOW)])

    def _invite(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._dialogs.get(request.call_id)
        if dialog is not None:
            if dialog.invite.branch != request.branch:  # the same call by another path
                self._reply(request, source, 482, "Loop Detected")
            elif dialog.final is not None:  # a retransmission: our 200 was lost
                self._send(dialog.final, source)
            else:
                self._reply(request, source, 100, "Trying")
            return
        if self._auth is not None and not self._authorized(request, source):
            return
        if len(self._dialogs) >= MAX_DIALOGS:
            self._final(request, source, 503, "Service Unavailable", [("Retry-After", "5")])
            return
        dialog = self._dialogs[request.call_id] = Dialog(request, source)
        self._tasks.spawn(self._answer(dialog), f"sip:{request.call_id[:24]}:invite")

    def _authorized(self, request: SipMessage, source: tuple[str, int]) -> bool:
        assert self._auth is not None
        authorization = request.get("Authorization")
        verdict = self._auth.check(request.method, request.uri, authorization,
                                   source=source[0], call_id=request.call_id)  # fmt: skip
        if verdict == "ok":
            return True
        if authorization is not None and verdict == "bad":
            log.warning("SIP digest authentication failed for a call from %s", source[0])
        challenge = self._auth.challenge(source=source[0], call_id=request.call_id,
                                         stale=verdict == "stale")  # fmt: skip
        self._final(request, source, 401, "Unauthorized", [("WWW-Authenticate", challenge)])
        return False

    async def _answer(self, dialog: Dialog) -> None:
        request, source = dialog.invite, dialog.source
        # Not at once: a refusal decided at once is then one packet, not two.
        trying = asyncio.get_running_loop().call_later(
            TRYING_S, self._reply, request, source, 100, "Trying"
        )
        try:
            answered = await self._open(dialog)
        finally:
            trying.cancel()
        if answered is None:
            return
        leg, offer = answered
        dialog.leg = leg
        leg.on_close = lambda: self._leg_closed(dialog)
        leg.transfer = lambda target: self._transfer(dialog, target)
        if dialog.cancelled:
            self._refuse(dialog, 487, "Request Terminated")
            await self._calls.hang_up(leg.session_id)
            return
        contact = self._contact(dialog)
        body = answer(offer, self._address(source), leg.port).encode()
        dialog.final = sip.response(request, 200, "OK", to_tag=dialog.local_tag, source=source,
                                    headers=[("Contact", contact), ("Allow", ALLOW),
                                             ("Supported", "")], body=body)  # fmt: skip
        log.info("SIP call %s answered (%s, RTP port %d)", request.call_id[:LOG_CHARS],
                 offer.law, leg.port, extra={"session_id": leg.session_id})  # fmt: skip
        await self._until_acked(dialog)

    async def _open(self, dialog: Dialog) -> tuple[SipLeg, AudioOffer] | None:
        """The call's leg, on a slot; or None, the INVITE refused."""
        request, source = dialog.invite, dialog.source
        try:
            if (request.get("Content-Type") or "").split(";")[0].strip() != "application/sdp":
                raise NotAcceptable("an INVITE without an SDP offer (we answer offers only)")
            offer = read_offer(request.body.decode("utf-8", errors="replace"))
            offer = dataclasses.replace(offer, signalling_ip=source[0])
            caller = Caller(client_key(source[0]), vouched=self._vouched)
            invite = Invite(list(request.headers), lambda: self._ring(dialog))
            return await self._calls.open_sip(offer, self._host, caller, invite), offer
        except Exception as exc:
            if not isinstance(exc, REFUSED):
                log.exception("SIP call %s could not be set up", request.call_id[:LOG_CHARS])
            self._refuse(dialog, *refusal(exc))
        return None

    def _ring(self, dialog: Dialog) -> None:
        """180 Ringing, while the application decides (not after a CANCEL)."""
        if not dialog.cancelled:
            self._reply(dialog.invite, dialog.source, 180, "Ringing")

    async def _until_acked(self, dialog: Dialog) -> None:
        """Timer G: the 200 again, at T1 doubling to T2, until the ACK; timer H gives up."""
        assert dialog.final is not None
        for interval in resends():
            if dialog.confirmed or dialog.ended:
                break
            self._send(dialog.final, dialog.source)
            await asyncio.sleep(interval)
        if not dialog.confirmed and dialog.leg is not None and not dialog.ended:
            log.warning("SIP call %s: no ACK; hanging up", dialog.invite.call_id[:LOG_CHARS])
            await self._calls.hang_up(dialog.leg.session_id)

    def _refuse(self, dialog: Dialog, status: int, reason: str,
                headers: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]  # fmt: skip
        self._dialogs.pop(dialog.invite.call_id, None)
        self._final(dialog.invite, dialog.source, status, reason, headers, dialog.local_tag)

    def _final(
        self,
        request: SipMessage,
        source: tuple[str, int],
        status: int,
        reason: str,
        headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
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

    def _in_dialog(self, request: SipMessage) -> Dialog | None:
        """The answered call `request` is within: its Call-ID and both tags match."""
        dialog = self._dialogs.get(request.call_id)
        if dialog is None or dialog.final is None or dialog.leg is None:
            return None
        if (request.to_tag, request.from_tag) != (dialog.local_tag, dialog.invite.from_tag):
            return None
        return dialog

    def _reinvite(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._in_dialog(request)
        if dialog is None or dialog.final is None:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        # Same media as before: a session refresh or a hold we do not act on.
        offered = dialog.final.partition(b"\r\n\r\n")[2]
        self._send(sip.response(request, 200, "OK", to_tag=dialog.local_tag, source=source,
                                body=offered), source)  # fmt: skip

    def _ack(self, request: SipMessage) -> None:
        self._answered.acked(request)  # an ACK to a refusal
        dialog = self._in_dialog(request)
        if dialog is not None and dialog.leg is not None:
            dialog.confirmed = True
            dialog.leg.connected.set()

    def _cancel(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._dialogs.get(request.call_id)
        if dialog is None or dialog.invite.branch != request.branch:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        self._reply(request, source, 200, "OK")
        if dialog.final is None:  # not answered yet: the INVITE ends with 487
            dialog.cancelled = True

    def _bye(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._in_dialog(request)
        if dialog is None or dialog.leg is None:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        dialog.ended = True
        self._reply(request, source, 200, "OK")
        log.info("SIP call %s: the caller hung up", request.call_id[:LOG_CHARS],
                 extra={"session_id": dialog.leg.session_id})  # fmt: skip
        hanging_up = self._calls.hang_up(dialog.leg.session_id, caller_left=True)
        self._tasks.spawn(hanging_up, f"sip:{request.call_id[:24]}:bye")

    def _info(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._in_dialog(request)
        if dialog is None or dialog.leg is None:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        kind = (request.get("Content-Type") or "").split(";")[0].strip().lower()
        signal = DTMF_RELAY.search(request.body.decode("utf-8", errors="replace"))
        if kind == "application/dtmf-relay" and signal and dialog.leg.rtp is not None:
            dialog.leg.rtp.on_key(signal.group(1).upper())
        self._reply(request, source, 200, "OK")

    # --- out ----------------------------------------------------------------------------

    def _leg_closed(self, dialog: Dialog) -> None:
        """The call is over on our side: if the caller did not end it, send BYE."""
        self._dialogs.pop(dialog.invite.call_id, None)
        if dialog.ended or dialog.cancelled or dialog.final is None:
            return
        dialog.ended = True
        self._tasks.spawn(self._send_bye(dialog), f"sip:{dialog.invite.call_id[:24]}:send-bye")

    async def _send_bye(self, dialog: Dialog) -> None:
        if await self._requests.send(dialog, "BYE") is None:
            log.warning(
                "SIP call %s: our BYE was never answered", dialog.invite.call_id[:LOG_CHARS]
            )

    async def _transfer(self, dialog: Dialog, target: str) -> None:
        """Ask the caller to call `target` instead (REFER, RFC 3515); TransferFailed if it
        will not. Its NOTIFY saying the new call is up ends ours."""
        contact = self._contact(dialog)
        response = await self._requests.send(
            dialog, "REFER", [("Refer-To", f"<{target}>"), ("Referred-By", contact),
                              ("Contact", contact)],
        )  # fmt: skip
        if response is None:
            raise TransferFailed("the caller did not answer the transfer (REFER)")
        if not 200 <= response.status < 300:
            raise TransferFailed(f"the caller refused the transfer: {response.status} "
                                 f"{response.reason}")  # fmt: skip
        session_id = dialog.leg.session_id if dialog.leg else None
        log.info("SIP call %s: transfer to %s accepted", dialog.invite.call_id[:LOG_CHARS],
                 target, extra={"session_id": session_id})  # fmt: skip

    def _notify(self, request: SipMessage, source: tuple[str, int]) -> None:
        """How a transfer we asked for went: once the new call is up, ours is over."""
        dialog = self._in_dialog(request)
        if dialog is None or dialog.leg is None:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        self._reply(request, source, 200, "OK")
        status = transfer_status(request)
        if status is not None and 200 <= status < 300:
            hanging_up = self._calls.hang_up(dialog.leg.session_id)
            self._tasks.spawn(hanging_up, f"sip:{request.call_id[:24]}:transferred")

    def _address(self, source: Address) -> str:
        """Our address as the peer at `source` reaches it."""
        return self.settings.public_address or local_address(source[0], self._host)

    def _here(self, source: Address) -> str:
        return host_port(self._address(source), self.port)

    def _contact(self, dialog: Dialog) -> str:
        return f"<sip:agent@{self._here(dialog.source)}>"

    def _reply(
        self,
        request: SipMessage,
        source: tuple[str, int],
        status: int,
        reason: str,
        headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> None:
        dialog = self._dialogs.get(request.call_id)
        to_tag = dialog.local_tag if dialog is not None and status > 100 else ""
        data = sip.response(request, status, reason, to_tag=to_tag, source=source,
                            headers=list(headers))  # fmt: skip
        if status >= 200 and request.method != "INVITE":
            self._answered.remember(request, data)  # a BYE sent again gets its 200 again
        self._send(data, source)

    def _send(self, data: bytes, destination: tuple[str, int]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(data, destination)


def _cseq_number(request: SipMessage) -> int:
    number = (request.get("CSeq") or "").split(" ")[0]
    return int(number) if sip.is_number(number) else 0
