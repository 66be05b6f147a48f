"""WHIP (RFC 9725): how a gateway's WebRTC leg, or any WHIP client, starts a call.

POST /whip        an SDP offer (application/sdp) → 201 with the answer, the call's
                  resource in Location, its ETag, and the ICE servers as Link headers.
PATCH /whip/{id}  trickled candidates (application/trickle-ice-sdpfrag) → 204. ICE
                  restarts are refused with 422, as the RFC asks of a server that
                  trickles but cannot restart: aiortc cannot restart ICE.
DELETE /whip/{id} ends the call and frees its slot.

No data channel is needed: the caller speaks and hears on its audio track alone.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from app.api.auth import caller_of, require_key, require_key_to_end
from app.api.bodies import read_limited
from app.api.callers import caller_of_request
from app.api.deps import Calls
from app.api.errors import error_body
from app.api.signalling import secret_changes
from app.calls.webrtc import open_webrtc
from app.config import ServerSettings
from app.rtc.peer import RtcPeer
from app.rtc.sdp import MAX_SDP_BYTES
from app.rtc.trickle import parse_fragment

router = APIRouter(prefix="/whip")

SDP = "application/sdp"
SDP_FRAGMENT = "application/trickle-ice-sdpfrag"
MAX_FRAGMENT_BYTES = 16 * 1024
VIA = "whip"


@router.post("", status_code=201, response_class=Response, dependencies=[Depends(require_key)])
async def publish(request: Request, calls: Calls) -> Response:
    """201 answer; 400 bad SDP, 401 bad key, 413 too large, 415 not SDP, 503 pool full."""
    if (refused := _wrong_type(request, SDP)) is not None:
        return refused
    offer = (await read_limited(request, MAX_SDP_BYTES)).decode("utf-8", errors="replace")
    answer, session_id = await open_webrtc(
        calls,
        offer,
        secret_changes(request),
        via=VIA,
        owner=caller_of(request),
        caller=caller_of_request(request),
    )
    response = Response(answer, status_code=201, media_type=SDP)
    response.headers["Location"] = f"/whip/{session_id}"
    response.headers["ETag"] = _etag(calls.peer_of(session_id, VIA))
    response.headers["Accept-Patch"] = SDP_FRAGMENT
    for link in ice_server_links(calls.settings.server):
        response.headers.append("Link", link)
    return response


@router.patch("/{call_id}", response_class=Response, dependencies=[Depends(require_key)])
async def trickle(call_id: str, request: Request, calls: Calls) -> Response:
    """204 candidates added; 404 no such call, 412 stale If-Match, 415 not a fragment,
    422 an ICE restart, 400 a malformed fragment."""
    peer = calls.peer_of(call_id, VIA, caller_of(request))
    if (refused := _wrong_type(request, SDP_FRAGMENT)) is not None:
        return refused
    if_match = request.headers.get("if-match")
    if if_match is not None and if_match.strip() not in ("*", _etag(peer)):
        return _refusal(412, f"If-Match {if_match} is not this session's ETag {_etag(peer)}")
    body = await read_limited(request, MAX_FRAGMENT_BYTES)
    fragment = parse_fragment(body.decode("utf-8", errors="replace"))
    if fragment.ufrag is not None and fragment.ufrag != peer.remote_ufrag:
        return _refusal(422, "ICE restarts are not supported: DELETE this call and start anew")
    await peer.add_candidates(fragment)
    return Response(status_code=204)


@router.delete("/{call_id}", response_class=Response, dependencies=[Depends(require_key_to_end)])
async def stop(call_id: str, request: Request, calls: Calls) -> Response:
    """200 ended, its slot free; 404 no such call."""
    calls.peer_of(call_id, VIA, caller_of(request))
    await calls.hang_up(call_id, caller_of(request))
    return Response(status_code=200)


def ice_server_links(server: ServerSettings) -> list[str]:
    """RFC 9725's Link headers for the STUN/TURN servers the client may use."""
    links = []
    for entry in server.ice_config():
        link = f'<{entry["urls"]}>; rel="ice-server"'
        if "username" in entry:
            link += (f'; username="{entry["username"]}"; credential="{entry["credential"]}"'
                     '; credential-type="password"')  # fmt: skip
        links.append(link)
    return links


def _etag(peer: RtcPeer) -> str:
    # The ETag names the ICE session: ours is fixed for the call's life (no restarts).
    return f'"{peer.local_ufrag}"'


def _wrong_type(request: Request, expected: str) -> Response | None:
    given = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if given == expected:
        return None
    return _refusal(415, f"send {expected}, not {given or 'no Content-Type'}")


def _refusal(status: int, message: str) -> Response:
    return JSONResponse(error_body("invalid_request_error", message), status_code=status)
