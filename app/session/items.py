"""The conversation's items as a client edits them: typed messages and tool outputs
added, items read back, deleted, and replies truncated to what was heard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from app.config import LimitsSettings
from app.ids import new_id, shown
from app.session import messages as msg
from app.session.history import History, Message
from app.session.refusals import (
    BadTruncation,
    ConversationFull,
    ItemExists,
    ItemInUse,
    ItemTooLong,
    UnknownItem,
)
from app.session.speaking.reply import Emit, Reply


class Items:
    def __init__(
        self,
        history: History,
        emit: Emit,
        reply: Callable[[], Reply | None],
        limits: LimitsSettings | None = None,
    ) -> None:
        """`reply`: the reply the user may be hearing now, if any. `limits`: how much
        text an item, and the whole conversation, may hold."""
        self._history = history
        self._emit = emit
        self._reply = reply
        self._limits = limits or LimitsSettings()

    def _check_room(self, item_id: str, text: str) -> None:
        if self._history.find(item_id) is not None:
            raise ItemExists(f"item id {shown(item_id)} is already in the conversation")
        if len(text) > self._limits.item_chars:
            raise ItemTooLong(
                f"an item of {len(text)} characters; at most {self._limits.item_chars} "
                "(limits.item_chars)"
            )
        held = self._history.chars
        if held + len(text) > self._limits.history_chars:
            raise ConversationFull(
                f"the conversation holds {held} characters, and this item would pass the "
                f"{self._limits.history_chars} it may (limits.history_chars): delete items first"
            )

    def add(
        self, role: Literal["user", "assistant", "system"], text: str, item_id: str | None = None
    ) -> None:
        """Add a typed message to the conversation."""
        item_id = item_id or new_id("item")
        self._check_room(item_id, text)
        previous = self._history.last_item_id
        self._history.add(Message(role, text, item_id))
        self._emit(msg.TextItemAdded(item_id, role, text, previous))

    def add_tool_output(self, call_id: str, output: str, item_id: str | None = None) -> None:
        """The client's answer to a tool the agent called; create_response() to go on."""
        item_id = item_id or new_id("item")
        self._check_room(item_id, output)
        if self._history.find_call(call_id) is None:
            raise UnknownItem(f"no function call with call_id {shown(call_id)}")
        previous = self._history.last_item_id
        self._history.add(Message("tool", output, item_id, call_id=call_id))
        self._emit(msg.ToolOutputAdded(item_id, call_id, output, previous))

    def retrieve(self, item_id: str) -> Message:
        """An item as stored (a user's speech only while it is kept)."""
        message = self._history.find(item_id)
        if message is None:
            raise UnknownItem(f"no item {shown(item_id)}")
        return message

    def delete(self, item_id: str) -> None:
        reply = self._reply()
        if reply is not None and reply.item_id == item_id:
            raise ItemInUse("that item is still being spoken; cancel the response first")
        if not self._history.remove(item_id):
            raise UnknownItem(f"no item {shown(item_id)}")
        self._emit(msg.ItemDeleted(item_id))

    def truncate(self, item_id: str, audio_end_ms: int) -> None:
        """Only the first `audio_end_ms` of a reply were heard: forget the rest.

        A truncation can only shrink what counts as heard, never add to it.
        """
        reply = self._reply()
        if reply is not None and reply.item_id == item_id:
            reply.interrupt("client_cancelled", heard_ms=audio_end_ms)
            return
        message = self._history.find(item_id)
        if message is None or message.role != "assistant":
            raise UnknownItem(f"no assistant item {shown(item_id)}")
        if audio_end_ms > message.audio_ms:
            raise BadTruncation(
                f"audio_end_ms {audio_end_ms} is past the end of the item's audio "
                f"({message.audio_ms:.0f} ms)"
            )
        self._history.truncate(message, audio_end_ms)
        self._emit(msg.ItemTruncated(item_id, audio_end_ms))
