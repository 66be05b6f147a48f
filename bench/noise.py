"""Questions asked in noisy rooms: what the turn detector and Whisper make of them.

    python -m bench.noise              # 10 questions, pink, brown and babble noise
    python -m bench.noise --quick      # 5 questions, pink and babble

Each question (espeak-ng, ten voices) is mixed with noise made in code (tests/support/
rooms.py) at 20, 10, 5 and 0 dB SNR, the noise running 1 s before it and 1.5 s after,
and fed through the session's audio front end (noise suppression as configured) and
turn detector (Silero or webrtcvad), then Whisper (tiny.en) on each utterance, as a
call would. For each voice detector and suppressor it prints:

- answered: questions heard as one turn or more with words in it, of those asked;
- WER of the transcript of the utterances over the question, against what was said;
- end of turn: how long after the question ended its turn did, median, and the median
  change against the same question without noise (the target at 10 dB: at most +150 ms);
- replies to 60 s of each noise alone at the 10 dB level (turns with words in them);
- CPU per call: front end and voice detector, ms per second of audio.

It asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

from app.audio.front_end import FrontEnd
from app.audio.vad import TurnDetector, UtteranceEnded
from app.config import SttSettings, VadSettings
from app.config.audio import NoiseReduction
from app.engines.silero_vad import SileroVad
from app.engines.stt import WhisperSTT
from bench import quick_run
from tests.support.rooms import (
    active_rms,
    babble,
    brown_noise,
    espeak,
    pcm16,
    pink_noise,
    trimmed,
)
from tests.support.speech import word_error_rate

RATE = 16_000
QUESTIONS = [
    ("en-us", "What is the capital of France?"),
    ("en-gb", "How far away is the moon from the earth?"),
    ("en-us+m3", "What time does the library open tomorrow?"),
    ("en-gb-x-rp", "Who wrote the novel Pride and Prejudice?"),
    ("en+f2", "How do I make a cup of green tea?"),
    ("en-us+f4", "What is the weather like in London today?"),
    ("en-029", "Why is the sky blue during the day?"),
    ("en-gb-scotland", "Which planet is the largest in our solar system?"),
    ("en-us+m7", "Where can I buy fresh bread near here?"),
    ("en+f3", "Can you tell me a joke about cats?"),
]
SNRS = [20, 10, 5, 0]
LEAD_S, TAIL_S = 1.0, 1.5
CHUNK = 320  # 20 ms, as a call delivers it


@dataclass(frozen=True)
class Front:
    detector: str  # silero, webrtcvad
    suppression: NoiseReduction

    @property
    def name(self) -> str:
        return f"{self.detector}+{self.suppression}"


@dataclass
class Heard:
    answered: bool
    wer: float
    end_ms: float | None  # when the turn over the question ended, after the question did
    cpu_ms: float  # front end and detector


Ended = list[tuple[int, UtteranceEnded]]


def run_front(front: Front, silero: SileroVad, audio: bytes) -> tuple[Ended, float]:
    """Utterances ended, each with the stream position it ended at, and the CPU spent."""
    settings = VadSettings(detector=front.detector)
    voice = silero.detector() if front.detector == "silero" else None
    detector = TurnDetector(settings, voice=voice)
    ears = FrontEnd("bench", cancel_echo=False)
    ears.suppress(front.suppression)
    ended = []
    started = time.process_time()
    for offset in range(0, len(audio), CHUNK * 2):
        heard, judged = ears.process(audio[offset : offset + CHUNK * 2])
        for event in detector.push(heard, judged):
            if isinstance(event, UtteranceEnded):
                ended.append((detector.position_ms, event))
    return ended, (time.process_time() - started) * 1000


async def hear(stt: WhisperSTT, front: Front, silero: SileroVad, speech: np.ndarray,
               noise: np.ndarray | None, snr: float | None, text: str) -> Heard:  # fmt: skip
    lead, tail = int(LEAD_S * RATE), int(TAIL_S * RATE)
    padded = np.concatenate([np.zeros(lead), speech, np.zeros(tail)])
    if noise is None or snr is None:
        room = padded
    else:
        gain = active_rms(speech) / 10 ** (snr / 20)
        room = padded + noise[: len(padded)] * gain
    ended, cpu_ms = run_front(front, silero, pcm16(room))
    start_ms, end_ms = LEAD_S * 1000, (lead + len(speech)) / RATE * 1000
    over = [(at, e) for at, e in ended if e.audio_start_ms <= end_ms and e.audio_end_ms >= start_ms]
    words = [(await stt.transcribe(e.audio)).text for _, e in over]
    said = " ".join(w for w in words if w.strip())
    turn_end = next((at - end_ms for at, e in over if e.audio_end_ms >= end_ms - 300), None)
    seconds = len(room) / RATE
    return Heard(bool(said), word_error_rate(text, said), turn_end, cpu_ms / seconds)


async def replies_to_noise(stt: WhisperSTT, front: Front, silero: SileroVad,
                           noise: np.ndarray) -> int:  # fmt: skip
    ended, _ = run_front(front, silero, pcm16(noise))
    return sum([bool((await stt.transcribe(e.audio)).text.strip()) for _, e in ended])


async def run(quick: bool) -> None:
    stt = WhisperSTT(SttSettings())
    silero = SileroVad(VadSettings())
    questions = QUESTIONS[: 5 if quick else 10]
    speech = {text: trimmed(espeak(text, voice)) for voice, text in questions}
    level = float(np.mean([active_rms(s) for s in speech.values()]))
    longest = max(len(s) for s in speech.values()) + int((LEAD_S + TAIL_S) * RATE)
    noises = {"pink": pink_noise(longest), "babble": babble(longest)}
    if not quick:
        noises["brown"] = brown_noise(longest)
    fronts = [Front("webrtcvad", "off"), Front("silero", "off"), Front("silero", "near_field")]
    if not quick:
        fronts.append(Front("silero", "far_field"))
    for front in fronts:
        print(f"\n## {front.name}")
        clean = {text: await hear(stt, front, silero, speech[text], None, None, text)
                 for text in speech}  # fmt: skip
        report("clean", list(clean.values()), None)
        cpu = [h.cpu_ms for h in clean.values()]
        for kind, noise in noises.items():
            for snr in SNRS:
                heard = {text: await hear(stt, front, silero, speech[text], noise, snr, text)
                         for text in speech}  # fmt: skip
                report(f"{kind} {snr:>2} dB", list(heard.values()), clean)
                cpu += [h.cpu_ms for h in heard.values()]
        for kind in noises:
            alone = {"pink": pink_noise, "brown": brown_noise}.get(kind)
            sixty = alone(60 * RATE, seed=9) if alone else babble(60 * RATE)
            replies = await replies_to_noise(stt, front, silero, sixty * level / 10**0.5)
            print(f"  {kind} alone for 60 s at the 10 dB level: {replies} replies")
        print(f"  CPU per call: {statistics.median(cpu):.2f} ms per second of audio")
    stt.close()


def report(label: str, heard: list[Heard], clean: dict[str, Heard] | None) -> None:
    answered = sum(h.answered for h in heard)
    wer = statistics.mean(h.wer for h in heard)
    ends = [h.end_ms for h in heard if h.end_ms is not None]
    line = f"  {label:12s} answered {answered:2d}/{len(heard)}  WER {wer:5.2f}"
    if ends:
        line += f"  end of turn +{statistics.median(ends):4.0f} ms"
    if clean is not None:
        pairs = [h.end_ms - c.end_ms for h, c in zip(heard, clean.values(), strict=True)
                 if h.end_ms is not None and c.end_ms is not None]  # fmt: skip
        if pairs:
            line += f" ({statistics.median(pairs):+4.0f} ms against clean)"
        line += f"  WER against clean {wer - statistics.mean(c.wer for c in clean.values()):+.2f}"
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    asyncio.run(run(quick_run(__doc__, "5 questions, pink and babble", argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
