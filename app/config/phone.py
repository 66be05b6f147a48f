"""Phone lines: SIP trunks and PBXs, and Twilio-style media streams."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from app.config.server import CsvList, check_networks, split_csv


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
    allow: CsvList = Field(
        default_factory=list,
        description="Source networks that may call (comma separated CIDRs, e.g. "
        "10.0.0.0/8,203.0.113.7/32); what others send is dropped unread and unanswered. "
        "Empty: any.",
    )
    username: str = Field("", description="Digest authentication: callers must send this user.")
    password: str = Field("", description="Digest authentication password. Empty: none asked.")
    realm: str = Field("voice-agent", description="Digest authentication realm.")
    webhook_url: str = Field(
        "",
        description="Offer each incoming call to this URL as Live's live.transport.incoming "
        "webhook; it rings until the application accepts it (POST /live/sessions/{id}/"
        "accept) or rejects it. Empty: every call is answered at once.",
    )
    webhook_secret: str = Field(
        "",
        description="The webhook's signing secret (whsec_...), for the application to check "
        "its webhook-signature header (the openai SDK's webhooks.unwrap). Empty: unsigned.",
    )
    transfer_targets: CsvList = Field(
        default_factory=list,
        description="Where a call may be transferred (POST /live/sessions/{id}/refer), as "
        "comma separated sip:, sips: or tel: patterns; * stands for a user part, host or "
        "port in sip:, for digits only in tel: (sip:*@pbx.example.com,tel:+1415555*). Empty: "
        "transfers are refused, so no client can send a call to a number that costs the "
        "operator money.",
    )
    accept_timeout_s: float = Field(
        10.0, gt=0, le=120, description="A call offered to the webhook and not accepted by "
        "then is refused (480 Temporarily Unavailable).",
    )  # fmt: skip

    @field_validator("allow", "transfer_targets", mode="before")
    @classmethod
    def _split_csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("transfer_targets")
    @classmethod
    def _targets(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.lower().startswith(("sip:", "sips:", "tel:")):
                raise ValueError(f"{pattern!r} is not a sip:, sips: or tel: pattern")
        return value

    @field_validator("allow")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        return check_networks(value)


class TwilioSettings(BaseModel):
    auth_token: str = Field(
        "",
        description="The Twilio account's auth token: with it, the voice webhook and the "
        "stream's handshake must carry a valid X-Twilio-Signature (403 otherwise). Empty: "
        "not checked (Telnyx streams carry no such signature).",
    )
