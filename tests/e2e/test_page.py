"""The page in real Chromium, with a fake microphone fed from a speech WAV."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.support.server import REPO, ServerProcess
from tests.support.speech import word_error_rate

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
QUESTION = "What is the capital of France?"
OUTPUT = REPO / "test-output"


@pytest.fixture
async def browser_page(tmp_path: Path, speech: Callable[[str], Path]) -> AsyncIterator[object]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make test installs it)")
    from playwright.async_api import async_playwright

    wav = speech(QUESTION)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--use-fake-ui-for-media-stream",
                "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={wav}%noloop",
                "--autoplay-policy=no-user-gesture-required",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
                "--disable-features=WebRtcHideLocalIpsWithMdns",
            ],  # fmt: skip
        )
        context = await browser.new_context(viewport={"width": 900, "height": 760})
        page = await context.new_page()
        try:
            yield page
        finally:
            await browser.close()


async def test_talking_to_the_page(agent_server: ServerProcess, browser_page) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    await page.goto(agent_server.url)
    # Record every state the indicator shows, however briefly.
    await page.evaluate(
        """() => { window.seenStates = [];
        const el = document.getElementById('state');
        new MutationObserver(() => window.seenStates.push(el.dataset.state))
          .observe(el, {attributes: true, childList: true, subtree: true}); }"""
    )
    await page.click("#connect")
    user = page.locator("#transcript .turn.user").first
    await user.wait_for(timeout=60_000)
    heard = await user.inner_text()
    assert word_error_rate(QUESTION, heard) <= 0.25, heard
    agent = page.locator("#transcript .turn.assistant").first
    await agent.wait_for(timeout=60_000)
    await page.wait_for_function(
        "document.querySelector('#latency').textContent.includes('ms')", timeout=60_000
    )
    OUTPUT.mkdir(exist_ok=True)
    await page.screenshot(path=str(OUTPUT / "page-conversation.png"), full_page=True)
    assert (await agent.inner_text()).strip()
    assert "speaking" in await page.evaluate("window.seenStates")
    assert await page.locator("#error").is_hidden()
    await page.click("#disconnect")
    assert await page.locator("#state").get_attribute("data-state") == "idle"
