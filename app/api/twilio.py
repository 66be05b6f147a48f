"""Phone calls through Twilio (or a carrier that speaks its Media Streams protocol).

POST /twilio/voice is the number's voice webhook: it answers with TwiML that connects the
call's audio to our stream WebSocket, or rejects the call as busy when no slot is free.
/twilio/stream is that WebSocket.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from fastapi import APIRouter, Request, Response, WebSocket

from app.api.realtime_ws import POLICY_VIOLATION, TRY_AGAIN_LATER
from app.api.signalling import calls_of
from app.errors import NotReady, SessionLimitReached

router = APIRouter(prefix="/twilio")

TWIML = "application/xml"


@router.post("/voice")
async def voice(request: Request) -> Response:
    calls = calls_of(request)
    if not (calls.ready and calls.pool.has_free):
        return Response('<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/>'
                        "</Response>", media_type=TWIML)  # fmt: skip
    # Behind a TLS proxy the webhook arrives as https; the stream must then be wss.
    secure = request.headers.get("x-forwarded-proto", request.url.scheme) == "https"
    host = request.headers.get("x-forwarded-host", request.headers.get("host", ""))
    url = f"{'wss' if secure else 'ws'}://{host}/twilio/stream"
    return Response(
        '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
        f"<Stream url={quoteattr(url)}/></Connect></Response>",
        media_type=TWIML,
    )


@router.websocket("/stream")
async def stream(websocket: WebSocket) -> None:
    await websocket.accept()
    try:
        await websocket.app.state.calls.serve_media_stream(websocket)
    except SessionLimitReached as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
    except NotReady as exc:
        await websocket.close(TRY_AGAIN_LATER, str(exc)[:120])
