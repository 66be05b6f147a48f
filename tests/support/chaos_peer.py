"""A WebRTC caller in a process of its own, so a test can kill it (no BYE, no DTLS close)
or stop it (its network gone quiet) as a real phone or browser can vanish.

    python -m tests.support.chaos_peer URL WAV

It connects, then says WAV, waits for the reply to finish, and says it again, for ever.
Each server event's type is printed as a JSON line ({"event": type}), after a first line
with its session id.
"""

from __future__ import annotations

import asyncio
import json
import sys

from clients import AgentClient, load_wav


async def main(url: str, wav: str) -> None:
    client = AgentClient(url)
    await client.connect()
    say({"session_id": client.session_id})
    printer = asyncio.create_task(tell(client))
    said = load_wav(wav)
    turns = 0
    while True:
        client.mic.say(said)
        turns += 1
        await client.wait_for("response.done", count=turns, timeout_s=120)
        await asyncio.sleep(1)
    printer.cancel()


def say(line: dict[str, str]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def tell(client: AgentClient) -> None:
    """Each event as it comes (polled: the client keeps them in a list)."""
    told = 0
    while True:
        for _, event in client.events[told:]:
            say({"event": event["type"]})
        told = len(client.events)
        await asyncio.sleep(0.02)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
