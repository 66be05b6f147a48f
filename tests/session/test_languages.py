"""A session in other languages than English, with engine doubles: what Whisper is asked
for, what the LLM is told, and what Kokoro is given to say."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

from app.agent.responders import AgentResponder
from app.config import TtsSettings
from app.engines import Engines
from app.errors import EngineError
from app.session import messages as msg
from app.session.listening.backchannels import no_turn
from app.session.options import OptionChanges
from app.session.refusals import OptionError
from app.vocab.chat import Delta
from app.vocab.languages import SPOKEN
from tests.session.fakes import FakeLLM, FakeSTT, FakeTTS, make_session, noise, silence, wait_for
from tests.session.test_bargein import play_script

ONE_TURN = [(0.0, silence(300)), (0.3, noise(800)), (1.1, silence(900))]
SPANISH_NOTE = {"role": "system", "content": "The user speaks Spanish: answer the user in Spanish."}
ENGLISH_NOTE = {"role": "system", "content": "The user speaks English: answer the user in English."}


class KokoroVoices(FakeTTS):
    voices = ["jf_alpha", "jf_nezumi", "jm_kumo"]  # the bundled voices file has these


async def test_each_reply_is_told_and_spoken_in_the_language_heard() -> None:
    stt, llm, tts = FakeSTT(), FakeLLM(), KokoroVoices()
    responder = AgentResponder(Engines(stt=stt, llm=llm, tts=tts))
    session, sent, _, _ = make_session(responder=responder)
    stt.script = ["¿Dónde está la estación?", "And in English?"]
    stt.heard_as = "es"
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    stt.heard_as = "en"
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, count=2, timeout_s=10)
    await session.close()

    first, second = llm.prompts
    assert first[-1] == SPANISH_NOTE and first[-2]["content"] == "¿Dónde está la estación?"
    # After the conversation, so its start stays as it was (an LLM server's prefix cache).
    assert second[: len(first) - 1] == first[:-1]
    assert second[-1] == ENGLISH_NOTE, "back in English once it spoke Spanish"
    assert SPANISH_NOTE not in second, "the notes are not kept in the conversation"
    spanish = [(voice, language) for text, voice, language in tts.spoken[:2]]
    assert spanish == [(SPOKEN["es"].voice, "es")] * 2, tts.spoken
    assert tts.spoken[-1][1:] == ("jf_nezumi", "en"), "the session's own voice for English"
    assert [m.language for m in sent.of(msg.UserTranscribed)] == ["es", "en"]


async def test_an_english_conversation_is_told_nothing_more() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    await session.close()
    assert engines.llm.prompts[0][-1]["role"] == "user"


async def test_a_voice_the_client_chose_is_kept_in_every_language() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.tts, FakeTTS)
    session.configure(OptionChanges(voice="other"))
    engines.stt.heard_as = "de"
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    await session.close()
    assert {(voice, language) for _, voice, language in engines.tts.spoken} == {("other", "de")}


async def test_a_voices_file_without_the_languages_voice_keeps_the_sessions() -> None:
    session, sent, _, engines = make_session()  # FakeTTS has no jm_kumo
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.tts, FakeTTS)
    engines.stt.heard_as = "es"
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    await session.close()
    assert {(voice, language) for _, voice, language in engines.tts.spoken} == {("jf_nezumi", "es")}


class DownLLM(FakeLLM):
    async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Delta, None]:
        raise EngineError("the LLM is down", code="llm_unavailable")
        yield ""


async def test_a_failed_reply_is_excused_in_the_callers_language() -> None:
    session, sent, audio, engines = make_session(llm=DownLLM())
    assert isinstance(engines.stt, FakeSTT)
    engines.stt.heard_as = "es"
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.ReplyEnded, timeout_s=10)
    await session.close()
    failed = sent.nth(msg.ReplyEnded)
    assert (failed.status, failed.text) == ("failed", SPOKEN["es"].fallback)
    assert failed.text != TtsSettings().fallback_speech
    assert audio.voiced_times(), "it was said"


async def test_the_session_language_is_what_whisper_is_asked_for() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.stt, FakeSTT)
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.UserTranscribed, timeout_s=10)
    session.configure(OptionChanges(language="es"))
    await play_script(session, ONE_TURN)
    await wait_for(sent, msg.UserTranscribed, count=2, timeout_s=10)
    assert engines.stt.asked == ["en", "es"], "the server's stt.language, then the session's"
    for language, why in (("fr", "hears only de, en, es"), ("klingon", "unknown language")):
        with pytest.raises(OptionError, match=why) as refused:
            session.configure(OptionChanges(language=language))
        assert refused.value.option == "language"
    assert session.options.language == "es", "a refused language changes nothing"
    await session.close()


@pytest.mark.parametrize(
    ("text", "language", "backchannel"),
    [
        ("Sí, vale.", "es", True),
        ("Ajá, claro.", "es", True),
        ("¿Y el precio?", "es", False),
        ("Ja, genau.", "de", True),
        ("Ja, aber warum?", "de", False),
        ("D'accord, oui.", "fr", True),
        ("うん、なるほど。", "ja", True),
        ("はい、でも値段は?", "ja", False),
        ("Okay.", "es", True),
        ("Vale.", "en", False),
    ],
)
def test_backchannels_are_known_in_each_language(
    text: str, language: str, backchannel: bool
) -> None:
    assert no_turn(text, language) is backchannel
