"""`python -m app` / `voice-agent`: parse settings, then serve."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Iterator, Sequence
from types import FrameType

import uvicorn
from pydantic import ValidationError

from app.calls.manager import CallManager
from app.logs import flush_logs

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def main(argv: Sequence[str] | None = None) -> int:
    from app.cli import settings_from_args

    try:
        settings = settings_from_args(argv)
    except ValidationError as exc:
        sys.stderr.write(f"invalid settings:\n{exc}\n")
        return 2

    from app.logs import configure_logging
    from app.main import create_app
    from app.serving import protocols

    configure_logging(settings.server.log_level)
    # Bound before anything loads: a port in use is one line, not a traceback after the
    # models have loaded for nothing.
    try:
        sock = listening_socket(settings.server.host, settings.server.port)
    except OSError as exc:
        sys.stderr.write(
            f"cannot listen on {settings.server.host}:{settings.server.port}: "
            f"{exc.strerror or exc}; choose another port with --port "
            "(make run PORT=...) or VOICE_SERVER__PORT\n"
        )
        return 1
    logging.getLogger(__name__).info(
        "listening on %s:%d (agent=%s, max_sessions=%d); loading the models",
        settings.server.host,
        settings.server.port,
        settings.agent,
        settings.pool.max_sessions,
    )
    if not settings.server.api_key and settings.server.host not in LOOPBACK:
        logging.getLogger(__name__).warning(
            "no API key set (--server-api-key) while listening on %s: anyone who reaches "
            "this port can make calls, list them in /v1/pool and end them",
            settings.server.host,
        )
    app = create_app(settings)
    http, ws = protocols(settings.limits)
    config = uvicorn.Config(
        app,
        http=http,
        ws=ws,
        h11_max_incomplete_event_size=settings.limits.request_head_bytes,
        timeout_keep_alive=settings.limits.keep_alive_s,
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,
        loop=settings.server.event_loop,
        # Who the client is behind a proxy is limits.trusted_proxies' to say, not uvicorn's
        # (which would trust X-Forwarded-For from 127.0.0.1 by default).
        proxy_headers=False,
        # A WebSocket message up to the app's own limit reaches it, to be answered there.
        ws_max_size=settings.limits.ws_message_bytes + 1024,
        # No permessage-deflate: audio in base64 hardly compresses, and inflating a client's
        # messages ran on the event loop (a few 4 MiB appends stalled it 3 s).
        ws_per_message_deflate=False,
        timeout_graceful_shutdown=3,
    )
    DrainingServer(config, app.state.calls).run(sockets=[sock])
    return 0


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` and listening, as uvicorn would make it."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


class DrainingServer(uvicorn.Server):
    """On SIGTERM/SIGINT, end the calls first (offers get 503 meanwhile), then stop serving.

    uvicorn alone would stop listening at once: clients would see refused
    connections instead of a 503, and sessions no final event.
    """

    def __init__(self, config: uvicorn.Config, calls: CallManager) -> None:
        super().__init__(config)
        self._calls = calls
        self._draining: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None:  # a second signal: stop now
            super().handle_exit(sig, frame)
            return
        logging.getLogger(__name__).info("signal %d: ending calls, then stopping", sig)
        self._draining = asyncio.get_running_loop().create_task(self._drain(sig, frame))

    async def _drain(self, sig: int, frame: FrameType | None) -> None:
        try:
            await self._calls.shutdown()
        finally:
            super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, with the log written out before it re-raises a signal it caught:
        that ends the process at once, and what the log's thread still held would be
        lost (app/logs.py)."""
        with super().capture_signals():
            try:
                yield
            finally:
                flush_logs()


if __name__ == "__main__":
    sys.exit(main())
