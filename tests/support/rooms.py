"""The rooms callers are in, made in code: steady noise (pink, brown), babble from other
voices (espeak-ng), and the agent's own voice coming back as echo at a set loss and
delay. For the end-to-end tests and bench/rooms.py; nothing is downloaded."""

from __future__ import annotations

import subprocess
import tempfile
import wave

import numpy as np

from app.audio.resample import Resampler

BABBLE = [
    ("en-gb", "The meeting moved to Thursday because the room was booked."),
    ("en-us+f3", "I think we should order more paper for the printer next week."),
    ("en-us+m4", "Did anyone see where I left the keys to the blue van?"),
    ("en-gb+f2", "She said the train was late again this morning, as usual."),
]


def pink_noise(samples: int, seed: int = 1) -> np.ndarray:
    """1/f noise, unit RMS: the spectrum of a room's hum and air."""
    return _shaped(samples, seed, lambda f: 1 / np.sqrt(np.maximum(f, 1e-3)))


def brown_noise(samples: int, seed: int = 2) -> np.ndarray:
    """1/f² noise, unit RMS: traffic, an engine."""
    return _shaped(samples, seed, lambda f: 1 / np.maximum(f, 1e-3))


def _shaped(samples: int, seed: int, gain: object) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    spectrum *= gain(np.fft.rfftfreq(samples))  # type: ignore[operator]
    noise = np.fft.irfft(spectrum, samples)
    return noise / np.sqrt(np.mean(noise**2))


def espeak(text: str, voice: str = "en-us", rate: int = 16_000) -> np.ndarray:
    """espeak-ng speech at `rate`, float in -1..1."""
    with tempfile.NamedTemporaryFile(suffix=".wav") as out:
        subprocess.run(["espeak-ng", "-v", voice, "-w", out.name, text], check=True)
        with wave.open(out.name) as wav:
            source = wav.getframerate()
            data = np.frombuffer(wav.readframes(wav.getnframes()), np.int16)
    pcm = Resampler(rate).pcm(data, source)
    return np.frombuffer(pcm, np.int16).astype(np.float64) / 32768


def babble(samples: int, rate: int = 16_000) -> np.ndarray:
    """Several other voices talking at once, looped to `samples`, unit RMS."""
    voices = [espeak(text, voice, rate) for voice, text in BABBLE]
    mixed = np.zeros(samples)
    for n, voice in enumerate(voices):
        voice = voice / np.sqrt(np.mean(voice**2))
        start = n * rate // 3  # staggered, so they never all pause together
        looped = np.tile(voice, samples // len(voice) + 2)[start : start + samples]
        mixed += looped
    return mixed / np.sqrt(np.mean(mixed**2))


def trimmed(speech: np.ndarray, threshold: float = 0.01) -> np.ndarray:
    """Without espeak-ng's silence before and after: speech that ends where its sound does
    (`threshold`: 0.01 of full scale for floats; give ~300 for int16 samples)."""
    loud = np.flatnonzero(np.abs(speech) > threshold)
    return speech[loud[0] : loud[-1] + 1] if len(loud) else speech


def active_rms(speech: np.ndarray, frame: int = 320) -> float:
    """RMS over the frames of `speech` that hold speech (within 30 dB of its loudest)."""
    frames = speech[: len(speech) // frame * frame].reshape(-1, frame)
    power = np.mean(frames**2, axis=1)
    active = power[power > power.max() / 1000]
    return float(np.sqrt(np.mean(active)))


def mixed(speech: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """`speech` with `noise` under it at `snr_db` (speech's active part against the
    noise); the noise runs on before and after the speech as long as it is."""
    out = noise[: max(len(noise), len(speech))].copy()
    gain = active_rms(speech) / 10 ** (snr_db / 20)
    out *= gain
    out[: len(speech)] += speech
    return out


def echo(voice: np.ndarray, loss_db: float, delay_ms: float, rate: int = 16_000) -> np.ndarray:
    """What a microphone hears of `voice` played into the room: `loss_db` quieter (echo
    return loss), `delay_ms` later, through a short room response (decaying taps)."""
    delay = int(rate * delay_ms / 1000)
    rng = np.random.default_rng(3)
    taps = rng.standard_normal(int(rate * 0.05)) * np.exp(
        -np.arange(int(rate * 0.05)) / (rate * 0.01)
    )
    taps[0] = 1.0
    taps /= np.sqrt(np.sum(taps**2))
    room = np.convolve(voice, taps)[: len(voice)]
    out = np.zeros(len(voice) + delay)
    out[delay:] = room * 10 ** (-loss_db / 20)
    return out


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes()
