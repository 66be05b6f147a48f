"""A SIP user agent server over UDP (RFC 3261): answers calls from a PBX, a trunk or a
phone, and hangs them up. A datagram from outside sip.allow is dropped unread.

INVITE (with an SDP offer) → 200 OK with our answer, after 100 Trying if it takes over
200 ms; or 486 Busy Here (full pool, or the caller's address holds its share), 488 (no
common codec), 503 (not ready, or too many new calls from that address), 401 (digest
challenge). The call claims its slot at the ACK (`SipLeg.confirm`). CANCEL before the
answer → 487. BYE either way. OPTIONS (a PBX's keepalive) → 200. INFO with
application/dtmf-relay is a keypad press too. A malformed message → 400 naming the
problem, when it says enough to be answered; the server goes on.

A source is not verified until it ACKs, so an INVITE gets one final answer for each
time it is sent: a refusal or a 200 is sent once, and again only for a retransmitted
INVITE, not on timer G. A 200 never ACKed is forgotten (unacked.py), without a BYE.

Replies go back to where the request came from (RFC 3581, as a caller behind NAT
needs). Our BYE goes to the INVITE's source with the Record-Route set as Route.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from typing import Protocol

from app.calls.admission import Caller
from app.config import SipSettings
from app.errors import TransferFailed
from app.tasks import TaskSet
from app.telephony.sip import message as sip
from app.telephony.sip.addresses import host_port, local_address
from app.telephony.sip.auth import DigestAuth
from app.telephony.sip.dialog import Dialog, Dialogs
from app.telephony.sip.endpoint import SipEndpoint
from app.telephony.sip.leg import Invite, SipLeg
from app.telephony.sip.message import SipMessage
from app.telephony.sip.refusals import REFUSED, refusal
from app.telephony.sip.requests import Address, Requests
from app.telephony.sip.sdp import AudioOffer, NotAcceptable, answer, read_offer
from app.telephony.sip.transfer import transfer_status
from app.telephony.sip.unacked import Unacked

log = logging.getLogger(__name__)

ALLOW = "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, NOTIFY"
TRYING_S = 0.2  # RFC 3261 17.2.1: 100 Trying if the answer takes longer than this
LOG_CHARS = 64  # of a client's string (a Call-ID) in a log line
DTMF_RELAY = re.compile(r"^Signal[ \t]*=[ \t]*(\S)", re.MULTILINE | re.IGNORECASE)


class Calls(Protocol):
    async def answer_sip(
        self, offer: AudioOffer, caller: Caller, invite: Invite, holding: int = 0
    ) -> SipLeg: ...

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool: ...


class SipServer(SipEndpoint):
    def __init__(self, settings: SipSettings, calls: Calls, default_host: str) -> None:
        super().__init__(settings.allow)
        self.settings = settings
        self._calls = calls
        self._host = settings.host or default_host
        self._auth = (
            DigestAuth(settings.username, settings.password, settings.realm)
            if settings.password
            else None
        )
        # A trunk or PBX carries many callers from one address: with an allowlist or a
        # password, its calls are not held to one address's rate or share of the slots.
        self._vouched = bool(settings.allow) or self._auth is not None
        self._dialogs = Dialogs()
        self._unacked = Unacked(self._forget)  # answered, waiting for the ACK
        self._requests = Requests(self._send, self._here)  # our BYEs and REFERs
        self._tasks = TaskSet()  # answering INVITEs, hanging up on BYEs, our own BYEs

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
        self._unacked.close()
        if self._transport is not None:
            self._transport.close()

    # --- in -----------------------------------------------------------------------------

    def _response_received(self, response: SipMessage) -> None:
        self._requests.answered(response)

    def _request_received(self, request: SipMessage, source: tuple[str, int]) -> None:
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
        if self._dialogs.full:
            self._final(request, source, 503, "Service Unavailable", [("Retry-After", "5")])
            return
        dialog = Dialog(request, source)
        self._dialogs.add(dialog)
        dialog.answering = self._tasks.spawn(
            self._answer(dialog), f"sip:{request.call_id[:24]}:invite"
        )

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
        """Admit the call (ringing while the application decides, with a webhook), bind
        its RTP, and answer 200 once. Its slot waits for the ACK."""
        request, source = dialog.invite, dialog.source
        # Not at once: a refusal decided at once is then one packet, not two.
        trying = asyncio.get_running_loop().call_later(
            TRYING_S, self._reply, request, source, 100, "Trying"
        )
        try:
            leg = await self._admit(dialog)
        finally:
            trying.cancel()
        if leg is None:
            return
        leg.on_close = lambda: self._leg_closed(dialog)
        leg.transfer = lambda target: self._transfer(dialog, target)
        body = answer(leg.offer, self._address(source), leg.port).encode()
        dialog.final = sip.response(request, 200, "OK", to_tag=dialog.local_tag, source=source,
                                    headers=[("Contact", self._contact(dialog)),
                                             ("Allow", ALLOW), ("Supported", "")],
                                    body=body)  # fmt: skip
        self._unacked.add(dialog)
        self._send(dialog.final, source)
        log.info("SIP call %s answered (%s, RTP port %d)", request.call_id[:LOG_CHARS],
                 leg.offer.law, leg.port, extra={"session_id": leg.session_id})  # fmt: skip

    async def _admit(self, dialog: Dialog) -> SipLeg | None:
        """The call's leg, its RTP bound; or None, the INVITE refused. A CANCEL cancels
        this (the application's decision is then too late), and discards the leg."""
        request, source = dialog.invite, dialog.source
        try:
            if (request.get("Content-Type") or "").split(";")[0].strip() != "application/sdp":
                raise NotAcceptable("an INVITE without an SDP offer (we answer offers only)")
            offer = read_offer(request.body.decode("utf-8", errors="replace"))
            offer = dataclasses.replace(offer, signalling_ip=source[0])
            caller = Caller(dialog.client, vouched=self._vouched)
            invite = Invite(list(request.headers), lambda: self._ring(dialog))
            holding = self._dialogs.held_by(dialog.client) - 1  # this one aside
            leg = dialog.leg = await self._calls.answer_sip(offer, caller, invite, holding)
            await leg.bind(self._host)
            return leg
        except Exception as exc:
            if not isinstance(exc, REFUSED):
                log.exception("SIP call %s could not be set up", request.call_id[:LOG_CHARS])
            if dialog.leg is not None:
                dialog.leg.discard()
            self._refuse(dialog, *refusal(exc))
        return None

    def _ring(self, dialog: Dialog) -> None:
        """180 Ringing, while the application decides (not after a CANCEL)."""
        if not dialog.cancelled:
            self._reply(dialog.invite, dialog.source, 180, "Ringing")

    def _refuse(self, dialog: Dialog, status: int, reason: str,
                headers: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]  # fmt: skip
        self._dialogs.pop(dialog)
        self._final(dialog.invite, dialog.source, status, reason, headers, dialog.local_tag)

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
        if dialog is None or dialog.leg is None or dialog.confirmed:
            return
        # Only the caller heard our To tag: the source is verified, and the call may
        # have its slot now.
        dialog.confirmed = True
        self._unacked.acked(dialog)
        try:
            dialog.leg.confirm()
        except Exception as exc:  # answered, then refused (the pool filled meanwhile)
            if not isinstance(exc, REFUSED):
                log.exception("SIP call %s could not start", request.call_id[:LOG_CHARS])
            status, reason, _ = refusal(exc)
            log.warning("SIP call %s refused at its ACK: %s", request.call_id[:LOG_CHARS], exc)
            dialog.leg.discard()
            self._dialogs.pop(dialog)
            dialog.ended = True
            cause = ("Reason", f'SIP;cause={status};text="{reason}"')  # RFC 3326
            self._tasks.spawn(self._send_bye(dialog, [cause]), f"sip:{request.call_id[:24]}:bye")

    def _cancel(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._dialogs.get(request.call_id)
        if dialog is None or dialog.invite.branch != request.branch:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        self._reply(request, source, 200, "OK")
        if dialog.final is None:  # not answered yet: the INVITE ends with 487 now
            dialog.cancelled = True
            if dialog.answering is not None:
                dialog.answering.cancel()  # a ringing call's decision comes too late
            if dialog.leg is not None:
                dialog.leg.discard()
            self._refuse(dialog, 487, "Request Terminated")

    def _bye(self, request: SipMessage, source: tuple[str, int]) -> None:
        dialog = self._in_dialog(request)
        if dialog is None or dialog.leg is None:
            self._reply(request, source, 481, "Call/Transaction Does Not Exist")
            return
        self._reply(request, source, 200, "OK")
        if not dialog.confirmed:  # hung up before its ACK: it never had a slot
            self._unacked.acked(dialog)
            self._forget(dialog)
            return
        dialog.ended = True
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

    def _to_tag(self, request: SipMessage, status: int) -> str:
        dialog = self._dialogs.get(request.call_id)
        return dialog.local_tag if dialog is not None and status > 100 else ""

    # --- out ----------------------------------------------------------------------------

    def _forget(self, dialog: Dialog) -> None:
        """An answer never ACKed: its record and RTP socket go, silently. A BYE would go
        to a source nobody verified, for a dialog never confirmed."""
        self._dialogs.pop(dialog)
        if dialog.leg is not None:
            dialog.leg.discard()
        log.info("SIP call %s: no ACK; forgotten", dialog.invite.call_id[:LOG_CHARS])

    def _leg_closed(self, dialog: Dialog) -> None:
        """The call is over on our side: if the caller did not end it, send BYE."""
        self._dialogs.pop(dialog)
        if dialog.ended or not dialog.confirmed:
            return
        dialog.ended = True
        self._tasks.spawn(self._send_bye(dialog), f"sip:{dialog.invite.call_id[:24]}:send-bye")

    async def _send_bye(self, dialog: Dialog, extra: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        if await self._requests.send(dialog, "BYE", extra) is None:
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
