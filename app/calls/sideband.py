"""Sideband control: a server-side controller joins a live call's events over a WebSocket
of its own: Realtime's (GET /v1/realtime?call_id=) or Live's (/live/sessions/{id}/attach)."""

from __future__ import annotations

import asyncio

from starlette.websockets import WebSocket

from app.calls.call import EventDialect
from app.calls.manager import CallManager
from app.errors import NotFound
from app.realtime.dialect import RealtimeDialect
from app.ws.transport import WsTransport


async def control(
    calls: CallManager,
    call_id: str,
    websocket: WebSocket,
    speaking: type[EventDialect] = RealtimeDialect,
) -> None:
    """The controller on an accepted WebSocket hears the call's events and sends its own,
    until it leaves or the call ends.

    Takes no slot: the call has one. Raises NotFound for an unknown call, or one whose
    dialect is not `speaking`.
    """
    call = calls.find(call_id)
    if call is None or not isinstance(call.dialect, speaking):
        raise NotFound(f"no call {call_id!r} to control")
    dialect, supervisor = call.dialect, call.supervisor
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
        await controller.close()
