"""How loud a phone line's echo may be before the echo guard lets it through.

    python -m bench.phone_echo                     # return loss 6, 10, 12, 15, 20 dB
    python -m bench.phone_echo --return-loss 8 12

A Python phone (tests/support/rtp_phone.py) calls the echo agent over SIP, says one
sentence, and feeds the agent's voice back into its microphone `return loss` dB down and
100 ms late, as a line without echo cancellation does. With the echo agent, an echo
heard as speech becomes a turn that is played back and echoed again, so the count of
turns over 20 s says how much got through. Run with the guard on (phone calls' default,
vad.echo_margin_db as configured) and off. It prints figures; it asserts nothing.
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
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="phone-echo-"))
    wav = folder / "sentence.wav"
    speak_to_wav("Please read back my account number, slowly and clearly.", wav)
    sentence = telephone_pcm(wav)
    servers = {
        guard: ServerProcess(
            [
                "--agent",
                "echo",
                "--sip-port",
                str(free_udp_port()),
                "--vad-echo-guard-phones",
                guard,
            ],
            folder / f"guard-{guard}.log",
        )  # fmt: skip
        for guard in ("true", "false")
    }
    try:
        for server in servers.values():
            server.wait_healthy()
        print(f"turns in {LISTEN_S:.0f} s after one sentence (1 = the echo never became a turn)")
        print("return loss dB  guard on  guard off")
        for loss in args.return_loss:
            on = asyncio.run(turns(servers["true"], loss, sentence))
            off = asyncio.run(turns(servers["false"], loss, sentence))
            print(f"{loss:>14.0f} {on:>9} {off:>10}")
    finally:
        for server in servers.values():
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
