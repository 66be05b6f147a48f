"""The few errors that cross module boundaries; `app.api.errors` maps them to HTTP."""

from __future__ import annotations


class VoiceAgentError(Exception):
    """Base class; `type` is the OpenAI-style error type sent to clients."""

    type = "server_error"
    outcome = ""  # how /metrics counts a call refused with it, when not by `type`


class SessionLimitReached(VoiceAgentError):
    type = "session_limit_reached"

    def __init__(self, size: int, retry_after_s: int) -> None:
        super().__init__(f"All {size} session slots are in use; retry in {retry_after_s} s")
        self.size = size
        self.retry_after_s = retry_after_s


class RateLimited(VoiceAgentError):
    """A client address making new calls faster than limits.calls_per_minute."""

    type = "rate_limit_exceeded"
    outcome = "rate_limited"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AddressLimitReached(RateLimited):
    """One client address already holds its share of the slots (limits.address_slots)."""

    outcome = "address_limit"  # how /metrics counts the refusal

    def __init__(self, client: str, slots: int, retry_after_s: int) -> None:
        super().__init__(
            f"{client} already holds {slots} calls, the most one address may at once; "
            f"end one or retry in {retry_after_s} s",
            retry_after_s,
        )


class SidebandLimitReached(VoiceAgentError):
    """A call, or an address, holds as many sideband controllers as it may."""

    type = "invalid_request_error"
    code = "sideband_limit_reached"


class SignallingError(VoiceAgentError):
    """The peer sent something we cannot negotiate (bad SDP, no audio)."""

    type = "invalid_request_error"


class BadRequest(VoiceAgentError):
    """A request the server understood but cannot do as asked."""

    type = "invalid_request_error"


class TooLarge(VoiceAgentError):
    """A request body over its route's limit, refused before it is all read."""

    type = "invalid_request_error"


class MessageTooLarge(VoiceAgentError):
    """An event over what the client's channel takes in one message."""


class NotFound(VoiceAgentError):
    type = "invalid_request_error"


class Unauthorized(VoiceAgentError):
    type = "invalid_request_error"


class Forbidden(VoiceAgentError):
    """Allowed to call the route, but not to do this with it (an operator's policy)."""

    type = "invalid_request_error"


class Conflict(VoiceAgentError):
    """Asked of something no longer in the state it needs (a call already decided)."""

    type = "invalid_request_error"


class NotReady(VoiceAgentError):
    """Engines are still loading, or the server is shutting down."""

    type = "server_not_ready"


class EngineError(VoiceAgentError):
    """An engine failed. `retryable` says whether the same request may work later;
    `code` is what the client is told: llm_unavailable, llm_timeout, llm_stream_broken,
    stt_failed, stt_timeout, tts_failed, tts_timeout, or engine_error for the rest."""

    type = "engine_error"
    code = "engine_error"

    def __init__(self, message: str, *, retryable: bool = False, code: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        if code is not None:
            self.code = code


class CrossedSessions(VoiceAgentError):
    """Something made for one session reached another's: a bug, refused where consumed."""


class EndOfStream(Exception):
    """A media source has no more frames."""


class CallRejected(VoiceAgentError):
    """An incoming phone call the application turned away (or let ring unanswered):
    the SIP status the caller gets."""

    type = "call_rejected"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TransferFailed(VoiceAgentError):
    """A call could not be transferred: the caller's side refused or never answered."""

    type = "transfer_failed"
