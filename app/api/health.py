"""Health, readiness and pool state for operators and load balancers."""

from __future__ import annotations

import asyncio
from typing import Any

import psutil
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.auth import authorize, bearer_token, require_admin
from app.api.signalling import calls_of
from app.errors import Unauthorized

router = APIRouter()


@router.api_route("/healthz", methods=["GET", "HEAD"])
async def healthz(request: Request) -> JSONResponse:
    """200 once the engines are loaded and working; 503 while loading, or while an
    engine's last calls failed in a row (app/observability/health.py)."""
    calls = calls_of(request)
    if calls.responder is None:
        state = "failed" if calls.load_error else "loading"
        return JSONResponse({"status": state, "error": calls.load_error}, status_code=503)
    engines = calls.health.snapshot()
    if calls.health.failing:
        # 503 for monitors; /readyz still lets calls in, and they find the engine back.
        body = {"status": "degraded", "agent": calls.settings.agent, "engines": engines}
        return JSONResponse(body, status_code=503)
    return JSONResponse({"status": "ok", "agent": calls.settings.agent, "engines": engines})


@router.api_route("/readyz", methods=["GET", "HEAD"])
async def readyz(request: Request) -> JSONResponse:
    """200 only while a new call would be accepted."""
    calls = calls_of(request)
    ready = calls.ready and calls.pool.has_free
    return JSONResponse({"ready": ready}, status_code=200 if ready else 503)


@router.get("/v1/pool", dependencies=[Depends(require_admin)])
async def pool(request: Request) -> dict[str, Any]:
    return calls_of(request).pool.snapshot()


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus exposition (app/observability/metrics.py)."""
    calls = calls_of(request)
    server = calls.settings.server
    if server.metrics_need_key:
        await require_admin(request)
    return Response(calls.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/usage", dependencies=[Depends(require_admin)])
async def usage(request: Request) -> dict[str, object]:
    """Audio in and out, turns, replies and LLM tokens: per session (live ones and the
    last ended ones) and in total since the start."""
    return calls_of(request).usage_report()


@router.get("/v1/stats", dependencies=[Depends(require_admin)])
async def stats(request: Request) -> dict[str, Any]:
    """Process gauges for leak checks and dashboards."""
    process = psutil.Process()
    return {
        "calls": calls_of(request).active_calls,
        "asyncio_tasks": len(asyncio.all_tasks()),
        "threads": process.num_threads(),
        "open_fds": process.num_fds(),
        "rss_mb": round(process.memory_info().rss / 2**20, 1),
        "speculation": calls_of(request).speculation.snapshot(),
        "interruptions": calls_of(request).interruptions.snapshot(),
    }


@router.get("/v1/config")
async def client_config(request: Request) -> dict[str, Any]:
    """What the page needs: ICE servers, the pool size, and the defaults its settings
    panel starts from (voices to choose from once the engines are loaded)."""
    calls = calls_of(request)
    settings = calls.settings
    voices = calls.responder.voices if calls.responder is not None else ()
    return {
        "ice_servers": settings.server.ice_config(),
        "max_sessions": settings.pool.max_sessions,
        "voice": settings.tts.voice,
        "voices": list(voices or [settings.tts.voice]),
        "speed": settings.tts.speed,
        # The system prompt is the operator's: with a key set, only for those holding one.
        **({"instructions": settings.llm.system_prompt} if _may_read_prompt(request) else {}),
        "turn": {
            "detection": settings.turn.detection,
            "eagerness": settings.turn.eagerness,
            "semantic_vad": calls.turn_model is not None,
        },
        "vad": {
            "silence_ms": settings.vad.silence_ms,
            "interrupt_response": settings.vad.interrupt_response,
            "interrupt_min_speech_ms": settings.vad.interrupt_min_speech_ms,
            "interrupt_mode": settings.vad.interrupt_mode,
            "resume_window_ms": settings.vad.resume_window_ms,
        },
    }


def _may_read_prompt(request: Request) -> bool:
    calls = calls_of(request)
    token = bearer_token(request.headers.get("authorization"))
    try:
        authorize(token, calls.settings.server.api_key, request.app.state.client_secrets)
    except Unauthorized:
        return False
    return True
