from __future__ import annotations

import asyncio

import pytest

from app.errors import EndOfStream
from app.streams import Channel


async def test_the_consumer_reads_everything_then_the_end() -> None:
    channel: Channel[int] = Channel(2)

    async def produce() -> None:
        try:
            for n in range(5):
                await channel.put(n)
        finally:
            channel.close()

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0.01)
    assert not producer.done(), "the producer waits while two items are unread"
    assert [n async for n in channel] == [0, 1, 2, 3, 4]
    with pytest.raises(EndOfStream):
        await channel.get()
    await producer


async def test_closing_wakes_a_waiting_consumer_and_a_full_channel_still_ends() -> None:
    channel: Channel[str] = Channel(1)
    waiting = asyncio.create_task(channel.get())
    await asyncio.sleep(0.01)
    channel.close()
    with pytest.raises(EndOfStream):
        await waiting

    full: Channel[str] = Channel(1)
    await full.put("last")
    full.close()  # no room for a marker: the end is known from the flag
    assert [item async for item in full] == ["last"]
    with pytest.raises(EndOfStream):
        await full.put("more")
