"""What a session counts as used: audio in and out, turns, replies, LLM tokens."""

from __future__ import annotations

import pytest

from app.observability.usage import SessionUsage, UsageLedger
from app.session import messages as msg
from app.session.usage import Usage
from tests.session.fakes import FakeTTS, make_session, noise, silence, wait_for
from tests.session.test_bargein import play_script


async def test_a_turn_and_its_reply_are_counted() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.seconds_per_word = 0.05
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1000))])
    await wait_for(sent, msg.ReplyEnded)
    done = sent.nth(msg.ReplyEnded)
    used = session.usage.snapshot()
    assert used["audio_in_s"] == pytest.approx(1.8, abs=0.021), "every 20 ms pushed"
    assert (used["turns"], used["replies"]) == (1, 1)
    # The whole reply played: its clauses' audio, as the timeline has it.
    message = session.history.find(done.message.item_id) if done.message else None
    assert message is not None
    assert used["audio_out_s"] == pytest.approx(message.audio_ms / 1000, abs=0.001)
    # The fake LLM counts a token a message and one a delta.
    assert (used["llm_tokens_in"], used["llm_tokens_out"]) == (2, 8)
    # Voice to voice at the server: every stage counts from the end of the speech, the
    # turn's end after the 500 ms silence window.
    assert done.timings_ms["turn_end"] == pytest.approx(500, abs=1)
    assert done.voice_to_voice_ms == done.timings_ms["first_frame_sent"] > 500
    await session.close()


async def test_a_cut_reply_counts_only_what_was_heard() -> None:
    session, sent, _, engines = make_session(interrupt_mode="cancel")
    assert isinstance(engines.tts, FakeTTS)
    engines.tts.seconds_per_word = 0.3
    await play_script(session, [(0.0, noise(800)), (0.8, silence(1500)), (2.3, noise(600)),
                                (2.9, silence(700))])  # fmt: skip
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=15)
    cut = sent.nth(msg.ReplyEnded)
    assert cut.status == "cancelled" and cut.heard_ms is not None
    whole = sent.nth(msg.ReplyEnded, 1)
    message = session.history.find(whole.message.item_id) if whole.message else None
    assert message is not None
    used = session.usage.snapshot()
    assert used["audio_out_s"] == pytest.approx((cut.heard_ms + message.audio_ms) / 1000, abs=0.002)
    assert (used["turns"], used["replies"]) == (2, 2)
    await session.close()


def test_the_ledger_totals_live_and_ended_sessions_and_keeps_the_last_ones() -> None:
    ledger = UsageLedger(keep=2)
    for n in range(3):
        usage = Usage(audio_in_samples=16_000, turns=1, replies=1)
        usage.tokens.prompt, usage.tokens.completion, usage.tokens.cached = 10, 5, 4
        ledger.ended(SessionUsage(f"sess_{n}", "webrtc", 100.0 + n, usage, ended_at=110.0 + n))
    live = SessionUsage("sess_live", "sip", 200.0, Usage(audio_in_samples=8_000))
    report = ledger.report([live])
    assert report["total"] == {
        "audio_in_s": 3.5, "audio_out_s": 0.0, "turns": 3, "replies": 3,
        "llm_tokens_in": 30, "llm_tokens_in_cached": 12, "llm_tokens_out": 15,
    }  # fmt: skip
    sessions = report["sessions"]
    assert isinstance(sessions, list)
    assert [s["session_id"] for s in sessions] == ["sess_live", "sess_2", "sess_1"]
    assert sessions[0]["live"] is True and sessions[1]["duration_s"] == 10.0
