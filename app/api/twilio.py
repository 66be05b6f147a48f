"""Phone calls through Twilio (or a carrier that speaks its Media Streams protocol).

POST /twilio/voice is the number's voice webhook: it answers with TwiML that connects the
call's audio to our stream WebSocket, or rejects the call as busy when no slot is free.
/twilio/stream is that WebSocket.

Who may use them, once any credential is configured:
- the webhook: with twilio.auth_token, Twilio's signature (X-Twilio-Signature: HMAC-SHA1
  of the URL and the sorted form fields); otherwise the server's API key, as a Bearer or
  as the password of HTTP Basic auth (a webhook URL `https://any:<key>@host/...`);
- the stream: the one-time ticket the webhook put in its URL (/twilio/stream/<ticket>,
  signed by Twilio too with an auth token), or the server's API key as a Bearer (a
  carrier or gateway that opens streams itself, such as Telnyx's stream auth token).
With neither configured both are open, for a trusted network; such streams are then held
to the per-address limits like any client's calls.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
from xml.sax.saxutils import quoteattr

from fastapi import APIRouter, Request, Response, WebSocket
from starlette.datastructures import URL
from starlette.requests import HTTPConnection

from app.api.auth import bearer_token, key_matches
from app.api.callers import caller
from app.api.deps import Calls, calls_of, runtime_of
from app.api.sockets import POLICY_VIOLATION, TRY_AGAIN_LATER
from app.api.stream_tickets import StreamTickets
from app.calls.admission import Caller
from app.calls.phone import serve_media_stream
from app.errors import NotReady, RateLimited, SessionLimitReached

log = logging.getLogger(__name__)

router = APIRouter(prefix="/twilio")

TWIML = "application/xml"
BUSY = '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/></Response>'


@router.post("/voice")
async def voice(request: Request, calls: Calls) -> Response:
    token, api_key = calls.settings.twilio.auth_token, calls.settings.server.api_key
    if token:
        form = await request.form()
        fields = sorted((key, str(value)) for key, value in form.multi_items())
        url = public_url(request)
        if not signed(token, url, fields, request.headers.get("x-twilio-signature")):
            return Response("bad or missing X-Twilio-Signature", status_code=403)
    elif api_key and not key_matches(api_key, _key_of(request)):
        return Response("the server's API key is needed (Basic or Bearer)", status_code=401,
                        headers={"WWW-Authenticate": 'Basic realm="voice-agent"'})  # fmt: skip
    if not (calls.ready and calls.pool.has_free):
        return Response(BUSY, media_type=TWIML)
    # Behind a TLS proxy the webhook arrives as https; the stream must then be wss.
    webhook = URL(public_url(request))
    path = "/twilio/stream"
    if token or api_key:
        path += "/" + _tickets(request).mint()
    url = f"{'wss' if webhook.scheme == 'https' else 'ws'}://{webhook.netloc}{path}"
    return Response(
        '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
        f"<Stream url={quoteattr(url)}/></Connect></Response>",
        media_type=TWIML,
    )


@router.websocket("/stream")
async def stream(websocket: WebSocket) -> None:
    await _serve(websocket, None)


@router.websocket("/stream/{ticket}")
async def stream_with_ticket(websocket: WebSocket, ticket: str) -> None:
    await _serve(websocket, ticket)


async def _serve(websocket: WebSocket, ticket: str | None) -> None:
    who = _admitted(websocket, ticket)
    if who is None:
        await websocket.close(POLICY_VIOLATION)  # before accepting: the handshake gets 403
        return
    await websocket.accept()
    try:
        await serve_media_stream(calls_of(websocket), websocket, who)
    except (SessionLimitReached, RateLimited) as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
    except NotReady as exc:
        await websocket.close(TRY_AGAIN_LATER, str(exc)[:120])


def _admitted(websocket: WebSocket, ticket: str | None) -> Caller | None:
    """Who opens this stream (None: refused). Every credential configured is checked;
    a stream that passes them comes from the carrier, which carries many callers."""
    settings = runtime_of(websocket).settings
    token, api_key = settings.twilio.auth_token, settings.server.api_key
    if not (token or api_key):
        return caller(websocket, with_server_key=False)
    if api_key and key_matches(api_key, bearer_token(websocket.headers.get("authorization"))):
        return caller(websocket, with_server_key=True)
    if token and not signed(token, public_url(websocket), [],
                            websocket.headers.get("x-twilio-signature")):  # fmt: skip
        log.warning("refused a media stream: bad or missing X-Twilio-Signature")
        return None
    if ticket is None or not _tickets(websocket).take(ticket):
        log.warning("refused a media stream: %s", "an unknown, used or expired ticket"
                    if ticket else "no ticket or API key")  # fmt: skip
        return None
    return caller(websocket, with_server_key=True)


def _tickets(connection: HTTPConnection) -> StreamTickets:
    tickets: StreamTickets = connection.app.state.stream_tickets
    return tickets


def _key_of(request: Request) -> str | None:
    """The key a webhook request brings: a Bearer, or the password of Basic auth."""
    authorization = request.headers.get("authorization") or ""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return bearer_token(authorization)
    try:
        return base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
    except (binascii.Error, UnicodeDecodeError):
        return None


def public_url(connection: HTTPConnection) -> str:
    """The URL the carrier used: behind a TLS proxy (one in limits.trusted_proxies), its
    scheme and host, as forwarded; from anyone else those headers are ignored."""
    url, headers = connection.url, connection.headers
    peer = connection.client.host if connection.client else ""
    scheme, host = url.scheme, headers.get("host", url.netloc)
    if connection.app.state.client_addresses.is_proxy(peer):
        scheme = headers.get("x-forwarded-proto", scheme)
        host = headers.get("x-forwarded-host", host)
    if url.scheme in ("ws", "wss"):
        scheme = {"https": "wss", "http": "ws"}.get(scheme, scheme)
    return str(url.replace(scheme=scheme, netloc=host))


def signed(token: str, url: str, fields: list[tuple[str, str]], signature: str | None) -> bool:
    """Twilio's request signature: base64 HMAC-SHA1 of the URL, then each form field's name
    and value, sorted by name."""
    payload = url + "".join(name + value for name, value in fields)
    digest = hmac.new(token.encode(), payload.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(base64.b64encode(digest).decode(), signature or "")
