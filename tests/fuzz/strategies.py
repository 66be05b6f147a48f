"""Hostile input, generated: JSON that is nearly right, and worse."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

CLIENT_TYPES = [
    "session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
    "input_audio_buffer.clear", "conversation.item.create", "conversation.item.retrieve",
    "conversation.item.delete", "conversation.item.truncate", "response.create",
    "response.cancel", "output_audio_buffer.clear",
]  # fmt: skip
FIELDS = ["session", "audio", "item", "item_id", "content_index", "audio_end_ms", "response",
          "event_id", "previous_item_id", "instructions", "tools", "type", "role", "content",
          "text", "voice", "turn_detection", "output_modalities", "truncation"]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.sampled_from(["", "AAA", "!!notbase64", "AAAA" * 10, "audio/pcm", "server_vad",
                     "semantic_vad", "message", "user", "input_text", "inf", "auto"]),
)  # fmt: skip
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=10)), inner,
                        max_size=4),
    ),
    max_leaves=20,
)  # fmt: skip
client_events = st.builds(
    lambda kind, fields: {"type": kind, **fields},
    st.one_of(st.sampled_from(CLIENT_TYPES), st.text(max_size=30)),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=5),
)
