"""`python -m clients URL file.wav`: say a WAV to a running agent over WebRTC, then print
what each side said and how long the agent took (`--events`: every event as JSON)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import wave
from typing import Any

import httpx

from clients.wav import load_wav
from clients.webrtc import AgentClient


def summary(client: AgentClient, done: dict[str, Any]) -> list[str]:
    """You said, the agent said, and the turn's latency, in lines for a person."""
    heard = [e["transcript"] for e in client.of_type(
        "conversation.item.input_audio_transcription.completed")]  # fmt: skip
    said = [e["transcript"] for e in client.of_type("response.output_audio_transcript.done")]
    lines = [f"you said:    {' '.join(heard).strip() or '(nothing heard)'}",
             f"agent said:  {' '.join(said).strip() or '(nothing)'}"]  # fmt: skip
    response = done["response"]
    if response["status"] != "completed":
        details = response.get("status_details") or {}
        reason = (details.get("error") or {}).get("message") or details.get("reason") or ""
        lines.append(f"reply {response['status']}{': ' + reason if reason else ''}")
    timings = response.get("timings_ms") or {}
    ended = client.mic.speech_ended_at
    first = client.recording.first_voice_after(ended) if ended is not None else None
    if ended is not None and first is not None:
        stages = ", ".join(f"{name} {ms:.0f}" for name, ms in timings.items())
        lines.append(f"latency:     {1000 * (first - ended):.0f} ms from the end of your speech "
                     f"to the agent's voice{f' ({stages} ms)' if stages else ''}")  # fmt: skip
    return lines


async def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Say a WAV to the agent; print both sides.")
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("wav", help="16-bit WAV to speak")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (60)")
    parser.add_argument("--events", action="store_true", help="print every event as JSON")
    args = parser.parse_args(argv)
    try:
        samples = load_wav(args.wav)
    except (OSError, ValueError, wave.Error) as exc:
        sys.stderr.write(f"cannot read {args.wav}: {exc}\n")
        return 2
    client = AgentClient(args.url)
    try:
        await client.connect()
        client.mic.say(samples)
        done = await client.wait_for("response.done", timeout_s=args.timeout)
        await asyncio.sleep(0.5)  # the reply's audio is still arriving
    except httpx.HTTPError as exc:
        sys.stderr.write(f"cannot reach the agent at {args.url}: {exc or type(exc).__name__}\n")
        return 1
    except (RuntimeError, TimeoutError) as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    finally:
        await client.close()
    lines = [json.dumps(event) for _, event in client.events] if args.events else []
    sys.stdout.write("\n".join([*lines, *summary(client, done)]) + "\n")
    return 0 if done["response"]["status"] == "completed" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
