"""Who is making a call over HTTP or a WebSocket, as its admission counts it: the peer's
address, or behind a trusted proxy the client it forwards for; and whether the call came
with the server's own API key, which vouches for it (app/calls/admission.py)."""

from __future__ import annotations

import ipaddress

from starlette.requests import HTTPConnection, Request

from app.api.auth import caller_of
from app.api.deps import runtime_of
from app.calls.admission import Caller, client_key
from app.config import LimitsSettings


class ClientAddresses:
    def __init__(self, limits: LimitsSettings) -> None:
        self._proxies = [ipaddress.ip_network(n, strict=False) for n in limits.trusted_proxies]

    def of(self, connection: HTTPConnection) -> str:
        """The peer, or behind a trusted proxy the last address that X-Forwarded-For
        names that is not one of the proxies."""
        peer = connection.client.host if connection.client else ""
        if not self.is_proxy(peer):
            return peer
        # Every X-Forwarded-For line, in order: a proxy (HAProxy's option forwardfor) adds
        # a line of its own after whatever the client wrote, so the first line is the
        # client's to forge, and only the hops nearest us are the proxies' word.
        forwarded = ",".join(connection.headers.getlist("x-forwarded-for"))
        hops = [hop.strip() for hop in forwarded.split(",")]
        return next((hop for hop in reversed(hops) if hop and not self.is_proxy(hop)), peer)

    def is_proxy(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._proxies)


def caller(connection: HTTPConnection, *, with_server_key: bool) -> Caller:
    """`with_server_key`: the call was authorized with the server's own key (one is set)."""
    addresses: ClientAddresses = connection.app.state.client_addresses
    return Caller(client_key(addresses.of(connection)), vouched=with_server_key)


def caller_of_request(request: Request) -> Caller:
    """Who makes a call with a request require_key has let through."""
    keyed = bool(runtime_of(request).settings.server.api_key)
    return caller(request, with_server_key=keyed and caller_of(request) is None)
