"""OpenAI Realtime's WebRTC call endpoints, as the official SDKs call them.

POST /v1/realtime/calls takes a raw SDP offer (application/sdp) or multipart
form data with `sdp` and an optional `session` (JSON config, applied before the
call starts), and answers 201 with the SDP answer and the call's Location.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from app.api.auth import caller_of, require_key, require_key_to_end
from app.api.bodies import read_limited
from app.api.callers import caller_of_request
from app.api.deps import Calls
from app.api.errors import error_body
from app.api.signalling import secret_changes
from app.calls.call import CallConfig, refused_as_signalling
from app.calls.webrtc import open_webrtc
from app.errors import SignallingError
from app.ids import shown
from app.realtime.session_config import SessionConfig, to_changes
from app.rtc.sdp import MAX_SDP_BYTES

router = APIRouter(prefix="/v1/realtime")


@router.post(
    "/calls", status_code=201, response_class=Response, dependencies=[Depends(require_key)]
)
async def create_call(request: Request, calls: Calls) -> Response:
    """Answer an offer. 400 bad SDP or session, 401 bad key, 503 pool full or not ready."""
    sdp, session = await _offer_of(request)
    changes = [*secret_changes(request), *([session] if session is not None else [])]
    answer, session_id = await open_webrtc(
        calls, sdp, changes, owner=caller_of(request), caller=caller_of_request(request)
    )
    return Response(
        answer,
        status_code=201,
        media_type="application/sdp",
        headers={"Location": f"/v1/realtime/calls/{session_id}"},
    )


@router.post("/calls/{call_id}/hangup", dependencies=[Depends(require_key_to_end)])
async def hang_up(call_id: str, request: Request, calls: Calls) -> Response:
    return await _end(call_id, request, calls)


@router.delete("/calls/{call_id}", dependencies=[Depends(require_key_to_end)])
async def delete_call(call_id: str, request: Request, calls: Calls) -> Response:
    return await _end(call_id, request, calls)


async def _end(call_id: str, request: Request, calls: Calls) -> Response:
    if not await calls.hang_up(call_id, caller_of(request)):
        return JSONResponse(
            error_body("invalid_request_error", f"no call {shown(call_id)}"), status_code=404
        )
    return Response(status_code=200)


async def _offer_of(request: Request) -> tuple[str, CallConfig | None]:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/sdp"):
        offer = await read_limited(request, MAX_SDP_BYTES)
        return offer.decode("utf-8", errors="replace"), None
    if not content_type.startswith("multipart/form-data"):
        raise SignallingError(
            "send the offer as application/sdp, or as multipart/form-data with an 'sdp' field"
        )
    form = await request.form()
    sdp, session = form.get("sdp"), form.get("session")
    if sdp is None:
        raise SignallingError("the form has no 'sdp' field")
    sdp_text = await _text_of(sdp, "sdp")
    if session is None:
        return sdp_text, None
    raw = await _text_of(session, "session")
    try:
        config = SessionConfig.model_validate_json(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise SignallingError(
            f"the 'session' field is not a valid session object: {where or 'session'}: "
            f"{problem['msg']}"
        ) from exc
    with refused_as_signalling():
        return sdp_text, to_changes(config)


async def _text_of(part: UploadFile | str, name: str) -> str:
    if isinstance(part, str):
        return part
    try:
        return (await part.read()).decode()
    except UnicodeDecodeError:
        raise SignallingError(f"the '{name}' field is not UTF-8 text") from None
