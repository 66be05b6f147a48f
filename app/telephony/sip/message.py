"""SIP messages (RFC 3261 section 7): parsed strictly enough to refuse what is malformed
with a 400 that names the problem, and built for the few responses and requests a UAS
sends.

Everything here runs on the event loop before any authentication: sizes are capped, and
a client's text is read with str methods or patterns that cannot backtrack far, never
one that is quadratic in its length.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field

MAX_MESSAGE_BYTES = 64 * 1024
MAX_HEADERS = 100
# Physical lines before unfolding: a 64 KiB head of 2-byte folded lines is 32,000 of them.
MAX_LINES = 2 * MAX_HEADERS
MAX_LINE_CHARS = 8 * 1024  # one header line, unfolded: a long Record-Route fits
# Headers refused beyond a shorter length (a phone's Authorization is a few hundred).
MAX_VALUE_CHARS = {"Authorization": 4 * 1024}
REQUIRED = ("Via", "From", "To", "Call-ID", "CSeq")
# Compact forms (RFC 3261 7.3.3) and the canonical spelling of the headers we read.
COMPACT = {"v": "Via", "f": "From", "t": "To", "i": "Call-ID", "m": "Contact",
           "l": "Content-Length", "c": "Content-Type", "k": "Supported"}  # fmt: skip
CANONICAL = {name.lower(): name for name in (*REQUIRED, "Contact", "Content-Length",
             "Content-Type", "Authorization", "Max-Forwards", "Record-Route", "Route",
             "Supported", "Allow", "User-Agent")}  # fmt: skip
REQUEST_LINE = re.compile(r"^([A-Z]+) (\S+) SIP/2\.0$")
STATUS_LINE = re.compile(r"^SIP/2\.0 (\d{3}) (.*)$")
TOKEN = re.compile(r"^[A-Za-z0-9.!%*_+`'~-]+$")


class SipParseError(ValueError):
    """Not a well-formed SIP message; `message` holds what could be read, for a 400."""

    def __init__(self, reason: str, message: SipMessage | None = None) -> None:
        super().__init__(reason)
        self.message = message


@dataclass(slots=True)
class SipMessage:
    method: str = ""  # a request's, or "" for a response
    uri: str = ""
    status: int = 0  # a response's
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def get(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    @property
    def call_id(self) -> str:
        return self.get("Call-ID") or ""

    @property
    def cseq(self) -> tuple[int, str]:
        number, _, method = (self.get("CSeq") or "").partition(" ")
        return int(number), method.strip()

    @property
    def branch(self) -> str:
        """The top Via's branch: it names the transaction."""
        return param(self.all("Via")[0].split(",")[0], "branch") or ""

    @property
    def from_tag(self) -> str:
        return param(self.get("From") or "", "tag") or ""

    @property
    def to_tag(self) -> str:
        return param(self.get("To") or "", "tag") or ""


def param(header: str, name: str) -> str | None:
    """A `;name=value` parameter of a header (outside its <uri>): the first with a value."""
    for part in header.rsplit(">", 1)[-1].split(";")[1:]:
        key, equals, value = part.partition("=")
        value = value.split(",", 1)[0].strip()
        if equals and value and key.strip().lower() == name.lower():
            return value.split(None, 1)[0]
    return None


def uri_of(header: str) -> str | None:
    """The <uri> of a name-addr header such as Contact."""
    start = header.find("<")
    end = header.find(">", start + 1)
    return header[start + 1 : end] if 0 <= start < end - 1 else None


def parse(data: bytes) -> SipMessage:
    """SipParseError names the first problem; its `message` has what was read by then."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise SipParseError(f"a message over {MAX_MESSAGE_BYTES} bytes")
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator:
        head, separator, body = data.partition(b"\n\n")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SipParseError("the headers are not UTF-8") from exc
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise SipParseError(f"more than {MAX_LINES} header lines")
    lines = _unfold(lines)
    if not lines:
        raise SipParseError("an empty message")
    if len(lines[0]) > MAX_LINE_CHARS:
        raise SipParseError(f"a first line over {MAX_LINE_CHARS} characters")
    message = SipMessage()
    if request := REQUEST_LINE.match(lines[0]):
        message.method, message.uri = request.group(1), request.group(2)
    elif status := STATUS_LINE.match(lines[0]):
        message.status, message.reason = int(status.group(1)), status.group(2)
    else:
        raise SipParseError(f"not a SIP request or status line: {lines[0][:60]!r}")
    if len(lines) > MAX_HEADERS + 1:
        raise SipParseError(f"more than {MAX_HEADERS} headers", message)
    # Read on past these: a 400 needs the headers after them too.
    bad_line: str | None = None
    too_long: str | None = None
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not TOKEN.match(name):
            bad_line = bad_line or line
            continue
        name = COMPACT.get(name, CANONICAL.get(name.lower(), name))
        if len(line) > MAX_LINE_CHARS or len(value) > MAX_VALUE_CHARS.get(name, len(value)):
            too_long = too_long or name
            continue
        message.headers.append((name, value.strip()))
    if bad_line is not None:
        raise SipParseError(f"a malformed header line: {bad_line[:60]!r}", message)
    if too_long is not None:
        raise SipParseError(f"{too_long[:30]} header over its size limit", message)
    _check(message, separator, body)
    return message


def _unfold(lines: list[str]) -> list[str]:
    """Header lines continued on lines that start with whitespace are one line. Each is
    joined once: adding to it line by line copied it again for each (quadratic: 52 ms
    for a 64 KiB datagram of folded lines)."""
    unfolded: list[list[str]] = []
    for line in lines:
        if line[:1] in (" ", "\t") and unfolded:
            unfolded[-1].append(line.strip())
        else:
            unfolded.append([line])
    return [" ".join(parts) for parts in unfolded]


def _check(message: SipMessage, separator: bytes, body: bytes) -> None:
    if message.method:
        missing = [name for name in REQUIRED if message.get(name) is None]
        if missing:
            raise SipParseError(f"missing {', '.join(missing)}", message)
        cseq = message.get("CSeq") or ""
        number, method = cseq.partition(" ")[::2]
        if not is_number(number.strip()) or method.strip() != message.method:
            raise SipParseError(f"a CSeq that does not match the request: {cseq[:60]!r}", message)
    length = message.get("Content-Length")
    if length is not None:
        if not is_number(length):
            raise SipParseError(f"a Content-Length that is not a number: {length[:20]!r}", message)
        if int(length) > len(body):
            raise SipParseError(f"the body is shorter than Content-Length {length}", message)
        body = body[: int(length)]
    elif not separator:
        body = b""
    message.body = body


def is_number(text: str) -> bool:
    """Digits, ASCII ones (int() refuses "²", which isdigit() takes), and not too many."""
    return text.isascii() and text.isdigit() and len(text) <= 10


def response(
    request: SipMessage,
    status: int,
    reason: str,
    *,
    to_tag: str = "",
    source: tuple[str, int] | None = None,
    headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    body: bytes = b"",
    content_type: str = "application/sdp",
) -> bytes:
    """A response to `request`: its Vias (the top one stamped with where it came from, RFC
    3581), From, To (with our tag), Call-ID and CSeq, then `headers` and `body`."""
    vias = request.all("Via")
    if source is not None and vias:
        vias = [_stamp(vias[0], source), *vias[1:]]
    to = request.get("To") or ""
    if to_tag and param(to, "tag") is None:
        to += f";tag={to_tag}"
    lines = [f"SIP/2.0 {status} {reason}", *(f"Via: {via}" for via in vias),
             f"From: {request.get('From')}", f"To: {to}", f"Call-ID: {request.call_id}",
             f"CSeq: {request.get('CSeq')}", "Server: voice-agent",
             *(f"{name}: {value}" for name, value in headers)]  # fmt: skip
    return _with_body(lines, body, content_type)


def request(method: str, uri: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    lines = [f"{method} {uri} SIP/2.0", *(f"{name}: {value}" for name, value in headers)]
    return _with_body(lines, body, "application/sdp")


def _with_body(lines: list[str], body: bytes, content_type: str) -> bytes:
    if body:
        lines.append(f"Content-Type: {content_type}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _stamp(via: str, source: tuple[str, int]) -> str:
    """received= and rport= on the top Via, so the response finds a caller behind NAT."""
    host, port = source
    top, comma, rest = via.partition(",")
    top = re.sub(r";\s*rport(?=;|$)", f";rport={port}", top.strip())
    if ";received=" not in top:
        top += f";received={host}"
    return top + comma + rest


def new_tag() -> str:
    return secrets.token_hex(8)


def new_branch() -> str:
    return "z9hG4bK" + secrets.token_hex(10)  # RFC 3261's magic cookie, then unique
