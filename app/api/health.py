"""Health, readiness and pool state for operators and load balancers."""

from __future__ import annotations

import asyncio
from typing import Any

import psutil
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.auth import authorize, bearer_token, require_admin
from app.api.deps import Calls, Shared
from app.errors import Unauthorized

router = APIRouter()


@router.api_route("/healthz", methods=["GET", "HEAD"])
async def healthz(runtime: Shared) -> JSONResponse:
    """200 once the engines are loaded and working; 503 while loading, or while an
    engine's last calls failed in a row (app/observability/health.py)."""
    if runtime.responder is None:
        state = "failed" if runtime.load_error else "loading"
        return JSONResponse({"status": state, "error": runtime.load_error}, status_code=503)
    body = {"agent": runtime.settings.agent, "vad": runtime.vad, "models": runtime.models()}
    engines = runtime.health.snapshot()
    if runtime.health.failing:
        # 503 for monitors; /readyz still lets calls in, and they find the engine back.
        return JSONResponse({"status": "degraded", **body, "engines": engines}, status_code=503)
    return JSONResponse({"status": "ok", **body, "engines": engines})


@router.api_route("/readyz", methods=["GET", "HEAD"])
async def readyz(calls: Calls) -> JSONResponse:
    """200 only while a new call would be accepted."""
    ready = calls.ready and calls.pool.has_free
    return JSONResponse({"ready": ready}, status_code=200 if ready else 503)


@router.get("/v1/pool", dependencies=[Depends(require_admin)])
async def pool(calls: Calls) -> dict[str, Any]:
    return calls.pool.snapshot()


@router.get("/metrics")
async def metrics(request: Request, runtime: Shared) -> Response:
    """Prometheus exposition (app/observability/metrics.py)."""
    if runtime.settings.server.metrics_need_key:
        await require_admin(request)
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/usage", dependencies=[Depends(require_admin)])
async def usage(calls: Calls) -> dict[str, object]:
    """Audio in and out, turns, replies and LLM tokens: per session (live ones and the
    last ended ones) and in total since the start."""
    return calls.usage_report()


@router.get("/v1/stats", dependencies=[Depends(require_admin)])
async def stats(calls: Calls) -> dict[str, Any]:
    """Process gauges for leak checks and dashboards."""
    process = psutil.Process()
    runtime = calls.runtime
    return {
        "calls": calls.active_calls,
        "sidebands": calls.sidebands.held,
        "asyncio_tasks": len(asyncio.all_tasks()),
        "threads": process.num_threads(),
        "open_fds": process.num_fds(),
        "rss_mb": round(process.memory_info().rss / 2**20, 1),
        "speculation": runtime.speculation.snapshot(),
        "interruptions": runtime.interruptions.snapshot(),
    }


@router.get("/v1/config")
async def client_config(request: Request, runtime: Shared) -> dict[str, Any]:
    """What the page needs: ICE servers, the pool size, and the defaults its settings
    panel starts from (voices to choose from once the engines are loaded)."""
    settings = runtime.settings
    voices = runtime.responder.voices if runtime.responder is not None else ()
    return {
        "ice_servers": settings.server.ice_config(),
        "max_sessions": settings.pool.max_sessions,
        "models": runtime.models(),
        "voice": settings.tts.voice,
        "voices": list(voices or [settings.tts.voice]),
        "speed": settings.tts.speed,
        # The system prompt is the operator's: with a key set, only for those holding one.
        **(
            {"instructions": settings.llm.system_prompt}
            if _may_read_prompt(request, runtime)
            else {}
        ),
        "turn": {
            "detection": settings.turn.detection,
            "eagerness": settings.turn.eagerness,
            "semantic_vad": runtime.turn_model is not None,
        },
        "vad": {
            "detector": runtime.vad,
            "silence_ms": settings.vad.silence_ms,
            "interrupt_response": settings.vad.interrupt_response,
            "interrupt_min_speech_ms": settings.vad.interrupt_min_speech_ms,
            "interrupt_mode": settings.vad.interrupt_mode,
            "resume_window_ms": settings.vad.resume_window_ms,
        },
    }


def _may_read_prompt(request: Request, runtime: Shared) -> bool:
    token = bearer_token(request.headers.get("authorization"))
    try:
        authorize(token, runtime.settings.server.api_key, request.app.state.client_secrets)
    except Unauthorized:
        return False
    return True
