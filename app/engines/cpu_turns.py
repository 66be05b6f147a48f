"""The in-process engines that each use every core take turns at the CPU.

llama.cpp and onnxruntime (Kokoro) both run a pool of threads per call, and both pools
spin while they wait for each other's threads. Run side by side on two cores they slow
each other far more than their work adds up to: a 4-word clause took 480 ms to
synthesize while the LLM wrote the two tokens it may run ahead, and 330 ms once the LLM
had stopped (bench.latency's first clause). So a synthesis waits for the token being
written, at most one, and the LLM waits for the synthesis; neither waits for the other
to be read or played."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

T = TypeVar("T")


class CpuTurns:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def turn(self) -> AbstractContextManager[bool]:
        """Held while one engine call runs (a worker thread's, never the event loop's)."""
        return self._lock

    def each(self, items: Iterator[T]) -> Iterator[T]:
        """`items`, each computed in a turn of its own, none held between them."""
        while True:
            with self._lock:
                try:
                    item = next(items)
                except StopIteration:
                    return
            yield item
