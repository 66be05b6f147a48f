"""SDP offer/answer over HTTP."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from app.api.auth import require_key
from app.calls import CallManager
from app.session.options import OptionChanges

router = APIRouter()


class OfferRequest(BaseModel):
    sdp: str = Field(min_length=1, max_length=65536)
    type: Literal["offer"]


class AnswerResponse(BaseModel):
    sdp: str
    type: Literal["answer"] = "answer"
    session_id: str


def calls_of(request: Request) -> CallManager:
    manager: CallManager = request.app.state.calls
    return manager


def secret_changes(request: Request) -> list[OptionChanges]:
    """The session config that came with the client secret the caller used, if any."""
    secret = getattr(request.state, "secret", None)
    return [secret.changes] if secret is not None and secret.changes is not None else []


@router.post("/offer", response_model=AnswerResponse, dependencies=[Depends(require_key)])
async def offer(body: OfferRequest, request: Request) -> AnswerResponse:
    """Answer a WebRTC offer. 400 bad SDP, 503 pool full (Retry-After) or not ready."""
    answer, session_id = await calls_of(request).open_webrtc(body.sdp, secret_changes(request))
    return AnswerResponse(sdp=answer, session_id=session_id)
