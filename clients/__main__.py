"""`python -m clients URL file.wav`: say a WAV to a running agent over WebRTC, print the events."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from clients.wav import load_wav
from clients.webrtc import AgentClient


async def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Say a WAV to the agent and print the events.")
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("wav", help="16-bit WAV to speak")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    client = AgentClient(args.url)
    try:
        await client.connect()
        client.mic.say(load_wav(args.wav))
        done = await client.wait_for("response.done", timeout_s=args.timeout)
        for _, event in client.events:
            sys.stdout.write(json.dumps(event) + "\n")
        return 0 if done["response"]["status"] == "completed" else 1
    finally:
        await client.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
