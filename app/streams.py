"""A bounded channel from one producer task to one consumer, closed by the producer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from app.errors import EndOfStream

T = TypeVar("T")

_END = object()


class Channel(Generic[T]):
    """put() waits while `maxsize` items are unread (backpressure on the producer).

    After close(), the consumer reads what is left, then get() raises EndOfStream,
    and iteration stops. close() never waits, so it is safe in a cancelled
    producer's `finally`.
    """

    def __init__(self, maxsize: int) -> None:
        self._items: asyncio.Queue[object] = asyncio.Queue(maxsize=maxsize)
        self._closed = False

    async def put(self, item: T) -> None:
        if self._closed:
            raise EndOfStream("the channel is closed")
        await self._items.put(item)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A full channel needs no marker: its consumer is not waiting, and finds
        # it closed once it has read the rest.
        with contextlib.suppress(asyncio.QueueFull):
            self._items.put_nowait(_END)

    async def get(self) -> T:
        if self._closed and self._items.empty():
            raise EndOfStream("the channel is closed")
        item = await self._items.get()
        if item is _END:
            raise EndOfStream("the channel is closed")
        return item  # type: ignore[return-value]

    async def __aiter__(self) -> AsyncIterator[T]:
        while True:
            try:
                yield await self.get()
            except EndOfStream:
                return
