"""What every call shares, built once at start-up: the settings, the engines and what
answers (the agent or the echo), the turn model, the voice detector's model, the
process's counters, its metrics and tracer. Routes reach it through one dependency
(app/api/deps.py); calls are built on it (app/calls/)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from pathlib import Path

from app.agent.echo_responder import EchoResponder
from app.agent.responders import AgentResponder, Responder
from app.config import Settings
from app.engines import Engines, load_engines
from app.engines.silero_vad import SileroVad
from app.engines.smart_turn import SmartTurn
from app.errors import EngineError, NotReady
from app.observability.counters import InterruptionStats, SpeculationStats
from app.observability.health import EngineHealth
from app.observability.metrics import Metrics
from app.observability.tracing import TurnTracer
from app.observability.usage import UsageLedger
from app.session.messages import SessionMessage
from app.tools.servers import ToolServers
from app.vocab.speech import TurnModel, VoiceModel

log = logging.getLogger(__name__)


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.responder: Responder | None = None  # set once the engines are loaded
        self.turn_model: TurnModel | None = None  # semantic_vad, where it could be loaded
        self.voice_model: VoiceModel | None = None  # None: calls use webrtcvad
        self.load_error: str | None = None
        self._engines: Engines | None = None
        # Over every session since the start.
        self.speculation = SpeculationStats()
        self.interruptions = InterruptionStats()
        self.health = EngineHealth()
        self.usage = UsageLedger()
        self.tools = ToolServers(settings.tools)  # MCP connections every session shares
        self.metrics = Metrics(
            self.speculation, self.interruptions, self.health, agent=settings.agent,
            tools=self.tools,
        )  # fmt: skip
        self.tracer = (
            TurnTracer.over_otlp(settings.server.otlp_endpoint, replica=settings.server.replica)
            if settings.server.otlp_endpoint
            else None
        )

    @property
    def model(self) -> str:
        """The model's name as clients are told it."""
        return self.settings.llm.model or "embedded"

    @property
    def page_url(self) -> str:
        """Where a person on this machine opens the page."""
        server = self.settings.server
        host = "127.0.0.1" if server.host in ("0.0.0.0", "::", "") else server.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{server.port}"

    def models(self) -> dict[str, object]:
        """What the engines run, in words for a person (the page shows them); `demo`: the
        LLM is the small embedded default, there to make the plumbing real, not to know
        things."""
        engines = self._engines
        if engines is None:
            return {}
        llm = engines.llm.model_name.removesuffix(".gguf")
        return {
            "stt": f"Whisper {Path(engines.stt.model_name).name}",
            "llm": llm if self.settings.llm.base_url else f"{llm} (embedded, llama.cpp)",
            "tts": "Kokoro",
            "demo": not self.settings.llm.base_url and not self.settings.llm.model_path,
        }

    def answering(self) -> Responder:
        """What answers calls; NotReady while the engines load (or failed to)."""
        if self.responder is None:
            raise NotReady(self.load_error or "engines are still loading")
        return self.responder

    async def load(self) -> None:
        """Load the engines once for every call, and choose what answers: agent or echo."""
        try:
            responder: Responder
            if self.settings.agent == "echo":
                log.info("agent=echo: no models loaded; utterances are played back")
                responder = EchoResponder()
            else:
                self._engines = await load_engines(self.settings, self.health.unreachable)
                responder = AgentResponder(
                    self._engines,
                    first_chunk_words=self.settings.tts.first_chunk_words,
                    max_spoken_words=self.settings.llm.max_spoken_words,
                    work_out=self.settings.llm.work_out,
                    read_while_listening=self.settings.llm.read_while_listening,
                )
            self.turn_model = await self._load_turn_model()
            self.voice_model = await self._load_voice_model()
            self.responder = responder  # last: calls are taken from now on
            log.info("ready: open %s", self.page_url)
            # The engines live as long as the process: keep the cyclic GC from
            # re-scanning their objects, so the collections after each call stay sub-ms.
            gc.collect()
            gc.freeze()
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.exception("engine loading failed; the server stays up but cannot take calls")

    async def _load_turn_model(self) -> TurnModel | None:
        """Small and quick to load, so echo sessions get it too."""
        try:
            return await asyncio.to_thread(SmartTurn, self.settings.turn)
        except EngineError as exc:
            if self.settings.turn.detection == "semantic_vad":
                raise
            log.warning("no turn model, so no semantic_vad: %s", exc)
            return None

    async def _load_voice_model(self) -> VoiceModel | None:
        """Silero, unless vad.detector says webrtcvad; a call is better served by
        webrtcvad than refused, so a model that cannot load is only warned about."""
        if self.settings.vad.detector != "silero":
            return None
        try:
            return await asyncio.to_thread(SileroVad, self.settings.vad)
        except EngineError as exc:
            log.warning("calls use webrtcvad instead of Silero VAD: %s", exc)
            return None

    @property
    def vad(self) -> str:
        """The voice detector calls use."""
        return self.voice_model.name if self.voice_model is not None else "webrtcvad"

    def observed(
        self, session_id: str, deliver: Callable[[SessionMessage], None]
    ) -> Callable[[SessionMessage], None]:
        """`deliver`, with each message counted (/metrics), traced and weighed for engine
        health on its way."""
        metrics, tracer, health = self.metrics, self.tracer, self.health

        def observed(message: SessionMessage) -> None:
            metrics.saw(message)
            health.saw(message)
            if tracer is not None:
                tracer.saw(session_id, message)
            deliver(message)

        return observed

    async def close(self) -> None:
        """Release the engines and the turn model; the last turns' spans go out."""
        self.responder = None
        await self.tools.aclose()
        if self.turn_model is not None:
            self.turn_model.close()
            self.turn_model = None
        engines, self._engines = self._engines, None
        if engines is not None:
            await engines.aclose()
        tracer, self.tracer = self.tracer, None
        if tracer is not None:
            await asyncio.to_thread(tracer.shutdown)
