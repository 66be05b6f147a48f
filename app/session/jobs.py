"""Work waiting for the agent: a user's turn to answer, a client's request for a reply,
or something to say or play as it is.

A turn may start being answered before it has ended (speculation, see
`vad.speculative_ms`): transcription, generation and the first synthesis run,
but whatever would be visible waits in `when_ended()` until the session
confirms the turn, or is dropped with the turn if the user goes on talking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.agent.timings import TurnTimings
from app.ids import new_id
from app.session.options import OptionChanges, SessionOptions
from app.session.speaking.reply import Reply
from app.vocab.speech import Transcript


class Job:
    """One piece of work in the session's queue; it runs in `task` and may speak `reply`."""

    def __init__(self, session_id: str, timings: TurnTimings) -> None:
        self.session_id = session_id  # tagged where made, checked where run
        self.timings = timings
        self.abandoned = False
        self.task: asyncio.Task[None] | None = None
        self.reply: Reply | None = None


class UserTurn(Job):
    """What the user said (16 kHz mono s16), waiting for or getting its answer."""

    def __init__(
        self,
        session_id: str,
        audio: bytes,
        item_id: str,
        *,
        ended: bool,
        respond: bool = True,
        heard: Transcript | None = None,
    ) -> None:
        super().__init__(session_id, TurnTimings(ended=ended))
        self.audio = audio
        self.heard = heard  # its transcript, if one was made already
        self.item_id = item_id
        self.respond = respond  # False: transcribe and keep it only (create_response off)
        self._ended = asyncio.Event()
        self._on_end: list[Callable[[], None]] = []
        if ended:
            self._ended.set()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def when_ended(self, action: Callable[[], None]) -> None:
        """Run `action` once the turn has ended: now if it has, else in confirm()."""
        if self.ended:
            action()
        else:
            self._on_end.append(action)

    async def wait_ended(self) -> None:
        await self._ended.wait()

    def confirm(self) -> None:
        """A speculative turn really ended: what waited for that happens now, in order."""
        self.timings.end_of_turn()
        self._ended.set()
        actions, self._on_end = self._on_end, []
        for action in actions:
            action()


class ReplyRequest(Job):
    """The client asked for a reply to the conversation as it stands, or the user has
    been quiet past the idle timeout (`nudge`)."""

    def __init__(
        self,
        session_id: str,
        instructions: str | None = None,
        *,
        nudge: bool = False,
        options: SessionOptions | None = None,
        changes: OptionChanges | None = None,
    ) -> None:
        """`options`: this reply's own, where its response.create had `changes` (tools)."""
        super().__init__(session_id, TurnTimings())
        self.instructions = instructions  # replaces the session's for this reply
        self.nudge = nudge
        self.options = options
        self.changes = changes


class Announcement(Job):
    """What the agent says as it is (`text`, through the voice), or audio it plays as it
    is (`audio24k`, 24 kHz PCM from a client), in place of a reply it would make."""

    def __init__(self, session_id: str, *, text: str = "", audio24k: bytes | None = None) -> None:
        super().__init__(session_id, TurnTimings())
        self.text = text
        self.audio24k = audio24k
        self.response_id = new_id("resp")  # the reply's, known before it starts


class ApprovedCall(Job):
    """The client approved a call of an MCP server's tool (`request_id`, the approval
    request's item): run it, then answer with its result."""

    def __init__(
        self,
        session_id: str,
        request_id: str,
        server: str,
        name: str,
        arguments: str,
        options: SessionOptions | None = None,
        changes: OptionChanges | None = None,
    ) -> None:
        """`options`: the session's now with `changes`, those of the response that asked,
        where it had tools of its own (the server may be one of them)."""
        super().__init__(session_id, TurnTimings())
        self.options = options
        self.changes = changes
        self.request_id = request_id
        self.server = server
        self.name = name
        self.arguments = arguments
