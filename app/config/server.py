"""How the server listens, who may call, how many at once, and the bounds on what
clients send."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

# A list setting whose environment value is comma separated, not JSON (NoDecode).
CsvList = Annotated[list[str], NoDecode]


def split_csv(value: Any) -> Any:
    """A list setting given as text (a flag, an environment value): comma separated."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def check_networks(value: list[str]) -> list[str]:
    """CIDRs, each checked (ValueError names a bad one)."""
    for network in value:
        ipaddress.ip_network(network, strict=False)
    return value


class ServerSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Interface to bind.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port for HTTP and signalling.")
    ice_servers: CsvList = Field(
        default_factory=list,
        description="STUN/TURN URLs used by the server and advertised to the page "
        "(comma separated). Empty means host candidates only, which suits a LAN or localhost.",
    )
    ice_username: str = Field(
        "",
        description="Username for the turn:/turns: URLs in ice_servers (a TURN server's "
        "long-term credential, as coturn's --user gives).",
    )
    ice_credential: str = Field(
        "",
        description="Password for those TURN URLs. The page gets it from /v1/config to use "
        "the relay, so anyone who can load the page can: use a TURN user for this alone.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="What the log says: info has a line per call and per engine load."
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        "auto",
        description="The event loop: uvloop (libuv) or Python's own asyncio loop. auto: "
        "uvloop where it is installed, as it is with this package.",
    )
    replica: str = Field(
        "",
        pattern=r"^[a-z0-9-]{0,32}$",
        description="This process's name among replicas behind a load balancer (lowercase "
        "letters, digits, dashes). Every call id carries it (sess_<replica>_...), so the "
        "balancer can send a call's hangup, DELETE and sideband to the replica holding it.",
    )
    api_key: str = Field(
        "",
        description="If set, calls are made with it (or a client secret minted with it) as "
        "'Authorization: Bearer <api_key>', a call answers to the key or the secret that made "
        "it, and /v1/pool, /v1/stats and /v1/usage need it (docs/reference/http-api.md). Empty: "
        "every route is open, for a trusted network only.",
    )
    allowed_origins: CsvList = Field(
        default_factory=list,
        description="Web origins (scheme://host:port, comma separated; * for any) whose pages "
        "may use this server (open the Realtime WebSocket, make, change and end calls, and "
        "read the answers: CORS), besides this server's own. Clients that are not browsers "
        "send no Origin and are not affected.",
    )
    allowed_hosts: CsvList = Field(
        default_factory=list,
        description="Host names this server answers to besides IP addresses and localhost "
        "(comma separated, e.g. voice.example.com; * for any): a request naming another "
        "Host gets 400, so a page cannot reach the server through a DNS name its owner "
        "points here (DNS rebinding). List every name clients use to reach it.",
    )
    metrics_need_key: bool = Field(
        False,
        description="GET /metrics requires api_key (as 'Authorization: Bearer', which "
        "Prometheus sends with its authorization setting) when one is set. Off: open, "
        "for a scraper inside the deployment's own network.",
    )
    otlp_endpoint: str = Field(
        "",
        description="OpenTelemetry traces, over OTLP/HTTP, to this URL (a collector's "
        "http://host:4318/v1/traces): a span per turn with a child per stage. Empty: none.",
    )
    page_client_secrets: bool = Field(
        False,
        description="POST /v1/page/client_secret mints a 10-minute client secret for the "
        "page, which cannot hold api_key. Turn on only behind the deployment's own login "
        "(a reverse proxy): whoever reaches it can mint keys.",
    )
    opus_dtx: bool = Field(
        True,
        description="While the agent is silent, send one Opus packet every 400 ms instead "
        "of every 20 ms, as Opus DTX does. Saves CPU per call; turn off for a gateway that "
        "expects an unbroken RTP stream.",
    )

    def ice_config(self) -> list[dict[str, str]]:
        """ice_servers as RTCIceServer dictionaries (aiortc's and the browser's), the TURN
        ones with their username and credential."""
        entries = []
        for url in self.ice_servers:
            entry = {"urls": url}
            if url.startswith(("turn:", "turns:")) and self.ice_username:
                entry |= {"username": self.ice_username, "credential": self.ice_credential}
            entries.append(entry)
        return entries

    @field_validator("ice_servers", "allowed_origins", "allowed_hosts", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        return split_csv(value)


class PoolSettings(BaseModel):
    max_sessions: int = Field(4, ge=1, le=1024, description="Concurrent conversations (slots).")
    connect_timeout_s: float = Field(
        8.0,
        gt=0,
        description="A peer that has not connected (ICE and DTLS done, a SIP call ACKed) "
        "by then frees its slot.",
    )
    retry_after_s: int = Field(
        2, ge=1, description="Retry-After sent with 503 when every slot is busy."
    )
    # aiortc has no dependable "disconnected" state: silence on the wire is the signal.
    media_timeout_s: float = Field(
        10.0, gt=0, description="A peer that sends no audio for this long is gone."
    )
    idle_timeout_s: float = Field(
        300.0, gt=0, description="A session where nobody speaks for this long is ended."
    )
    max_session_s: float = Field(3600.0, gt=0, description="Longest a session may last.")
    drain_timeout_s: float = Field(
        5.0, gt=0, description="Time an ending session has to stop its work."
    )
    quarantine_s: float = Field(
        30.0,
        gt=0,
        description="A slot whose drain timed out is out of service this long, then rebuilt.",
    )


class LimitsSettings(BaseModel):
    """Bounds on what a client may send or ask for; each is refused with a clear answer."""

    body_bytes: int = Field(
        1024 * 1024,
        ge=64 * 1024,
        description="The largest HTTP request body taken on any route (413 beyond): an SDP "
        "offer with its session config fits well within the default.",
    )
    calls_per_minute: float = Field(
        60.0,
        ge=0,
        description="New calls one client address may make per minute, on average (429 "
        "with Retry-After beyond, or a WebSocket error then close 1008). 0: no limit. "
        "Behind a proxy every call comes from its address: set it for the proxy's share.",
    )
    trusted_proxies: CsvList = Field(
        default_factory=list,
        description="Networks of the proxies in front (comma separated CIDRs, e.g. "
        "10.0.0.0/8): a request from one is counted against the client X-Forwarded-For "
        "names (the last address in it that is not a proxy). Empty: the direct peer's "
        "address, and X-Forwarded-For is ignored, since any client can write it.",
    )
    connections: int = Field(
        2048,
        ge=16,
        description="The most TCP connections (HTTP and WebSocket) the server holds open at "
        "once; one more is answered 503 and closed. Keep it well under the process's file "
        "limit (ulimit -n): WebRTC's UDP sockets need descriptors too.",
    )
    address_connections: int = Field(
        128,
        ge=4,
        description="The most TCP connections one client address (an IPv6 /64) may hold open "
        "at once, loopback included (a trusted proxy is held only to connections); one "
        "more is answered 503 and closed.",
    )
    request_s: float = Field(
        10.0,
        gt=0,
        description="A request must arrive whole, head and body, within this long of its "
        "connection opening or the answer before it ending; beyond, 408 and the connection "
        "is closed. An idle connection is closed as well (slowloris).",
    )
    keep_alive_s: int = Field(
        5,
        ge=1,
        description="An idle keep-alive connection is closed after this long.",
    )
    request_head_bytes: int = Field(
        16 * 1024,
        ge=4 * 1024,
        le=1024 * 1024,
        description="The largest request line and headers together (400 and close beyond).",
    )
    ws_frames_per_s: float = Field(
        200.0,
        gt=0,
        description="WebSocket frames one socket may send a second, on average, in bursts of "
        "20 s worth (a client streaming 20 ms of audio a message sends 50). Pings and "
        "continuation frames count. Beyond: close 1008.",
    )
    ws_json_per_s: float = Field(
        2000.0,
        gt=0,
        description="JSON objects and arrays one WebSocket may send a second, counted as "
        "'{' and '[' before parsing, in bursts of 10 s worth, which is also the most one "
        "message may hold (close 1009 beyond). An audio append holds one. Beyond: close 1008.",
    )
    call_burst: int = Field(
        20, ge=1, description="New calls one address may make at once before that rate applies."
    )
    address_slots: float = Field(
        0.5,
        gt=0,
        le=1,
        description="The share of the slots one client address (an IPv6 /64) may hold at "
        "once, rounded up: 0.5 lets it hold 2 of 4 (429 beyond, or its transport's "
        "refusal). 1: no limit. Calls made with the server's own API key, and phone calls "
        "from a vouched source (sip.allow, SIP digest, a Twilio signature) are not held "
        "to it: one such address carries many callers.",
    )
    loopback_exempt: bool = Field(
        True,
        description="Calls from this machine itself (127.0.0.0/8, ::1) are held to neither "
        "calls_per_minute nor address_slots: a developer's own tabs. Turn it off behind a "
        "proxy on the same machine that is not in trusted_proxies.",
    )
    event_bytes: int = Field(
        256 * 1024,
        ge=16 * 1024,
        le=256 * 1024,
        description="The largest client event on the data channel (error invalid_message "
        "beyond); 256 KiB is what the channel takes in one message.",
    )
    ws_message_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024 * 1024,
        le=64 * 1024 * 1024,
        description="The largest Realtime WebSocket message (error invalid_message beyond): "
        "4 MiB carries an append of append_audio_s (60 s) of 24 kHz pcm16 in base64. "
        "uvicorn reads a message whole before the app sees it, so this is also what one "
        "message can cost in memory.",
    )
    append_audio_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="The most audio one input_audio_buffer.append may carry, in seconds "
        "(error invalid_audio beyond; nothing of it is taken). It reaches the turn "
        "detector a second at a time, other calls served in between.",
    )
    instructions_chars: int = Field(
        65_536, ge=1, description="The longest instructions a session may be given."
    )
    item_chars: int = Field(
        65_536,
        ge=1,
        description="The longest text of one conversation item a client adds "
        "(conversation.item.create: a message, or a function call's output).",
    )
    history_chars: int = Field(
        1_048_576,
        ge=1,
        description="The most text a session's conversation may hold, what clients added and "
        "what was said: an item that would pass it is refused (error conversation_full) "
        "until items are deleted or grow old enough to be forgotten.",
    )
    tools: int = Field(128, ge=0, description="The most function tools a session may have.")
    tool_bytes: int = Field(
        16_384, ge=256, description="The largest function tool definition, as JSON."
    )
    call_sidebands: int = Field(
        4,
        ge=1,
        le=64,
        description="The most sideband controllers one call may have at once (/v1/realtime"
        "?call_id=, /live/sessions/{id}/attach): each hears all of the call's audio, tens "
        "of KB/s. Beyond: error sideband_limit_reached, then close 1008.",
    )
    address_sidebands: int = Field(
        8,
        ge=1,
        description="The most sideband controllers one client address may hold at once, "
        "over all calls (the server's API key and loopback, if exempt, are not held to it).",
    )
    delegation_tokens: int = Field(
        1024,
        ge=16,
        le=8192,
        description="The most tokens one delegated reply (delegation type responses) may "
        "ask the LLM for; a client's max_output_tokens above it is cut to it.",
    )
    delegation_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="The longest one delegated reply may take, its tool rounds included "
        "(response.failed delegation_timeout beyond, and the caller is told).",
    )
    delegation_rounds: int = Field(
        32,
        ge=1,
        le=1024,
        description="The most LLM rounds a session's delegated replies may make in all; a "
        "client cannot loop the LLM with tool outputs (response.failed beyond).",
    )

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        return check_networks(value)
