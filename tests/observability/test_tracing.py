"""Traces: a turn's span and its stages' children, from a real session on engine doubles
(the span layout) and from the real agent over OTLP (tests/e2e/test_conversation.py)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.observability.tracing import TurnTracer
from app.session import messages as msg
from tests.session.fakes import FakeSTT, make_session, noise, silence, wait_for
from tests.session.test_bargein import FIRST, play_script

CHILDREN = [
    "end_of_turn", "stt", "llm.first_token", "llm.first_clause", "tts.first_audio",
    "send.first_frame", "playout",
]  # fmt: skip


def seconds(span: ReadableSpan) -> tuple[float, float]:
    assert span.start_time is not None and span.end_time is not None
    return span.start_time / 1e9, span.end_time / 1e9


async def test_a_turn_is_one_span_with_a_child_per_stage_in_order() -> None:
    exporter = InMemorySpanExporter()
    tracer = TurnTracer(exporter, replica="r1")
    session, sent, _, engines = make_session(also=lambda m: tracer.saw("sess_test", m))
    assert isinstance(engines.stt, FakeSTT)
    engines.stt.script = [FIRST]
    await play_script(session, [(0.0, silence(500)), (0.5, noise(1000)), (1.5, silence(1000))])
    await wait_for(sent, msg.ReplyEnded, timeout_s=15)
    await session.close()
    tracer.shutdown()

    spans = exporter.get_finished_spans()
    (turn,) = [span for span in spans if span.name == "turn"]
    children = sorted(
        (span for span in spans if span.parent is not None), key=lambda span: seconds(span)[0]
    )
    assert [span.name for span in children] == CHILDREN
    assert turn.parent is None and len(spans) == len(CHILDREN) + 1
    assert all(
        span.parent is not None and span.parent.span_id == turn.context.span_id
        and span.context.trace_id == turn.context.trace_id
        for span in children
    )  # fmt: skip
    attributes = turn.attributes or {}
    done = sent.nth(msg.ReplyEnded)
    assert attributes["voice_agent.session_id"] == "sess_test"
    assert attributes["voice_agent.response_id"] == done.response_id
    assert attributes["voice_agent.status"] == "completed"
    # server_vad began the reply 200 ms into the silence: speculative, and kept.
    assert attributes["voice_agent.speculative"] is True
    assert turn.resource.attributes["service.name"] == "voice-agent"
    assert turn.resource.attributes["service.instance.id"] == "r1"

    # The turn runs from the end of the user's speech to the end of the reply; the
    # silence before the turn was judged over is server_vad's 500 ms.
    begin, end = seconds(turn)
    end_of_turn = seconds(children[0])
    assert end_of_turn[0] == pytest.approx(begin, abs=1e-6)
    assert end_of_turn[1] - end_of_turn[0] == pytest.approx(0.5, abs=1e-3)
    assert seconds(children[-1])[1] == pytest.approx(end, abs=1e-6)
    # The stages follow one another, from the reply's start to its first frame sent.
    stages = children[1:-1]
    for before, after in zip(stages, stages[1:], strict=False):
        assert seconds(after)[0] == pytest.approx(seconds(before)[1], abs=1e-6)
    assert [span.attributes and span.attributes["voice_agent.stage"] for span in stages] == [
        "stt_done", "llm_first_token", "first_clause", "tts_first_audio", "first_frame_sent",
    ]  # fmt: skip
    assert all(begin <= seconds(span)[0] <= seconds(span)[1] <= end for span in children)
    # The reply's first frame left when response.done's timings say, from the speech's end.
    first_frame = seconds(stages[-1])[1] - end_of_turn[0]
    assert first_frame * 1000 == pytest.approx(done.timings_ms["first_frame_sent"], abs=2)


async def test_no_span_without_a_reply_and_failed_replies_are_marked() -> None:
    exporter = InMemorySpanExporter()
    tracer = TurnTracer(exporter)
    tracer.saw("sess_a", msg.SpeechStarted("item_1", 0))
    tracer.saw("sess_a", msg.ReplyEnded("resp_1", "failed", error="the LLM is down",
                                        stamps={"created": 100.0, "now": 100.5}))  # fmt: skip
    tracer.shutdown()
    (turn,) = exporter.get_finished_spans()
    assert turn.name == "turn" and not turn.status.is_ok
    assert turn.status.description == "the LLM is down"
    assert seconds(turn) == pytest.approx((100.0, 100.5))
