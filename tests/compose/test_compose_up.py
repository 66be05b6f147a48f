"""The default compose.yaml as an operator runs it: both images built from the project's
Dockerfiles, started, healthy, and a spoken WebRTC call answered through the vLLM container.
Then the engine's own words reach the test log when a build or a health check fails."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.compose.conftest import EVIDENCE
from tests.support.compose import Compose, ComposeError
from tests.support.server import REPO
from tests.support.speech import QUESTION, transcribe, word_error_rate, words
from tests.support.vllm import SERVED_NAME

AGENT = "http://127.0.0.1:8000"  # compose.yaml's agent, on the host's network
# vLLM's access log line for each chat completion the agent asked for.
COMPLETION = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" 200')


# The stack's build and start are this test's setup: about 9 minutes cold on 2 cores.
@pytest.mark.timeout(2400)
async def test_a_spoken_question_is_answered_through_the_vllm_container(
    stack: Compose, speech: Callable[[str], Path], whisper: object
) -> None:
    asked_before = len(COMPLETION.findall(stack.logs("vllm")))
    client = AgentClient(AGENT)
    await client.connect()
    try:
        client.mic.say(load_wav(str(speech(QUESTION))))
        done = await client.wait_for("response.done", timeout_s=180)
        assert client.mic.speech_ended_at is not None
        await client.wait_quiet(since=client.mic.speech_ended_at, timeout_s=90)
        memory = stack.memory()
    finally:
        await client.close()

    heard = client.of_type("conversation.item.input_audio_transcription.completed")[0]
    assert word_error_rate(QUESTION, heard["transcript"]) <= 0.25, heard["transcript"]
    assert done["response"]["status"] == "completed", done
    said = client.of_type("response.output_audio_transcript.done")[0]["transcript"]
    reply = client.recording.audio(since=client.mic.speech_ended_at)
    assert rms_db(reply) > -50, "reply audio is not silent"
    assert words(transcribe(whisper, reply)), f"Whisper hears no words in the reply {said!r}"

    # The answer came from the vLLM container: its own log saw the agent's request.
    assert len(COMPLETION.findall(stack.logs("vllm"))) > asked_before, stack.logs("vllm", 30)
    async with httpx.AsyncClient() as http:
        served = (await http.get("http://127.0.0.1:8001/v1/models", timeout=10)).json()["data"]
    assert [model["id"] for model in served] == [SERVED_NAME]
    answered = client.recording.first_voice_after(client.mic.speech_ended_at)
    assert answered is not None
    EVIDENCE.append(
        f"asked {heard['transcript']!r}, {SERVED_NAME} answered {said!r} "
        f"{answered - client.mic.speech_ended_at:.1f} s after the question ended; "
        f"memory in use: {memory}"
    )


def small_project(folder: Path, dockerfile: str, healthcheck: str) -> Compose:
    (folder / "Dockerfile").write_text(textwrap.dedent(dockerfile))
    (folder / "compose.yaml").write_text(textwrap.dedent(healthcheck))
    return Compose(folder, f"voice-agent-test-{folder.name.lower()}")


def test_a_build_error_fails_with_the_engines_message(tmp_path: Path) -> None:
    project = small_project(
        tmp_path,
        """\
        FROM python:3.11-slim
        RUN echo "this step is broken on purpose" && exit 3
        """,
        """\
        services:
          broken: {build: .}
        """,
    )
    with pytest.raises(ComposeError) as failed:
        project.build(timeout_s=300)
    assert "this step is broken on purpose" in str(failed.value)


def test_a_failing_health_check_fails_up_with_the_checks_output(tmp_path: Path) -> None:
    project = small_project(
        tmp_path,
        """\
        FROM python:3.11-slim
        CMD ["sleep", "600"]
        """,
        """\
        services:
          sick:
            build: .
            healthcheck:
              test: ["CMD-SHELL", "echo 'the port is not answering'; exit 1"]
              interval: 2s
              timeout: 5s
              retries: 2
        """,
    )
    try:
        with pytest.raises(ComposeError) as failed:
            project.build(timeout_s=300)
            project.up(timeout_s=120)
        assert "unhealthy" in str(failed.value)
        assert "the port is not answering" in str(failed.value)
    finally:
        project.down(images=True)
    assert not project.volumes()


@pytest.mark.parametrize(
    "args",
    [
        ("-f", "compose.yaml", "-f", "compose.gpu.yaml"),
        ("--profile", "turn"),
        ("--profile", "monitoring"),
    ],
    ids=["gpu", "turn", "monitoring"],
)
def test_every_other_file_and_profile_is_valid_to_compose_v2(args: tuple[str, ...]) -> None:
    """Their images come only from a registry (vllm-openai, coturn, Prometheus, Grafana):
    here they are validated by the real Compose, not run."""
    project = Compose(REPO, "voice-agent-config", files=())
    merged = project.run(*args, "config")
    assert "services:" in merged
    if "turn" in args:
        assert "coturn/coturn" in merged
    if "monitoring" in args:
        assert "grafana/grafana" in merged and "prom/prometheus" in merged
    if "compose.gpu.yaml" in args:
        assert "vllm/vllm-openai" in merged and "driver: nvidia" in merged
