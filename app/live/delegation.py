"""A Live session's delegated tasks.

In a session that names its delegation, the voice's LLM has a `delegate` tool. When it
calls it, the task is handed over and the client hears `session.delegation.created`;
unless commentary or thinking comes first, the agent says it is working on it after
`acknowledgement_delay_ms`. Then:

- `client` delegation: the client does the task and sends its result as commentary
  (or thinking) with the delegation's id; the agent tells the user.
- `responses` delegation: the server runs the backend itself (live/backend.py), and
  the agent says its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from app.ids import shown
from app.live import server_events as events
from app.live.backend import Backend
from app.live.client_events import BadEvent
from app.live.session_config import (
    DELEGATE,
    Delegation,
    ResponsesBackend,
    StartProblem,
    backend_servers,
    backend_tools,
)
from app.session import messages as msg
from app.session import refusals
from app.session.session import Session

log = logging.getLogger(__name__)

MAX_OPEN = 8  # delegations awaiting an answer; the oldest is forgotten past this
# Said as it is: SmolLM2 asked to word it went on repeating itself to its token limit.
ACKNOWLEDGE = "One moment, I'm working on that."


@dataclass(slots=True)
class Delegated:
    id: str
    target: str
    task: str


class Delegations:
    def __init__(
        self,
        session: Session,
        delegation: Delegation | None,
        *,
        send: Callable[[events.Event], None],
        speak: Callable[[str], None],
        now_ms: Callable[[], int],
    ) -> None:
        """`send`: an event to everyone; `speak`: commentary for the agent to say."""
        self._session = session
        self.config = delegation
        self._send = send
        self._speak = speak
        self._now_ms = now_ms
        self._open: OrderedDict[str, Delegated] = OrderedDict()
        self._ack: asyncio.TimerHandle | None = None
        self._backend: Backend | None = None
        if delegation is not None and delegation.type == "responses":
            self._backend = Backend(
                session, self._backend_config, send=send, speak=speak,
                answered=self._closed,
            )  # fmt: skip

    # --- the agent's side

    def take(self, ended: msg.ReplyEnded) -> None:
        """A reply that called `delegate` hands its task over."""
        if self.config is None:
            return
        for call in ended.calls:
            if call.name != DELEGATE or not call.complete:
                continue
            task = _task(call.arguments) or self._asked()
            # The call leaves the conversation: what the user hears next (the
            # acknowledgement, the answer) stands for it, and no model is shown a tool
            # result to imitate (SmolLM2 read "(delegate returned: ...)" aloud).
            with contextlib.suppress(refusals.UnknownItem):
                self._session.items.delete(call.item_id)
            delegated = Delegated(call.item_id, self.config.type, task)
            self._open[delegated.id] = delegated
            while len(self._open) > MAX_OPEN:
                self._open.popitem(last=False)
            response_id = None
            if delegated.target == "responses":
                response_id = self._need_backend("a delegation").begin(delegated.id, task)
            self._send(events.delegation_created(delegated.id, delegated.target,
                                                 self._now_ms(), task, response_id))  # fmt: skip
            self._acknowledge_after(self.config.acknowledgement_delay_ms or 0)

    def _closed(self, delegation_id: str) -> None:
        self._open.pop(delegation_id, None)

    def _asked(self) -> str:
        """What the user last said: the task the agent handed over."""
        for message in reversed(self._session.history.messages()):
            if message.role == "user" and message.content:
                return message.content
        return ""

    def _acknowledge_after(self, delay_ms: int) -> None:
        self._cancel_ack()
        if delay_ms <= 0:
            self._acknowledge()
            return
        self._ack = asyncio.get_running_loop().call_later(delay_ms / 1000, self._acknowledge)

    def _acknowledge(self) -> None:
        self._ack = None
        self._session.announce(text=ACKNOWLEDGE)

    def _cancel_ack(self) -> None:
        if self._ack is not None:
            self._ack.cancel()
            self._ack = None

    # --- the client's side

    def appended(self, kind: str, delegation_id: str | None) -> None:
        """Context the client appended: commentary and thinking stand in for the
        acknowledgement; commentary with a delegation's id is its answer."""
        if delegation_id is not None:
            delegated = self._open.get(delegation_id)
            if delegated is None:
                raise BadEvent(f"no open delegation {shown(delegation_id)}", "invalid_value",
                               "delegation_id")  # fmt: skip
            if delegated.target != "client":
                raise BadEvent(
                    "a delegation id is not accepted with Responses delegation: its backend "
                    "answers it", "invalid_value", "delegation_id",
                )  # fmt: skip
        if kind in ("session.commentary.append", "session.thinking.append"):
            self._cancel_ack()
        if kind == "session.commentary.append" and delegation_id is not None:
            self._open.pop(delegation_id, None)

    def add_item(self, item: dict[str, object]) -> None:
        """response.item.create: a message or a function call's output for the backend."""
        self._need_backend("response.item.create").add_item(item)

    def create_response(self) -> None:
        """response.create: the backend answers its conversation as it stands."""
        self._need_backend("response.create").create_response()

    def _need_backend(self, kind: str) -> Backend:
        if self._backend is None:
            raise BadEvent(f"{kind} requires Responses delegation", "invalid_request", "type")
        return self._backend

    def _backend_config(self) -> ResponsesBackend:
        assert self.config is not None and self.config.responses is not None
        return self.config.responses

    def update(self, changed: Delegation) -> None:
        """session.update's delegation: the same type, its settings merged."""
        current = self.config
        if current is None and changed.type == "client":  # the default, now named
            self.config = changed.model_copy(update={"responses": None})
            return
        if current is None or changed.type != current.type:
            raise BadEvent(
                f"the delegation type cannot change (this session's is "
                f"{current.type if current else 'client'})",
                "immutable_field_update", "session.delegation.type",
            )  # fmt: skip
        backend = current.responses
        if changed.responses is not None and backend is not None:
            asked = changed.responses.model_dump(exclude_unset=True)
            backend = backend.model_copy(update=asked)
            backend_tools(backend, self._session.limits)  # StartProblem: one it cannot run
            if (refused := self._session.tools.refused(backend_servers(backend))) is not None:
                raise StartProblem(refused, "session.delegation.responses.tools")
        delay = changed.acknowledgement_delay_ms
        if delay is None:
            delay = current.acknowledgement_delay_ms
        self.config = current.model_copy(
            update={"responses": backend, "acknowledgement_delay_ms": delay}
        )

    def close(self) -> None:
        """The session is over: no acknowledgement, and the backend stops."""
        self._cancel_ack()
        if self._backend is not None:
            self._backend.close()


def _task(arguments: str) -> str:
    """A task the model wrote out, if it did (a model given its own delegate tool)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return ""
    task = parsed.get("task") if isinstance(parsed, dict) else None
    return task if isinstance(task, str) else ""
