"""The audio every transport hands a session: 16 kHz mono s16 PCM."""

from __future__ import annotations

INBOUND_RATE = 16_000
BYTES_PER_SAMPLE = 2
BYTES_PER_S = INBOUND_RATE * BYTES_PER_SAMPLE
BYTES_PER_MS = BYTES_PER_S // 1000
