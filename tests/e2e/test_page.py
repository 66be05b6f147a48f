"""The page in real Chromium, with a fake microphone fed from a speech WAV."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium
from tests.support.server import REPO, ServerProcess
from tests.support.speech import QUESTION, word_error_rate

pytestmark = pytest.mark.e2e

OUTPUT = REPO / "test-output"
# Record every state the indicator shows, however briefly, and every 20 ms the state
# beside how loud the reply audio was (its own analyser, not the page's meter).
WATCH_STATES = """() => { window.seenStates = []; window.samples = [];
  const el = document.getElementById('state');
  new MutationObserver(() => window.seenStates.push(el.dataset.state))
    .observe(el, {attributes: true, childList: true, subtree: true});
  let node = null;
  setInterval(() => {
    const remote = document.getElementById('remote').srcObject;
    if (!node && remote) {
      node = new AudioContext().createAnalyser();
      node.context.createMediaStreamSource(remote).connect(node);
    }
    if (!node) return;
    const data = new Float32Array(node.fftSize);
    node.getFloatTimeDomainData(data);
    const rms = Math.sqrt(data.reduce((sum, x) => sum + x * x, 0) / data.length);
    window.samples.push([performance.now(), el.dataset.state, rms]);
  }, 20); }"""
# Reply audio louder than this (RMS) is heard; "speaking" with none for this long is not.
AUDIBLE_RMS = 0.01
QUIET_MS = 600


def speaking_while_quiet(samples: list[list[Any]]) -> list[float]:
    """When the page said "speaking" though no reply audio was heard for QUIET_MS."""
    last_heard = -1e9
    wrong = []
    for at, state, rms in samples:
        if rms > AUDIBLE_RMS:
            last_heard = at
        elif state == "speaking" and at - last_heard > QUIET_MS:
            wrong.append(at)
    return wrong


@pytest.fixture
async def browser(speech: Callable[[str], Path]) -> AsyncIterator[Any]:
    async with chromium(speech(QUESTION)) as launched:
        yield launched


# The page asks for echo cancellation and noise suppression, as a product should; their
# adaptive processing made Whisper tiny.en mishear the fake microphone now and then
# ("the light, Simba Kitchen"). A test that checks what the server heard turns them off.
RAW_MICROPHONE = """(() => {
  const ask = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = (c) => ask({...c, audio: {...(c.audio || {}),
    echoCancellation: false, noiseSuppression: false, autoGainControl: false}});
})()"""


async def new_page(
    browser: Any, width: int = 900, height: int = 820, *, raw_microphone: bool = False
) -> Any:
    context = await browser.new_context(viewport={"width": width, "height": height})
    if raw_microphone:
        await context.add_init_script(RAW_MICROPHONE)
    return await context.new_page()


async def test_talking_to_the_page(agent_server: ServerProcess, browser: Any) -> None:
    page = await new_page(browser, raw_microphone=True)
    await page.goto(agent_server.url)
    processing = await page.evaluate(
        """async () => { const s = await navigator.mediaDevices.getUserMedia(
             {audio: {echoCancellation: true, noiseSuppression: true}});
           const got = s.getAudioTracks()[0].getSettings(); s.getTracks().forEach(t => t.stop());
           return [got.echoCancellation, got.noiseSuppression]; }"""
    )
    assert processing == [False, False], "the page's microphone is unprocessed in this test"
    # It names what the agent runs on, and says the bundled LLM is the small demo one.
    await page.wait_for_function("document.querySelector('#models').textContent.length > 0")
    models = await page.inner_text("#models")
    assert "Whisper" in models and "Qwen2.5-Coder-0.5B" in models and "Kokoro" in models
    assert "small demo model" in models, models
    await page.evaluate(WATCH_STATES)
    # Settings chosen before connecting are sent as session.update once the channel opens.
    await page.click("#settings summary")
    await page.wait_for_function("document.querySelector('#voice').options.length > 1")
    default_voice = await page.inner_text("#voice-in-use")
    voices = await page.eval_on_selector_all(
        "#voice option", "options => options.map(o => o.value)"
    )
    voice = next(name for name in voices if name != default_voice)
    await page.select_option("#voice", voice)
    await page.fill("#silence", "520")
    await page.click("#apply")
    assert "sent when you connect" in await page.inner_text("#settings-status")
    await page.click("#settings summary")

    await page.click("#connect")
    user = page.locator("#transcript .turn.user").first
    await user.wait_for(timeout=60_000)
    heard = await user.inner_text()
    assert word_error_rate(QUESTION, heard) <= 0.25, heard
    await page.wait_for_function(
        "document.querySelector('#state').dataset.state === 'speaking'", timeout=60_000
    )
    OUTPUT.mkdir(exist_ok=True)
    await page.screenshot(path=str(OUTPUT / "page-speaking.png"), full_page=True)
    await page.wait_for_function(
        "document.querySelector('#latency').textContent.includes('voice to voice')",
        timeout=60_000,
    )
    await page.wait_for_function(
        "document.querySelector('#state').dataset.state === 'listening'", timeout=60_000
    )
    await page.screenshot(path=str(OUTPUT / "page-conversation.png"), full_page=True)

    agent = page.locator("#transcript .turn.assistant").first
    assert (await agent.inner_text()).strip()
    assert "speaking" in await page.evaluate("window.seenStates")
    assert float(await page.get_attribute("#meter-out", "data-peak")) > 0.01, "heard the reply"
    assert float(await page.get_attribute("#meter-in", "data-peak")) > 0.01, "heard the mic"
    latency = await page.inner_text("#latency")
    assert "voice to voice" in latency and "first frame sent" in latency, latency
    # The server's timings count from the end of the speech: the turn ended after the
    # 520 ms of silence asked for.
    turn_end = re.search(r"turn end (\d+) ms", latency)
    assert turn_end and int(turn_end[1]) >= 520, latency
    # "speaking" only while the reply was heard; the top line names the voice chosen.
    assert not speaking_while_quiet(await page.evaluate("window.samples"))
    assert await page.inner_text("#voice-in-use") == voice
    status = await page.text_content("#settings-status")  # inside the closed panel
    assert status == "Settings applied.", (status, await page.inner_text("#error"))
    assert await page.locator("#error").is_hidden()

    await page.set_viewport_size({"width": 390, "height": 780})  # a phone
    await page.screenshot(path=str(OUTPUT / "page-mobile.png"), full_page=True)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, "nothing overflows sideways at phone width"
    await page.click("#disconnect")
    assert await page.locator("#state").get_attribute("data-state") == "idle"


async def test_a_busy_pool_is_shown_and_retried(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    first, second = await new_page(browser), await new_page(browser)
    await first.goto(server.url)
    await first.click("#connect")
    await first.wait_for_function(
        "document.querySelector('#state').dataset.state === 'listening'", timeout=20_000
    )
    await second.goto(server.url)
    await second.click("#connect")
    await second.wait_for_function(
        "document.querySelector('#error').textContent.includes('busy')", timeout=20_000
    )
    message = await second.inner_text("#error")
    assert "busy; trying again in" in message, message
    assert await second.is_disabled("#connect") and await second.is_enabled("#disconnect")
    OUTPUT.mkdir(exist_ok=True)
    await second.screenshot(path=str(OUTPUT / "page-busy.png"), full_page=True)
    # The slot frees up: the waiting page gets in by itself.
    await first.click("#disconnect")
    await second.wait_for_function(
        "document.querySelector('#state').dataset.state === 'listening'", timeout=30_000
    )
    assert await second.locator("#error").is_hidden()
    await second.click("#disconnect")
