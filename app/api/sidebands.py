"""A sideband socket, Realtime's (/v1/realtime?call_id=) or Live's (/live/sessions/{id}/
attach): the server's key only, a seat of the few a call and an address may hold, and an
error event in the route's own words for what cannot attach."""

from __future__ import annotations

from fastapi import WebSocket

from app.api.callers import caller
from app.api.deps import calls_of
from app.api.sockets import POLICY_VIOLATION, ErrorEvent, admit, refuse
from app.calls.call import EventDialect
from app.calls.sideband import Guest, control
from app.errors import NotFound, SidebandLimitReached


async def serve_sideband(
    websocket: WebSocket,
    call_id: str,
    speaking: type[EventDialect],
    guest: Guest,
    error: ErrorEvent,
    not_found: str,
    subprotocol: str | None = None,
) -> None:
    """`not_found`: the error code for a call that is not there."""
    admitted = await admit(websocket)
    if admitted is None:
        return
    if admitted.secret is not None:
        # A client secret is made for one call of its own: it never hears another's.
        await websocket.close(POLICY_VIOLATION, "a client secret cannot control a call")
        return
    await websocket.accept(subprotocol=subprotocol)
    calls = calls_of(websocket)
    who = caller(websocket, with_server_key=bool(calls.settings.server.api_key))
    try:
        await control(calls, call_id, websocket, speaking, guest, who)
    except NotFound as exc:
        await refuse(websocket, error("invalid_request_error", not_found, str(exc)),
                     POLICY_VIOLATION, str(exc))  # fmt: skip
    except SidebandLimitReached as exc:
        await refuse(websocket, error(exc.type, exc.code, str(exc)), POLICY_VIOLATION, str(exc))
