"""Incoming phone calls offered to the application before they are answered, as Live's
`live.transport.incoming` webhook does it: the call rings, the application is told, and
it accepts the call (with the session it wants) or rejects it (with a SIP status).

The webhook is signed as the Standard Webhooks specification has it (the openai SDK's
`webhooks.unwrap` checks it, and refuses one replayed later) when a secret is set. A call
is decided once: a decision repeated, or one that comes after the call stopped ringing,
is refused (Conflict), saying what became of it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

import httpx

from app.config import SipSettings
from app.errors import CallRejected, Conflict, NotFound
from app.ids import new_id, shown
from app.live.session_config import SessionConfig

log = logging.getLogger(__name__)

MAX_PENDING = 64  # calls ringing at once, waiting for the application
MAX_DECIDED = 1024  # calls that stopped ringing, remembered to refuse a late decision
# The application answers the webhook at once (it decides with a call of its own): one
# that does not is not waited for longer than a caller would listen to ringing.
WEBHOOK_TIMEOUT = httpx.Timeout(5.0, connect=2.0)


@dataclass(frozen=True, slots=True)
class Accepted:
    config: SessionConfig


@dataclass(frozen=True, slots=True)
class Rejected:
    status: int


Decision = Accepted | Rejected


class IncomingCalls:
    def __init__(self, settings: SipSettings) -> None:
        self.url = settings.webhook_url
        self._secret = settings.webhook_secret
        self._timeout_s = settings.accept_timeout_s
        self._pending: dict[str, asyncio.Future[Decision]] = {}
        self._decided: OrderedDict[str, str] = OrderedDict()  # id -> what became of it
        # Made once, at start: its TLS setup takes a while, not to be spent on each call.
        self._http = httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT) if self.url else None

    @property
    def offered(self) -> bool:
        """Calls are offered to the application before they are answered."""
        return bool(self.url)

    async def offer(self, session_id: str, headers: list[tuple[str, str]]) -> SessionConfig:
        """Tell the application about a call and wait for its decision: the accepted
        session's config, or CallRejected (rejected, unanswered, or no webhook reached)."""
        if len(self._pending) >= MAX_PENDING:
            raise CallRejected(503, "too many calls are waiting for the application")
        decided = self._pending[session_id] = asyncio.get_running_loop().create_future()
        outcome = "the caller hung up"
        telling = asyncio.create_task(self._tell(session_id, headers), name=f"{session_id}:hook")
        try:
            # The webhook's answer and the decision share the one wait; a decision made
            # before the webhook is answered counts at once.
            async with asyncio.timeout(self._timeout_s):
                await asyncio.wait({telling, decided}, return_when="FIRST_COMPLETED")
                if not decided.done():
                    telling.result()  # CallRejected: it failed
                decision = await decided
        except TimeoutError:
            outcome = f"it went unanswered for {self._timeout_s:g} s"
            raise CallRejected(480, "the application did not accept the call in time") from None
        except CallRejected:
            outcome = "the application's webhook failed"
            raise
        else:
            outcome = "it was accepted" if isinstance(decision, Accepted) else "it was rejected"
        finally:
            telling.cancel()
            self._pending.pop(session_id, None)
            self._decided[session_id] = outcome
            while len(self._decided) > MAX_DECIDED:
                self._decided.popitem(last=False)
        if isinstance(decision, Rejected):
            raise CallRejected(decision.status, "the application rejected the call")
        return decision.config

    def decide(self, session_id: str, decision: Decision) -> None:
        """The application's answer: NotFound for a call never offered, Conflict for one
        already decided or no longer ringing."""
        decided = self._pending.get(session_id)
        if decided is not None and decided.done():
            raise Conflict(f"incoming call {shown(session_id)} is already decided")
        if decided is None:
            outcome = self._decided.get(session_id)
            if outcome is not None:
                raise Conflict(f"incoming call {shown(session_id)} is no longer ringing: {outcome}")
            raise NotFound(f"no incoming call {shown(session_id)} is waiting")
        decided.set_result(decision)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _tell(self, session_id: str, headers: list[tuple[str, str]]) -> None:
        event = {
            "id": new_id("evt"),
            "object": "event",
            "created_at": int(time.time()),
            "type": "live.transport.incoming",
            "data": {
                "session_id": session_id,
                "type": "sip",
                "sip_headers": [{"name": name, "value": value} for name, value in headers
                                if name.lower() not in ("authorization", "proxy-authorization")],
                "sip_media_security": "rtp",
            },
        }  # fmt: skip
        body = json.dumps(event)
        assert self._http is not None, "offered with no webhook"
        try:
            # Streamed, and its body never read: only the status matters.
            signed = self._signed(body)
            async with self._http.stream("POST", self.url, content=body, headers=signed) as reply:
                reply.raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("incoming call webhook failed: %s", exc, extra={"session_id": session_id})
            raise CallRejected(503, f"the application's webhook failed: {exc}") from exc

    def _signed(self, body: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if not self._secret:
            return headers
        webhook_id, timestamp = new_id("wh"), str(int(time.time()))
        key = base64.b64decode(self._secret.removeprefix("whsec_"))
        digest = hmac.new(key, f"{webhook_id}.{timestamp}.{body}".encode(), hashlib.sha256)
        signature = base64.b64encode(digest.digest()).decode()
        return {**headers, "webhook-id": webhook_id, "webhook-timestamp": timestamp,
                "webhook-signature": f"v1,{signature}"}  # fmt: skip
