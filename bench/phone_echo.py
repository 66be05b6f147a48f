"""How loud a phone line's echo may be before the echo canceller or guard lets it through.

    python -m bench.phone_echo                     # return loss 6, 10, 12, 15, 20 dB
    python -m bench.phone_echo --return-loss 8 12
    python -m bench.phone_echo --front cancelled+guard

A Python phone (tests/support/rtp_phone.py) calls the echo agent over SIP, says one
sentence, and feeds the agent's voice back into its microphone `return loss` dB down and
100 ms late, as a line without echo cancellation does. With the echo agent, an echo
heard as speech becomes a turn that is played back and echoed again, so the count of
turns over 20 s says how much got through. Run with the echo canceller and the guard on
(phone calls' default), each alone, and neither. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from bench import machine
from tests.support.rtp_phone import PhoneCall
from tests.support.server import ServerProcess, free_udp_port
from tests.support.speech import speak_to_wav, telephone_pcm

LISTEN_S = 20.0
FRONTS = {  # name: (echo cancellation, echo guard) for phone calls
    "cancelled+guard": ("true", "true"),  # phone calls' default
    "cancelled": ("true", "false"),
    "guard": ("false", "true"),
    "neither": ("false", "false"),
}


async def turns(server: ServerProcess, return_loss_db: float, sentence: bytes) -> int:
    call = await PhoneCall.open(server, return_loss_db)
    try:
        call.phone.say(sentence)
        await asyncio.sleep(LISTEN_S)
        return call.count("input_audio_buffer.committed")
    finally:
        await call.close()
        await asyncio.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--return-loss", type=float, nargs="+", default=[6, 10, 12, 15, 20])
    parser.add_argument("--front", nargs="+", choices=list(FRONTS), default=list(FRONTS))
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="phone-echo-"))
    wav = folder / "sentence.wav"
    speak_to_wav("Please read back my account number, slowly and clearly.", wav)
    sentence = telephone_pcm(wav)
    fronts = {name: FRONTS[name] for name in args.front}
    servers = {
        name: ServerProcess(
            [
                "--agent",
                "echo",
                "--sip-port",
                str(free_udp_port()),
                "--audio-echo-cancellation-phones",
                cancel,
                "--vad-echo-guard-phones",
                guard,
            ],
            folder / f"{name}.log",
        )  # fmt: skip
        for name, (cancel, guard) in fronts.items()
    }
    try:
        for server in servers.values():
            server.wait_healthy()
        print(f"turns in {LISTEN_S:.0f} s after one sentence (1 = the echo never became a turn)")
        print("return loss dB " + "".join(f"{name:>17}" for name in servers))
        for loss in args.return_loss:
            counts = [asyncio.run(turns(server, loss, sentence)) for server in servers.values()]
            print(f"{loss:>14.0f} " + "".join(f"{count:>17}" for count in counts), flush=True)
    finally:
        for server in servers.values():
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
