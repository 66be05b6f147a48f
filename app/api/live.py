"""OpenAI's Live API, as the openai SDK's `client.live` calls it: at /v1/live/sessions
(its base URL ending in /v1, as for Realtime) and at /live/sessions (app/main.py mounts
these routes under both).

- POST /live/sessions `{session, transport: {type: "webrtc", sdp}}` answers a WebRTC
  offer: `{session: {id}, transport: {type: "webrtc", sdp}}`; the data channel then
  speaks Live's events.
- WebSocket /live/sessions: the client sends session.start first and waits for
  session.started; the audio is in the events.
- WebSocket /live/sessions/{id}/attach: a sideband controller of a Live session, for
  the server's key only.
- POST /live/sessions/{id}/hangup ends one.
"""

from __future__ import annotations

import asyncio
from typing import Literal, TypeVar

from fastapi import APIRouter, Depends, Request, Response, WebSocket
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.websockets import WebSocketDisconnect

from app.api.auth import (
    caller_of,
    chosen_subprotocol,
    require_admin,
    require_key,
    require_key_to_end,
)
from app.api.bodies import read_limited
from app.api.callers import caller, caller_of_request
from app.api.deps import Calls, calls_of
from app.api.errors import error_body, validation_problems
from app.api.sidebands import serve_sideband
from app.api.signalling import secret_changes
from app.api.sockets import POLICY_VIOLATION, admit, refuse, refusing
from app.calls.call import CallConfig
from app.calls.incoming import Accepted, Rejected
from app.calls.live import changes_of, live_guest, open_live_webrtc, serve_live_websocket
from app.calls.manager import CallManager
from app.calls.phone import transfer
from app.errors import BadRequest
from app.events.channel import as_json, decode
from app.ids import shown
from app.live import client_events as cmd
from app.live import server_events as events
from app.live.dialect import LiveDialect
from app.live.session_config import SessionConfig, StartProblem, audio_format
from app.rtc.sdp import MAX_SDP_BYTES

router = APIRouter(prefix="/live/sessions")

MAX_CREATE_BYTES = MAX_SDP_BYTES + 512 * 1024  # the offer, and a config with its history
NOT_YET = ("fork",)


class WebRtcTransport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["webrtc"]
    sdp: str = Field(min_length=1, max_length=MAX_SDP_BYTES)


class CreateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session: SessionConfig
    transport: WebRtcTransport


@router.post("", dependencies=[Depends(require_key)])
async def create(request: Request, calls: Calls) -> JSONResponse:
    """Answer a Live WebRTC offer. 400 bad SDP or session, 401 bad key, 413 too large,
    503 pool full (Retry-After) or not ready."""
    body = await _body(request, CreateRequest)
    answer, session_id = await open_live_webrtc(
        calls,
        body.transport.sdp,
        body.session,
        secret_changes(request),
        owner=caller_of(request),
        caller=caller_of_request(request),
    )
    return JSONResponse(
        {"session": {"id": session_id}, "transport": {"type": "webrtc", "sdp": answer}}
    )


@router.post("/{session_id}/hangup", dependencies=[Depends(require_key_to_end)])
async def hang_up(session_id: str, request: Request, calls: Calls) -> Response:
    if not await calls.hang_up(session_id, caller_of(request)):
        return JSONResponse(
            error_body("invalid_request_error", f"no session {shown(session_id)}"), status_code=404
        )
    return Response(status_code=200)


class AcceptRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session: SessionConfig


class RejectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status_code: int = Field(ge=400, le=699)


@router.post("/{session_id}/accept", dependencies=[Depends(require_admin)])
async def accept(session_id: str, request: Request, calls: Calls) -> Response:
    """Answer a ringing phone call (from the live.transport.incoming webhook) as a Live
    session with this config. 400 a config it cannot take, 404 no such call ringing."""
    body = await _body(request, AcceptRequest)
    try:
        changes_of(calls, body.session)
    except StartProblem as exc:
        raise BadRequest(f"{exc.param}: {exc}") from None
    calls.incoming.decide(session_id, Accepted(body.session))
    return Response(status_code=200)


@router.post("/{session_id}/reject", dependencies=[Depends(require_admin)])
async def reject(session_id: str, request: Request, calls: Calls) -> Response:
    """Turn a ringing phone call away with a SIP status (400-699)."""
    body = await _body(request, RejectRequest)
    calls.incoming.decide(session_id, Rejected(body.status_code))
    return Response(status_code=200)


Model = TypeVar("Model", bound=BaseModel)


class ReferRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    target_uri: str = Field(min_length=1, max_length=256)


@router.post("/{session_id}/refer", dependencies=[Depends(require_admin)])
async def refer(session_id: str, request: Request, calls: Calls) -> Response:
    """Transfer a SIP call (REFER): 200 once the caller's side has taken it; 400 a bad
    target, 404 no such SIP call, 502 the caller's side refused or did not answer."""
    body = await _body(request, ReferRequest)
    await transfer(calls, session_id, body.target_uri)
    return Response(status_code=200)


async def _body(request: Request, model: type[Model]) -> Model:
    raw = await read_limited(request, MAX_CREATE_BYTES)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise BadRequest(validation_problems(exc)) from None


@router.post("/{session_id}/{action}", dependencies=[Depends(require_key)])
async def not_yet(session_id: str, action: str) -> JSONResponse:
    """Session controls this server does not offer yet: said plainly, not a bare 404."""
    if action not in NOT_YET:
        return JSONResponse(error_body("invalid_request_error", "no such route"), status_code=404)
    return JSONResponse(
        error_body("invalid_request_error", f"{action} is not supported by this server yet"),
        status_code=501,
    )


@router.get("/{session_id}/content", dependencies=[Depends(require_admin)], response_model=None)
async def recording(session_id: str, calls: Calls) -> FileResponse | JSONResponse:
    """An ended session's recording (stereo WAV: the caller left, the agent right), while
    it is kept; 404 otherwise."""
    store = calls.recordings
    path = store.find(session_id)
    if path is None:
        refused = store.refusal(session_id)
        if refused is not None:
            why = f"the recording of session {shown(session_id)} was not kept: {refused}"
        elif store.on:
            why = f"no recording of session {shown(session_id)}"
        else:
            why = f"this server keeps no recordings: session {shown(session_id)}"
        return JSONResponse(error_body("invalid_request_error", why), status_code=404)
    return FileResponse(path, media_type="audio/wav", filename=f"{session_id}.wav")


@router.websocket("")
async def live_socket(websocket: WebSocket) -> None:
    """A Live session over the socket, once the client's session.start is taken."""
    calls = calls_of(websocket)
    admitted = await admit(websocket)
    if admitted is None:
        return
    await websocket.accept(subprotocol=chosen_subprotocol(websocket))
    secret = admitted.secret
    changes = [secret.changes] if secret is not None and secret.changes is not None else []
    started = await _session_start(websocket, calls)
    if started is None:
        return
    config, changed, started_by = started
    with_key = bool(calls.settings.server.api_key) and secret is None
    who = caller(websocket, with_server_key=with_key)
    run = serve_live_websocket(
        calls, websocket, config, [*changes, changed], started_by, owner=secret, caller=who
    )
    await refusing(websocket, run, _error)


@router.websocket("/{session_id}/attach")
async def attach(websocket: WebSocket, session_id: str) -> None:
    """A sideband controller of a Live session (WebRTC, WebSocket or SIP): it hears the
    session's events and may send its own."""
    guest = live_guest(calls_of(websocket))
    await serve_sideband(websocket, session_id, LiveDialect, guest, _error, "session_not_found")


async def _session_start(
    websocket: WebSocket, calls: CallManager
) -> tuple[SessionConfig, CallConfig, str | None] | None:
    """Wait for a usable session.start; anything else first is answered with an error.
    None: the client left, or sent none in time (its socket is closed)."""
    limits, timeout_s = calls.settings.limits, calls.settings.pool.connect_timeout_s
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                data = await websocket.receive_text()
                started, problem = _start_of(data, limits.ws_message_bytes, calls)
                if problem is None:
                    return started
                await websocket.send_text(as_json(problem))
    except TimeoutError:
        message = f"no session.start within {timeout_s:g} s"
        await refuse(websocket, events.error(message, "session_not_started"), POLICY_VIOLATION,
                     message)  # fmt: skip
    except (WebSocketDisconnect, RuntimeError, KeyError):
        pass  # gone, or it sent bytes
    return None


def _start_of(
    data: str, max_bytes: int, calls: CallManager
) -> tuple[tuple[SessionConfig, CallConfig, str | None], None] | tuple[None, dict[str, object]]:
    event, problem = decode(data, max_bytes)
    if problem is not None:
        return None, events.error(problem[1], problem[0])
    assert event is not None
    event_id = cmd.event_id_of(event)
    try:
        command = cmd.parse(event)
        if not isinstance(command, cmd.Start):
            raise cmd.BadEvent(
                f"{command.type} before session.start: send session.start first, and wait "
                "for session.started",
                "session_not_started",
            )
        audio_format(command.session)
        return (command.session, changes_of(calls, command.session), event_id), None
    except cmd.BadEvent as exc:
        return None, events.error(str(exc), exc.code, param=exc.param, client_event_id=event_id)
    except StartProblem as exc:
        return None, events.error(
            str(exc), "invalid_value", param=exc.param, client_event_id=event_id
        )


def _error(type_: str, code: str, message: str) -> dict[str, object]:
    return events.error(message, code, type_=type_)
