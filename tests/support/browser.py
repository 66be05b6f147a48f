"""Real Chromium for the browser tests, with a fake microphone that plays a WAV once."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextlib.asynccontextmanager
async def chromium(microphone: Path) -> AsyncIterator[Any]:
    """A headless Chromium whose microphone plays `microphone` (with its lead-in) once."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make test installs it)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={microphone}%noloop",
                "--autoplay-policy=no-user-gesture-required",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
                "--disable-features=WebRtcHideLocalIpsWithMdns,LocalNetworkAccessChecks",
            ],  # fmt: skip
        )
        try:
            yield launched
        finally:
            await launched.close()
