from __future__ import annotations

from tests.session.conftest import _close_speakers

__all__ = ["_close_speakers"]  # session doubles here too: their tracks are closed after each test
