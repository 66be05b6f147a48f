"""Ephemeral keys: POST /v1/realtime/client_secrets, in OpenAI's request and response shapes;
the store and the checks are in app/api/auth.py.

A client secret (`ek_...`) is minted with the server's API key and handed to a
browser; it works as a Bearer key on /v1/realtime/calls and the WebSocket until it
expires, and the session config minted with it applies to every call made with it.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.auth import bearer_token, key_matches
from app.api.bodies import read_limited
from app.api.callers import caller
from app.api.deps import Calls, Shared
from app.api.errors import validation_problems
from app.api.secret_store import SECRET_PREFIX
from app.calls.call import refused_as_signalling
from app.errors import BadRequest, NotFound, Unauthorized
from app.realtime.session_config import SessionConfig, describe, to_changes

router = APIRouter()

PAGE_SECRET_S = 600  # a page's key: long enough to connect (and reconnect) with
# Page keys one address may mint: a page load takes one, a reconnect maybe another.
PAGE_MINTS_PER_MINUTE, PAGE_MINT_BURST = 6, 3


class ExpiresAfter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    anchor: Literal["created_at"] = "created_at"
    seconds: int = Field(600, ge=10, le=7200)


class ClientSecretRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expires_after: ExpiresAfter = Field(default_factory=ExpiresAfter)
    session: SessionConfig | None = None


@router.post(
    "/v1/realtime/client_secrets",
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": ClientSecretRequest.model_json_schema()}}
        }
    },
)
async def create(request: Request, calls: Calls) -> dict[str, Any]:
    """Mint a client secret. Only the server's API key may: a client secret may not. The
    key is checked before the body is read."""
    settings = calls.settings
    token = bearer_token(request.headers.get("authorization"))
    api_key = settings.server.api_key
    if (token or "").startswith(SECRET_PREFIX) or not key_matches(api_key, token):
        raise Unauthorized("client secrets are minted with the server's API key")
    raw = await read_limited(request, settings.limits.body_bytes)
    try:
        body = ClientSecretRequest.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise BadRequest(validation_problems(exc)) from None
    with refused_as_signalling():
        changes = to_changes(body.session) if body.session is not None else None
    options = calls.preview(changes)
    minted = request.app.state.client_secrets
    size = len(raw) if changes is not None else 0
    value, secret = minted.mint(body.expires_after.seconds, changes, size=size)
    return {
        "value": value,
        "expires_at": int(secret.expires_at),
        "session": describe(options, "sess_pending", calls.runtime.model),
    }


@router.post("/v1/page/client_secret")
async def for_the_page(request: Request, runtime: Shared) -> dict[str, Any]:
    """A short-lived key for the page, when the server has an API key (the page cannot
    hold it). Off unless server.page_client_secrets: it must sit behind the
    deployment's own login, or anyone could mint keys. Each address may mint only a
    few a minute, and the page's keys have a quota of their own (429 beyond either)."""
    if not runtime.settings.server.page_client_secrets:
        raise NotFound("no client secrets for the page on this server")
    request.app.state.page_mints.take(caller(request, with_server_key=False).address or "")
    value, secret = request.app.state.client_secrets.mint(PAGE_SECRET_S, None, kind="page")
    return {"value": value, "expires_at": int(secret.expires_at)}
