"""Phone calls through Twilio (or a carrier that speaks its Media Streams protocol).

POST /twilio/voice is the number's voice webhook: it answers with TwiML that connects the
call's audio to our stream WebSocket, or rejects the call as busy when no slot is free.
/twilio/stream is that WebSocket. With twilio.auth_token set, both must be signed by
Twilio (X-Twilio-Signature: HMAC-SHA1 of the URL and the sorted form fields).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from xml.sax.saxutils import quoteattr

from fastapi import APIRouter, Request, Response, WebSocket
from starlette.datastructures import URL, Headers

from app.api.realtime_ws import POLICY_VIOLATION, TRY_AGAIN_LATER
from app.api.signalling import calls_of
from app.errors import NotReady, SessionLimitReached

router = APIRouter(prefix="/twilio")

TWIML = "application/xml"


@router.post("/voice")
async def voice(request: Request) -> Response:
    calls = calls_of(request)
    token = calls.settings.twilio.auth_token
    if token:
        form = await request.form()
        fields = sorted((key, str(value)) for key, value in form.multi_items())
        url = public_url(request.url, request.headers)
        if not signed(token, url, fields, request.headers.get("x-twilio-signature")):
            return Response("bad or missing X-Twilio-Signature", status_code=403)
    if not (calls.ready and calls.pool.has_free):
        return Response('<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/>'
                        "</Response>", media_type=TWIML)  # fmt: skip
    # Behind a TLS proxy the webhook arrives as https; the stream must then be wss.
    webhook = URL(public_url(request.url, request.headers))
    url = f"{'wss' if webhook.scheme == 'https' else 'ws'}://{webhook.netloc}/twilio/stream"
    return Response(
        '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
        f"<Stream url={quoteattr(url)}/></Connect></Response>",
        media_type=TWIML,
    )


@router.websocket("/stream")
async def stream(websocket: WebSocket) -> None:
    token = websocket.app.state.calls.settings.twilio.auth_token
    url = public_url(websocket.url, websocket.headers)
    if token and not signed(token, url, [], websocket.headers.get("x-twilio-signature")):
        await websocket.close(POLICY_VIOLATION)  # before accepting: the handshake gets 403
        return
    await websocket.accept()
    try:
        await websocket.app.state.calls.serve_media_stream(websocket)
    except SessionLimitReached as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
    except NotReady as exc:
        await websocket.close(TRY_AGAIN_LATER, str(exc)[:120])


def public_url(url: URL, headers: Headers) -> str:
    """The URL the carrier used: behind a TLS proxy, its scheme and host, as forwarded."""
    scheme = headers.get("x-forwarded-proto", url.scheme)
    if url.scheme in ("ws", "wss"):
        scheme = {"https": "wss", "http": "ws"}.get(scheme, scheme)
    host = headers.get("x-forwarded-host", headers.get("host", url.netloc))
    return str(url.replace(scheme=scheme, netloc=host))


def signed(token: str, url: str, fields: list[tuple[str, str]], signature: str | None) -> bool:
    """Twilio's request signature: base64 HMAC-SHA1 of the URL, then each form field's name
    and value, sorted by name."""
    payload = url + "".join(name + value for name, value in fields)
    digest = hmac.new(token.encode(), payload.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(base64.b64encode(digest).decode(), signature or "")
