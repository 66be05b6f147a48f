"""The in-process engines that each use every core take turns at the CPU.

llama.cpp and onnxruntime (Kokoro) both run a pool of threads per call, and both pools
spin while they wait for each other's threads. Run side by side on two cores they slow
each other far more than their work adds up to: a 4-word clause took 480 ms to
synthesize while the LLM wrote the two tokens it may run ahead, and 330 ms once the LLM
had stopped (bench.latency's first clause). So a synthesis waits for the token being
written, at most one, and the LLM waits for the synthesis; neither waits for the other
to be read or played.

A plain lock does not keep that promise: the LLM's thread takes it back the moment it
lets it go, before a waiting synthesis wakes, so a reply's first piece waited for one
token after another (up to ~200 ms in bench.latency) until the LLM ran out of slack. An
urgent synthesis (a reply's first piece: its listener waits) that asks for a turn is
therefore served before the LLM's next token. A later piece is not: it has audio ahead
of it, and while it is made another call's LLM may be writing that call's first piece."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class CpuTurns:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._taken = False
        self.asking = 0  # urgent turns asked for and not yet begun

    @contextmanager
    def turn(self, urgent: bool = False) -> Iterator[None]:
        """Held while one engine call runs (a worker thread's, never the event loop's);
        `urgent`: begun before the next of each()'s items."""
        asks = int(urgent)
        with self._changed:
            self.asking += asks
            try:
                self._changed.wait_for(lambda: not self._taken)
            finally:
                self.asking -= asks
            self._taken = True
        try:
            yield
        finally:
            self._give_back()

    def each(self, items: Iterator[T]) -> Iterator[T]:
        """`items`, each computed in a turn of its own, none held between them, and none
        begun while an urgent turn() is asked for."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: not self._taken and not self.asking)
                self._taken = True
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                self._give_back()
            yield item

    def _give_back(self) -> None:
        with self._changed:
            self._taken = False
            self._changed.notify_all()
