"""Sideband control: a server-side controller joins a live call's events over a WebSocket
of its own: Realtime's (GET /v1/realtime?call_id=) or Live's (/live/sessions/{id}/attach).

A controller speaking the call's own dialect watches it; one speaking the other joins
the call's audience as a guest dialect of its own, so any call (WebRTC, WebSocket or
SIP) can be controlled in either."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.websockets import WebSocket

from app.calls.admission import Caller
from app.calls.call import Call, EventDialect
from app.calls.manager import CallManager
from app.errors import NotFound
from app.ids import shown
from app.ws.transport import WsTransport

# Makes the dialect a controller speaks, as a guest of a call that speaks another.
Guest = Callable[[Call], EventDialect]


async def control(
    calls: CallManager,
    call_id: str,
    websocket: WebSocket,
    speaking: type[EventDialect],
    guest: Guest,
    caller: Caller,
) -> None:
    """The controller on an accepted WebSocket hears the call's events and sends its own,
    until it leaves or the call ends.

    Takes no slot: the call has one, but a seat of the few a call and an address may hold
    (limits.call_sidebands, address_sidebands). Raises NotFound for an unknown call,
    SidebandLimitReached for no seat.
    """
    call = calls.find(call_id)
    if call is None or call.audience is None:
        raise NotFound(f"no call {shown(call_id)} to control")
    address = caller.address if calls.limits_apply(caller) else None
    with calls.sidebands.seat(call_id, address):
        await _control(calls, call, websocket, speaking, guest)


async def _control(
    calls: CallManager,
    call: Call,
    websocket: WebSocket,
    speaking: type[EventDialect],
    guest: Guest,
) -> None:
    call_id = call.session.id
    audience, supervisor = call.audience, call.supervisor
    assert audience is not None
    joined: EventDialect | None = None
    if isinstance(call.dialect, speaking):
        dialect = call.dialect
    else:
        dialect = joined = guest(call)
        dialect.attach(call.session)
        audience.join(dialect)
    controller = WsTransport(
        websocket,
        f"{call_id}:sideband",
        max_message_bytes=calls.settings.limits.ws_message_bytes,
    )
    dialect.watch(controller)
    controller.start(lambda data: dialect.receive_in_steps(data, controller))
    left = asyncio.create_task(controller.ended.wait(), name=f"{call_id}:sideband-wait")
    try:
        await asyncio.wait(
            [t for t in (left, supervisor) if t is not None], return_when="FIRST_COMPLETED"
        )
        await controller.flush(timeout_s=0.5)  # the call's last event, if it ended
    finally:
        left.cancel()
        dialect.unwatch(controller)
        if joined is not None:
            audience.leave(joined)
        await controller.close()
