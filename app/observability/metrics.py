"""Prometheus metrics: what an operator graphs and alerts on.

Each server (its Runtime) has its own registry rather than the process-global one, so a
server counts only its own calls (and tests can run several apps in one process).
Labels are bounded sets (transports, slot states, stages, end reasons): never a
session id.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.calls.pool import SlotPool
from app.engines.gate import Gate
from app.observability.build import package_version
from app.observability.counters import InterruptionStats, SpeculationStats
from app.observability.health import EngineHealth
from app.session import messages as msg
from app.tools.servers import ToolServers

# Voice stages sit between tens of ms (a GPU, a speculated transcript) and seconds (a
# first clause on two CPU cores); past 10 s a turn has failed in all but name.
STAGE_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)


class Metrics:
    def __init__(
        self,
        speculation: SpeculationStats,
        interruptions: InterruptionStats,
        health: EngineHealth,
        *,
        agent: str,
        tools: ToolServers | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self._calls = Counter(
            "voice_agent_calls",
            "Calls offered, by transport and outcome: accepted, or the reason refused.",
            ["transport", "outcome"],
            registry=self.registry,
        )
        self._stages = Histogram(
            "voice_agent_turn_stage_seconds",
            "Time from the end of the user's speech to each stage of the reply.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self._end_of_turn = Histogram(
            "voice_agent_end_of_turn_seconds",
            "How long the user had been quiet when their turn was judged over.",
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self._voice_to_voice = Histogram(
            "voice_agent_voice_to_voice_seconds",
            "From the end of the user's speech to the reply's first frame sent (the server's "
            "part; the network and the client's playout buffer come on top).",
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self._barge_in = Histogram(
            "voice_agent_barge_in_reaction_seconds",
            "How long the user had been speaking over a reply when its audio stopped (held "
            "or cut); the client's playout buffer comes on top.",
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        interruptions.on_reaction = self._barge_in.observe
        self._replies = Counter(
            "voice_agent_replies",
            "Replies by how they ended (status) and why (reason, for cancelled ones).",
            ["status", "reason"],
            registry=self.registry,
        )
        self._problems = Counter(
            "voice_agent_errors",
            "Errors a session told its client about, by code.",
            ["code"],
            registry=self.registry,
        )
        build = Info("voice_agent_build", "What this server is.", registry=self.registry)
        build.info({"version": package_version(), "agent": agent})
        self.registry.register(_Live(speculation, interruptions))
        self.registry.register(_Engines(health))
        if tools is not None:
            self.registry.register(_Tools(tools))

    def count_slots(self, pool: SlotPool) -> None:
        """The pool's slots, by state and transport, read at every scrape."""
        self.registry.register(_Slots(pool))

    def accepted(self, transport: str) -> None:
        self._calls.labels(transport, "accepted").inc()

    def refused(self, transport: str, reason: str) -> None:
        self._calls.labels(transport, reason).inc()

    def saw(self, message: msg.SessionMessage) -> None:
        """A message a session sent its client: replies and errors are counted."""
        if isinstance(message, msg.ReplyEnded):
            self._replies.labels(message.status, message.reason or "").inc()
            for stage, ms in message.timings_ms.items():
                self._stages.labels(stage).observe(ms / 1000)
            if message.voice_to_voice_ms is not None:
                self._voice_to_voice.observe(message.voice_to_voice_ms / 1000)
        elif isinstance(message, msg.SpeechStopped):
            self._end_of_turn.observe(message.silence_ms / 1000)
        elif isinstance(message, msg.Problem):
            self._problems.labels(message.code).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Slots(Collector):
    def __init__(self, pool: SlotPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        slots = GaugeMetricFamily(
            "voice_agent_slots",
            "Session slots, by state and transport.",
            labels=["state", "transport"],
        )
        counted: dict[tuple[str, str], int] = {}
        for slot in self._pool.snapshot()["slots"]:
            key = (slot["state"], slot["transport"] or "")
            counted[key] = counted.get(key, 0) + 1
        for (state, transport), count in sorted(counted.items()):
            slots.add_metric([state, transport], count)
        yield slots


class _Live(Collector):
    """Read at scrape time from what the server already keeps."""

    def __init__(self, speculation: SpeculationStats, interruptions: InterruptionStats) -> None:
        self._speculation = speculation
        self._interruptions = interruptions

    def collect(self) -> Iterator[Metric]:
        speculation = CounterMetricFamily(
            "voice_agent_speculative_replies",
            "Replies begun in a pause before the turn ended, by what became of them.",
            labels=["outcome"],
        )
        for outcome, count in self._speculation.snapshot().items():
            speculation.add_metric([outcome], count)
        yield speculation
        interruptions = CounterMetricFamily(
            "voice_agent_interruptions",
            "Replies the user spoke over, by what became of them (paused, resumed, cancelled).",
            labels=["outcome"],
        )
        for outcome, count in self._interruptions.snapshot().items():
            interruptions.add_metric([outcome], count)
        yield interruptions


class _Engines(Collector):
    """How the shared engines' gates are used (their queue and their time), and whether
    each engine works."""

    def __init__(self, health: EngineHealth) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        healthy = GaugeMetricFamily(
            "voice_agent_engine_healthy",
            "1 while the engine works; 0 once its last calls failed in a row, until one works.",
            labels=["engine"],
        )
        failures = CounterMetricFamily(
            "voice_agent_engine_failures",
            "Calls that failed, by engine: the errors users were told about.",
            labels=["engine"],
        )
        for name, state in self._health.engines.items():
            healthy.add_metric([name], 0 if state.failing else 1)
            failures.add_metric([name], state.failures)
        yield healthy
        yield failures
        totals: dict[str, list[float]] = {}
        for gate in list(Gate.live):
            total = totals.setdefault(gate.name, [0, 0.0, 0.0, 0])
            total[0] += gate.calls
            total[1] += gate.waited_s
            total[2] += gate.busy_s
            total[3] += gate.waiting
        families: tuple[CounterMetricFamily | GaugeMetricFamily, ...] = (
            CounterMetricFamily(
                "voice_agent_engine_calls", "Calls into each engine.", labels=["engine"]
            ),
            CounterMetricFamily(
                "voice_agent_engine_wait_seconds",
                "Time calls waited for a free engine (its concurrency).",
                labels=["engine"],
            ),
            CounterMetricFamily(
                "voice_agent_engine_busy_seconds",
                "Time the engine was running calls.",
                labels=["engine"],
            ),
            GaugeMetricFamily(
                "voice_agent_engine_waiting", "Calls waiting for the engine now.", labels=["engine"]
            ),
        )
        for name, values in sorted(totals.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([name], value)
        yield from families


class _Tools(Collector):
    """MCP tool calls by server label (bounded: ToolServers.MAX_LABELS), no session ids."""

    def __init__(self, tools: ToolServers) -> None:
        self._tools = tools

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "voice_agent_tool_calls", "MCP tool calls, by server label.", labels=["server"]
        )
        failures = CounterMetricFamily(
            "voice_agent_tool_failures",
            "MCP tool calls that failed or timed out, by server label.",
            labels=["server"],
        )
        seconds = CounterMetricFamily(
            "voice_agent_tool_seconds", "Time MCP tool calls took, by server label.",
            labels=["server"],
        )  # fmt: skip
        for label, stats in sorted(self._tools.stats.items()):
            calls.add_metric([label], stats.calls)
            failures.add_metric([label], stats.failures)
            seconds.add_metric([label], stats.seconds)
        yield from (calls, failures, seconds)
