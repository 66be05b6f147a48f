"""Incoming calls offered to the application's webhook (a real HTTP server here): the
webhook is signed and never waited on past the call's ringing, its answer is not read,
and a call is decided once."""

from __future__ import annotations

import asyncio
import base64
import http.server
import threading
import time
from collections.abc import Iterator

import pytest
from openai import OpenAI
from pydantic import ValidationError

from app.calls.incoming import Accepted, IncomingCalls, Rejected
from app.config import Settings, SipSettings
from app.errors import CallRejected, Conflict, NotFound
from app.live.session_config import SessionConfig

SECRET = "whsec_" + base64.b64encode(b"a secret of thirty-two bytes ok!").decode()
CONFIG = SessionConfig(model="gpt-live-1", instructions="Hi.")


class Hook:
    """The application's endpoint: records what it is sent; `hang` holds each request
    unanswered, `flood` answers 200 with a body that never ends."""

    def __init__(self, *, hang: bool = False, flood: bool = False) -> None:
        self.received: list[tuple[bytes, dict[str, str]]] = []
        self.release = threading.Event()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append((body, dict(self.headers.items())))
                if hang:
                    hook.release.wait(30)
                self.send_response(200)
                if flood:
                    self.send_header("Content-Length", str(10**12))
                    self.end_headers()
                    try:
                        while not hook.release.is_set():
                            self.wfile.write(b"x" * 65_536)
                    except OSError:
                        pass  # the server hung up on it, as it should
                    return
                self.end_headers()

            def log_message(self, *args: object) -> None: ...

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def hooks() -> Iterator[list[Hook]]:
    made: list[Hook] = []
    yield made
    for hook in made:
        hook.stop()


def incoming(hook: Hook, accept_timeout_s: float = 10.0) -> IncomingCalls:
    settings = SipSettings(webhook_url=hook.url, webhook_secret=SECRET,
                           accept_timeout_s=accept_timeout_s)  # fmt: skip
    return IncomingCalls(settings)


async def decided_when_told(
    hook: Hook, calls: IncomingCalls, session_id: str, decision: object
) -> None:
    """The application's decision, once its webhook has been told of the call."""
    for _ in range(3000):
        if any(session_id.encode() in body for body, _ in hook.received):
            break
        await asyncio.sleep(0.01)
    calls.decide(session_id, decision)  # type: ignore[arg-type]


async def test_the_webhook_is_signed_and_a_call_is_decided_once(hooks: list[Hook]) -> None:
    hook = Hook()
    hooks.append(hook)
    calls = incoming(hook)
    sdk = OpenAI(api_key="sk-x", webhook_secret=SECRET)
    deciding = asyncio.create_task(decided_when_told(hook, calls, "sess_a", Accepted(CONFIG)))
    assert await calls.offer("sess_a", [("To", "<sip:agent@x>"), ("Authorization", "Digest x")])
    await deciding
    deciding = asyncio.create_task(decided_when_told(hook, calls, "sess_b", Rejected(486)))
    with pytest.raises(CallRejected) as rejected:
        await calls.offer("sess_b", [])
    assert rejected.value.status == 486
    ids = set()
    for body, headers in hook.received:
        event = sdk.webhooks.unwrap(body, headers)  # the signature, and a fresh timestamp
        assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
        ids.add(headers["webhook-id"])
        assert "Digest" not in body.decode(), "the caller's credentials are not passed on"
        assert event.type == "live.transport.incoming"
    assert len(ids) == 2, "each webhook has an id of its own"
    # A decision repeated, or for a call never offered, is refused.
    for session_id, decision in (("sess_a", Rejected(603)), ("sess_b", Accepted(CONFIG))):
        with pytest.raises(Conflict, match="no longer ringing: it was"):
            calls.decide(session_id, decision)
    with pytest.raises(NotFound):
        calls.decide("sess_never", Accepted(CONFIG))
    await calls.close()


async def test_a_webhook_that_never_answers_holds_only_its_own_call(hooks: list[Hook]) -> None:
    hook = Hook(hang=True)
    hooks.append(hook)
    calls = incoming(hook, accept_timeout_s=1.0)
    # The loop goes on while the webhook hangs: the application decides meanwhile.
    deciding = asyncio.create_task(decided_when_told(hook, calls, "sess_a", Accepted(CONFIG)))
    assert await calls.offer("sess_a", []) == CONFIG
    await deciding
    # Undecided, the call is refused as unanswered when its ringing time is up, however
    # long the webhook would have taken; a decision after that comes too late.
    started = time.monotonic()
    with pytest.raises(CallRejected) as unanswered:
        await calls.offer("sess_b", [])
    assert unanswered.value.status == 480
    assert time.monotonic() - started < 30, "not held until the webhook gave up"
    with pytest.raises(Conflict, match="unanswered for 1 s"):
        calls.decide("sess_b", Accepted(CONFIG))
    await calls.close()


async def test_a_webhooks_endless_answer_is_not_read(hooks: list[Hook]) -> None:
    hook = Hook(flood=True)
    hooks.append(hook)
    calls = incoming(hook)
    deciding = asyncio.create_task(decided_when_told(hook, calls, "sess_a", Accepted(CONFIG)))
    assert await calls.offer("sess_a", []) == CONFIG
    await deciding
    await calls.close()


def test_a_webhook_needs_the_servers_key() -> None:
    with pytest.raises(ValidationError, match="needs server.api_key"):
        Settings(sip={"webhook_url": "http://127.0.0.1:9/hook"})  # type: ignore[arg-type]
    assert Settings(sip={"webhook_url": "http://127.0.0.1:9/hook"},  # type: ignore[arg-type]
                    server={"api_key": "k"}).sip.webhook_url  # type: ignore[arg-type]  # fmt: skip
