"""SDP offer/answer over HTTP."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, ValidationError

from app.api.auth import caller_of, require_key
from app.api.bodies import read_limited
from app.api.callers import caller_of_request
from app.api.deps import Calls
from app.api.errors import validation_problems
from app.calls.call import CallConfig
from app.calls.webrtc import open_webrtc
from app.errors import BadRequest
from app.rtc.sdp import MAX_SDP_BYTES

router = APIRouter()


class OfferRequest(BaseModel):
    sdp: str = Field(min_length=1, max_length=MAX_SDP_BYTES)
    type: Literal["offer"]


class AnswerResponse(BaseModel):
    sdp: str
    type: Literal["answer"] = "answer"
    session_id: str


def secret_changes(request: Request) -> list[CallConfig]:
    """The session config that came with the client secret the caller used, if any."""
    secret = getattr(request.state, "secret", None)
    return [secret.changes] if secret is not None and secret.changes is not None else []


@router.post(
    "/offer",
    response_model=AnswerResponse,
    dependencies=[Depends(require_key)],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": OfferRequest.model_json_schema()}},
        }
    },
)
async def offer(request: Request, calls: Calls) -> AnswerResponse:
    """Answer a WebRTC offer. 400 bad SDP, 401 bad key, 413 too large, 503 pool full
    (Retry-After) or not ready."""
    # Read here, after the key was checked, and no more than an offer can be.
    raw = await read_limited(request, MAX_SDP_BYTES * 2)
    try:
        body = OfferRequest.model_validate_json(raw)
    except ValidationError as exc:
        raise BadRequest(validation_problems(exc)) from None
    answer, session_id = await open_webrtc(
        calls,
        body.sdp,
        secret_changes(request),
        owner=caller_of(request),
        caller=caller_of_request(request),
    )
    return AnswerResponse(sdp=answer, session_id=session_id)
