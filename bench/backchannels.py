"""Backchannels and real interruptions over a reply: what the listener hears.

    python -m bench.backchannels              # Kokoro and espeak-ng voices, every phrase
    python -m bench.backchannels --quick      # one voice each

A session with the real turn detection and the real Whisper (tiny.en) hears a question,
and its reply (an LLM and a TTS double: a steady tone, so every gap in it is the hold)
plays on the real paced track. 1.5 s into the reply the user says a backchannel ("Yeah",
"Mm-hmm", ...) or a real interruption ("Wait, stop."), in a natural voice (Kokoro) or
espeak-ng's, fed in real time. For each it prints:

- a backchannel: whether the reply went on, and the longest silence inside it after the
  onset (the hold the listener hears; the target is at most 0.5 s);
- an interruption: whether the reply stopped, and when it stopped for good, from the onset
  of the speech (the target is the confirm window + 60 ms), and whether it was taken for a
  backchannel, for good or for a while first ("Okay, but why?").

It asserts nothing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass

import numpy as np

from app.agent.responders import AgentResponder
from app.audio.resample import Resampler
from app.config import Settings, SttSettings, TtsSettings, VadSettings
from app.engines import Engines
from app.engines.silero_vad import SileroVad
from app.engines.stt import WhisperSTT
from app.engines.tts import KokoroTTS
from app.session import messages as msg
from app.session.session import Session
from bench import quick_run
from bench.latency import percentile
from tests.session.fakes import FakeLLM, FakeTTS, MessageLog, Speaker
from tests.support.rooms import trimmed

BACKCHANNELS = ["Yeah.", "Mm-hmm.", "Okay.", "Uh-huh.", "Right.", "I see.", "Yeah, okay.", "Sure."]
# The last two begin as a backchannel would: the reply may go on for a while first.
INTERRUPTIONS = ["Wait, stop.", "No, I meant Paris.", "Hold on a second.", "Stop.",
                 "Actually, tell me about dogs.", "Okay, but why?",
                 "Yeah, but what about Rome?"]  # fmt: skip
QUESTION = "Please tell me a long story about a brave knight."
RATE = 16_000
OVER_AFTER_S = 1.5  # into the reply's audio


@dataclass
class Trial:
    phrase: str
    voice: str
    backchannel: bool
    resumed: bool  # the reply went on to its end
    longest_gap_s: float  # the longest silence in the reply after the onset
    stopped_after_s: float | None  # when its audio stopped for good, from the onset
    went_on_first: bool  # held, then let go on, before it stopped for good


def espeak(text: str, voice: str) -> np.ndarray:
    with tempfile.NamedTemporaryFile(suffix=".wav") as out:
        subprocess.run(["espeak-ng", "-v", voice, "-w", out.name, text], check=True)
        with wave.open(out.name) as wav:
            rate = wav.getframerate()
            data = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    return np.frombuffer(Resampler(RATE).pcm(data, rate), np.int16)


def kokoro(tts: KokoroTTS, text: str, voice: str) -> np.ndarray:
    speech = tts._synthesize_sync(text, voice, 1.0)  # noqa: SLF001 - a bench's shortcut
    return np.frombuffer(Resampler(RATE).pcm(speech.samples, speech.rate), np.int16)


async def feed(session: Session, pcm: bytes) -> None:
    """Real time, 20 ms at a time."""
    t0 = time.monotonic()
    for offset in range(0, len(pcm), 640):
        await asyncio.sleep(max(0.0, t0 + offset / 32_000 - time.monotonic()))
        session.push_audio(pcm[offset : offset + 640])


async def one(
    stt: WhisperSTT, silero: SileroVad, question: np.ndarray, over: np.ndarray, phrase: str,
    voice: str, backchannel: bool, settings: Settings,
) -> Trial:  # fmt: skip
    llm = FakeLLM()
    llm.echo_question = True  # a reply of a dozen words
    tts = FakeTTS()
    tts.seconds_per_word = 0.5  # about 6 s of audio
    engines = Engines(stt=stt, llm=llm, tts=tts)
    speaker = Speaker()
    sent = MessageLog()
    session = Session(
        "sess_test", settings, AgentResponder(engines), speaker, sent.append,
        output_level=speaker.output_level_db, voice_model=silero,
    )  # fmt: skip
    session.start()
    silence = bytes(RATE * 2)
    listening = asyncio.create_task(feed(session, silence))
    try:
        await feed(session, bytes(RATE) + question.tobytes() + silence)
        while not speaker.voiced_times():
            session.push_audio(bytes(640))
            await asyncio.sleep(0.02)
        start = speaker.voiced_times()[0]
        while time.monotonic() < start + OVER_AFTER_S:
            session.push_audio(bytes(640))
            await asyncio.sleep(0.02)
        onset = time.monotonic()
        await feed(session, over.tobytes() + bytes(RATE * 3))  # and 3 s of silence
        deadline = time.monotonic() + 20
        while not sent.of(msg.ReplyEnded) and time.monotonic() < deadline:
            session.push_audio(bytes(640))
            await asyncio.sleep(0.02)
    finally:
        listening.cancel()
        await session.close()
        await speaker.close()
    ended = sent.of(msg.ReplyEnded)
    resumed = bool(ended) and ended[0].status == "completed"
    voiced = [at for at in speaker.voiced_times() if at >= onset - 0.1]
    gaps = [(a, b - a) for a, b in zip(voiced, voiced[1:], strict=False)]
    longest = max((gap for _, gap in gaps), default=0.0)
    # Its audio stopped for good at the last hold before it was cut; what plays after the
    # cut is the next reply's.
    cut_at = sent.times[sent.at(msg.ReplyEnded)[0]] if ended else time.monotonic()
    holds = [at for at, gap in gaps if gap > 0.1 and at < cut_at]
    held = holds[-1] if holds else (voiced[-1] if voiced else onset)
    stopped = held - onset if not resumed else None
    return Trial(phrase, voice, backchannel, resumed, longest, stopped, len(holds) > 1)


async def run(quick: bool, settings: Settings) -> list[Trial]:
    stt = WhisperSTT(settings.stt)
    silero = SileroVad(settings.vad)
    tts = KokoroTTS(TtsSettings())
    voices = [("kokoro", v) for v in tts.voices[: 1 if quick else 2]] + [
        ("espeak", v) for v in (["en-us"] if quick else ["en-us", "en-gb"])
    ]

    def say(kind: str, voice: str, text: str) -> np.ndarray:
        pcm = kokoro(tts, text, voice) if kind == "kokoro" else espeak(text, voice)
        return trimmed(pcm, threshold=300)

    question = espeak(QUESTION, "en-us")
    trials = []
    for phrases, backchannel in ((BACKCHANNELS, True), (INTERRUPTIONS, False)):
        for phrase in phrases:
            for kind, voice in voices:
                over = say(kind, voice, phrase)
                trial = await one(stt, silero, question, over, phrase, f"{kind}:{voice}",
                                  backchannel, settings)  # fmt: skip
                trials.append(trial)
                print_trial(trial, len(over) / RATE)
    stt.close()
    tts.close()
    return trials


def print_trial(trial: Trial, seconds: float) -> None:
    what = "went on" if trial.resumed else "stopped"
    stop = f", stopped {trial.stopped_after_s * 1000:.0f} ms in" if trial.stopped_after_s else ""
    stop += " (went on for a while first)" if trial.went_on_first and not trial.resumed else ""
    print(f"{trial.phrase:30s} {trial.voice:16s} {seconds:4.2f} s  reply {what}, longest "
          f"silence {trial.longest_gap_s * 1000:4.0f} ms{stop}", flush=True)  # fmt: skip


def summary(trials: list[Trial], window_ms: int) -> None:
    backs = [t for t in trials if t.backchannel]
    gaps = [t.longest_gap_s * 1000 for t in backs if t.resumed]
    print(f"\nbackchannels: the reply went on {len(gaps)} of {len(backs)}", end="")
    if gaps:
        print(f"; silence heard p50 {percentile(gaps, 50):.0f} ms, max {max(gaps):.0f} ms "
              f"(target: at most 500)")  # fmt: skip
    else:
        print()
    real = [t for t in trials if not t.backchannel]
    taken = sum(t.resumed for t in real)
    for_a_while = sum(t.went_on_first and not t.resumed for t in real)
    stops = [t.stopped_after_s * 1000 for t in real if t.stopped_after_s is not None]
    print(f"interruptions: stopped {len(real) - taken} of {len(real)}, taken for a backchannel "
          f"{taken}, let go on for a while first {for_a_while}", end="")  # fmt: skip
    if stops:
        print(f"; audio stopped p50 {percentile(stops, 50):.0f} ms, max {max(stops):.0f} ms "
              f"after the onset (target: window {window_ms} + 60)")  # fmt: skip
    else:
        print()


def main(argv: list[str] | None = None) -> int:
    quick = quick_run(__doc__, "one voice of each kind", argv)
    settings = Settings(_env_file=None, vad=VadSettings(), stt=SttSettings())
    trials = asyncio.run(run(quick, settings))
    summary(trials, settings.vad.interrupt_min_speech_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
