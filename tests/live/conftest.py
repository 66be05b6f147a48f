from __future__ import annotations

from tests.session.conftest import _close_doubles

__all__ = ["_close_doubles"]  # session doubles here too: closed after each test
