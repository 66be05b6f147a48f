"""The FastAPI app: engines load once in the lifespan, routes share one CallManager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from app.api import (
    client_secrets,
    errors,
    health,
    live,
    realtime_calls,
    realtime_ws,
    signalling,
    twilio,
    whip,
)
from app.api.body_limit import BodyLimit
from app.api.callers import ClientAddresses
from app.api.client_secrets import PAGE_MINT_BURST, PAGE_MINTS_PER_MINUTE
from app.api.hosts import HostGuard
from app.api.origins import OriginGuard
from app.api.page import PageFiles
from app.api.secret_store import ClientSecrets
from app.api.stream_tickets import StreamTickets
from app.calls.admission import RateLimit
from app.calls.manager import CallManager
from app.calls.phone import SipCalls
from app.config import Settings, get_settings
from app.rtc import patches
from app.runtime import Runtime
from app.telephony.sip.server import SipServer

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    patches.apply()  # aiortc, for gateways with RSA certificates as well as browsers
    runtime = Runtime(settings)
    calls = CallManager(runtime)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = type(asyncio.get_running_loop())
        log.info("event loop: %s.%s", loop.__module__, loop.__qualname__)
        calls.recordings.start()
        # Load in the background so /healthz can report "loading" meanwhile.
        loading = asyncio.create_task(runtime.load(), name="engines:load")
        sip = (
            SipServer(settings.sip, SipCalls(calls), settings.server.host)
            if settings.sip.port
            else None
        )
        if sip is not None:
            await sip.start()  # answers 503 until the engines are loaded
        try:
            yield
        finally:
            loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loading
            await calls.shutdown()  # hangs up SIP calls too: their BYEs go out here
            if sip is not None:
                await sip.aclose()

    # With a key set, the API's own description is not for everyone either.
    keyed = bool(settings.server.api_key)
    app = FastAPI(
        title="voice-agent",
        lifespan=lifespan,
        docs_url=None if keyed else "/docs",
        redoc_url=None if keyed else "/redoc",
        openapi_url=None if keyed else "/openapi.json",
    )
    app.add_middleware(BodyLimit, limit=settings.limits.body_bytes)
    app.add_middleware(OriginGuard, allowed=settings.server.allowed_origins)
    if settings.server.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.allowed_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["authorization", "content-type", "if-match"],
            expose_headers=["location", "etag", "link", "retry-after"],
        )
    app.add_middleware(HostGuard, allowed=settings.server.allowed_hosts)  # added last: first
    app.state.runtime = runtime
    app.state.calls = calls
    app.state.client_secrets = ClientSecrets(retire_s=settings.pool.max_session_s)
    app.state.client_addresses = ClientAddresses(settings.limits)
    app.state.stream_tickets = StreamTickets(settings.twilio.auth_token, settings.server.api_key)
    app.state.page_mints = RateLimit(PAGE_MINTS_PER_MINUTE, PAGE_MINT_BURST, "page client secrets")
    errors.install(app)
    app.include_router(signalling.router)
    app.include_router(realtime_calls.router)
    app.include_router(realtime_ws.router)
    # The openai SDK reaches Live at its base URL + /live/sessions: /v1/live/sessions with
    # the base URL Realtime needs. The bare paths stay for clients written before.
    app.include_router(live.router, prefix="/v1")
    app.include_router(live.router, include_in_schema=False)
    app.include_router(client_secrets.router)
    app.include_router(health.router)
    app.include_router(twilio.router)
    app.include_router(whip.router)
    if STATIC_DIR.is_dir():
        app.mount("/", PageFiles(str(STATIC_DIR), app.router.routes), name="static")
    return app
