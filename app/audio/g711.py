"""G.711 (ITU-T): μ-law and A-law, 8 bits a sample at 8 kHz, to and from s16 PCM.

What telephony speaks, and what a Realtime client may choose for its socket
(audio/pcmu, audio/pcma). Table-driven: decoding is one lookup per byte, and
encoding one lookup per 16-bit value.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

import numpy as np

Law = Literal["ulaw", "alaw"]
RATE = 8_000


def _ulaw_to_linear(code: np.ndarray) -> np.ndarray:
    code = ~code.astype(np.int32) & 0xFF
    sign = code & 0x80
    exponent = (code >> 4) & 0x07
    magnitude = ((((code & 0x0F) << 3) + 0x84) << exponent) - 0x84
    return np.where(sign != 0, -magnitude, magnitude)


def _alaw_to_linear(code: np.ndarray) -> np.ndarray:
    code = code.astype(np.int32) ^ 0x55
    sign = code & 0x80
    exponent = (code >> 4) & 0x07
    mantissa = code & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << (exponent - 1)
    )
    return np.where(sign != 0, magnitude, -magnitude)


@lru_cache(maxsize=2)
def _decode_table(law: Law) -> np.ndarray:
    codes = np.arange(256)
    linear = _ulaw_to_linear(codes) if law == "ulaw" else _alaw_to_linear(codes)
    return linear.astype(np.int16)


@lru_cache(maxsize=2)
def _encode_table(law: Law) -> np.ndarray:
    """For each s16 value (offset by 32768), the code whose decoded value is nearest."""
    decoded = _decode_table(law).astype(np.int32)
    order = np.argsort(decoded, kind="stable")
    ordered = decoded[order]
    values = np.arange(-32768, 32768)
    upper = np.clip(np.searchsorted(ordered, values), 1, len(ordered) - 1)
    lower = upper - 1
    nearer = np.where(values - ordered[lower] <= ordered[upper] - values, lower, upper)
    return order[nearer].astype(np.uint8)


def decode(data: bytes, law: Law) -> bytes:
    """G.711 bytes to s16 PCM (same rate)."""
    return _decode_table(law)[np.frombuffer(data, dtype=np.uint8)].tobytes()


def encode(pcm: bytes, law: Law) -> bytes:
    """s16 PCM to G.711 bytes (same rate)."""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.int32) + 32768
    return _encode_table(law)[samples].tobytes()
