"""Why a session verb was refused. The session is unchanged; a dialect tells the client."""

from __future__ import annotations


class Refused(ValueError):
    """A verb the session cannot carry out as asked."""


class OptionError(Refused):
    """A configuration the session cannot take; `option` names the one at fault."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


class NothingToCommit(Refused):
    pass


class ResponseInProgress(Refused):
    pass


class NoActiveResponse(Refused):
    pass


class NothingPlaying(Refused):
    pass


class UnknownItem(Refused):
    pass


class ItemExists(Refused):
    pass


class ItemInUse(Refused):
    """The item is being spoken right now."""


class BadTruncation(Refused):
    """A truncation past the end of what was said."""


class CannotAnswerText(Refused):
    """This agent only answers speech (echo)."""


class ItemTooLong(Refused):
    """An item's text over limits.item_chars."""


class ConversationFull(Refused):
    """The conversation holds limits.history_chars of text already."""
