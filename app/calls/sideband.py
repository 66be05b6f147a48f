"""Sideband control: a server-side controller joins a live call's events over a WebSocket
of its own: Realtime's (GET /v1/realtime?call_id=) or Live's (/live/sessions/{id}/attach).

A controller speaking the call's own dialect watches it; one speaking the other joins
the call's audience as a guest dialect of its own, so any call (WebRTC, WebSocket or
SIP) can be controlled in either."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.websockets import WebSocket

from app.calls.call import Call, EventDialect
from app.calls.manager import CallManager
from app.errors import NotFound
from app.ws.transport import WsTransport

# Makes the dialect a controller speaks, as a guest of a call that speaks another.
Guest = Callable[[Call], EventDialect]


async def control(
    calls: CallManager,
    call_id: str,
    websocket: WebSocket,
    speaking: type[EventDialect],
    guest: Guest,
) -> None:
    """The controller on an accepted WebSocket hears the call's events and sends its own,
    until it leaves or the call ends.

    Takes no slot: the call has one. Raises NotFound for an unknown call.
    """
    call = calls.find(call_id)
    if call is None or call.audience is None:
        raise NotFound(f"no call {call_id!r} to control")
    audience, supervisor = call.audience, call.supervisor
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
