"""Our address as a SIP peer sees it: for SDP, Contact and Via."""

from __future__ import annotations

import socket


def host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def local_address(remote: str, bound: str) -> str:
    """The address of ours that `remote` reaches: where we are bound, or the interface
    the route to it leaves by."""
    if bound not in ("", "0.0.0.0", "::"):
        return bound
    family = socket.AF_INET6 if ":" in remote else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((remote, 9))  # no packet is sent: this only picks the route
        return str(probe.getsockname()[0])
