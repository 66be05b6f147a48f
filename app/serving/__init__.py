"""The server's own HTTP and WebSocket layers: uvicorn's h11 and websockets protocols,
bounded against what a client on the open network can do before any route sees it
(docs/guides/hardening.md)."""

from __future__ import annotations

from app.api.callers import ClientAddresses
from app.config import LimitsSettings
from app.serving.connections import ConnectionLimits
from app.serving.http import BoundedHttp
from app.serving.websocket import BoundedWebSocket


def protocols(limits: LimitsSettings) -> tuple[type[BoundedHttp], type[BoundedWebSocket]]:
    """The HTTP and WebSocket protocol classes for one server (uvicorn.Config's http and
    ws), sharing one count of open connections."""
    connections = ConnectionLimits(
        limits.connections, limits.address_connections, ClientAddresses(limits).is_proxy
    )
    http = type(
        "Http",
        (BoundedHttp,),
        {"connection_limits": connections, "request_s": limits.request_s},
    )
    ws = type(
        "WebSocket",
        (BoundedWebSocket,),
        {
            "connection_limits": connections,
            "frames_per_s": limits.ws_frames_per_s,
            "json_nodes_per_s": limits.ws_json_per_s,
        },
    )
    return http, ws
