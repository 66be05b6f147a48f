"""Whether each shared engine is working, judged from what sessions see: an engine whose
last FAILING_AFTER calls in a row failed is failing, until one works again.

It is read from the sessions' own messages (errors, transcripts, replies), so it says
what users get, and it recovers with the first turn that works: while an engine fails,
/healthz says so (503), /readyz still lets calls in, and those calls are what find out
that it works again.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.session import messages as msg

ENGINES = ("stt", "llm", "tts")
FAILING_AFTER = 3


@dataclass(slots=True)
class EngineState:
    in_a_row: int = 0  # failures since it last worked
    failures: int = 0  # since the start
    last_error: str = ""
    unreachable: str = ""  # why it could not be reached at the start, until it works

    @property
    def failing(self) -> bool:
        return self.in_a_row >= FAILING_AFTER


class EngineHealth:
    def __init__(self) -> None:
        self.engines = {name: EngineState() for name in ENGINES}

    def saw(self, message: msg.SessionMessage) -> None:
        if isinstance(message, msg.Problem):
            engine = message.code.split("_", 1)[0]
            state = self.engines.get(engine)
            if state is not None:
                state.in_a_row += 1
                state.failures += 1
                state.last_error = message.message[:300]
        elif isinstance(message, msg.UserTranscribed):
            self._worked("stt")
        elif isinstance(message, msg.ReplyEnded) and message.status == "completed":
            self._worked("llm")
            if message.modality == "audio" and message.text:
                self._worked("tts")

    def unreachable(self, engine: str, why: str) -> None:
        """`engine` (a server) could not be reached at the start: /healthz says so until a
        turn gets through."""
        self.engines[engine].unreachable = why[:300]

    def _worked(self, engine: str) -> None:
        self.engines[engine].in_a_row = 0
        self.engines[engine].unreachable = ""

    @property
    def failing(self) -> list[str]:
        return [name for name, state in self.engines.items() if state.failing]

    def snapshot(self) -> dict[str, dict[str, object]]:
        return {
            name: {
                "ok": not state.failing,
                "failures_in_a_row": state.in_a_row,
                "last_error": state.last_error,
                **({"unreachable": state.unreachable} if state.unreachable else {}),
            }
            for name, state in self.engines.items()
        }
