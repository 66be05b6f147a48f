"""Kokoro cut in two at its decoder's inputs, so that a reply's first piece is heard once
the decoder has made its first ~0.5 s of audio rather than all of it.

The front (text encoder, durations, prosody) takes ~50 ms; the decoder is ~95% of a
synthesis and grows with the audio it makes (docs/performance/latency.md). Its inputs are
per frame (600 samples, 25 ms): the aligned text features and the F0 and energy curves.
So a piece is decoded twice: its first frames, with a few more after them as right
context, then the whole of it, which takes over at the end of the first part with a short
crossfade; what is heard after the seam is the whole's own samples.

The first part is not the same samples as the whole's: the decoder's AdaIN normalizes
each channel over the frames it is given, and its convolutions see no further than the
part's end. Measured on a 12-word sentence, a 0.5-1 s first part with 0.4 s of right
context (0.2 s now: RIGHT_CONTEXT) is 0.49-0.5 apart from the whole in log spectrum
(the graph rewrite is 0.34 from the shipped file, another voice 1.6) and 15-20% quieter.
The first part is as long as it must be for the whole to be ready before it has played,
at the pace the decoder has kept so far: longer on a slower CPU, and no parts at all for
a piece too short to gain. It ends between two words, where the duration predictor put
a space or a mark, so that a whole that comes late leaves a pause, not a broken word.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.engines.parts import cache_dir

log = logging.getLogger(__name__)

VERSION = 2  # of the split: a cached pair from another version is not used
# The decoder's inputs in kokoro-v1.0's export: text features (1, 512, T) aligned to
# frames, and the F0 and energy curves (1, 2T).
BOUNDARY = (
    "/encoder/MatMul_1_output_0",
    "/encoder/Reshape_output_0",
    "/encoder/Reshape_1_output_0",
)
# Frames per token, as the duration predictor made them (rounded, at least one): where
# each word begins and ends in the audio. The front gives it out beside the boundary.
DURATIONS = "/encoder/Clip_output_0"
# kokoro-v1.0's tokens for a space and the marks ;:,.!?—…"()“”: between words.
BETWEEN_WORDS = frozenset({1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16})
SAMPLES_PER_FRAME = 600
MAX_TOKENS = 510  # one window of the model: kokoro-onnx cuts a longer piece in several
FIRST_FRAMES = 28  # at least: ~0.5 s heard, once the padding before it is cut
# Frames decoded after the first part and dropped. On tests/engines/test_tts.py's sentence,
# the parts joined were 0.308 apart from the whole with 16, 0.315 with 8, 0.323 with 4,
# with no larger step at the seam; 8 fewer frames are ~35 ms sooner to the first audio.
RIGHT_CONTEXT = 8
LEAD_FRAMES = 6  # of the first part, padding that is cut (kokoro_edges)
FRAME_MS = 25
SAFETY = 1.3  # the whole's decoding, against the first part's playing time
CROSSFADE = 240  # samples (10 ms) where the whole takes over from the first part
PACE_WEIGHT = 0.3  # of the latest decoding in the decoder's pace
# The seam moves to the nearest place between words up to this many frames later or
# earlier (0.25 s and 0.15 s of audio; 1-3 frames later on average, ~10 ms more
# decoding): if the whole comes late on a busy CPU, the caller hears a pause between
# words rather than a word broken in two ("The capi- -tal of Italy" was heard as "The
# cup, but all of Italy").
SEAM_LATER = 10
SEAM_EARLIER = 6


def split_graph(source: str) -> tuple[str, str] | None:
    """The cached (front, decoder) pair cut from the ONNX file `source`, made now if
    missing; None for a graph without kokoro-v1.0's decoder inputs (another export)."""
    stat = Path(source).stat()
    key = hashlib.sha256(f"{Path(source).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    stem = cache_dir() / f"kokoro-split-v{VERSION}-{key.hexdigest()[:16]}"
    front, decoder = stem.with_suffix(".front.onnx"), stem.with_suffix(".decoder.onnx")
    unsplit = stem.with_suffix(".unsplit")
    if front.is_file() and decoder.is_file():
        return str(front), str(decoder)
    if unsplit.is_file():
        return None
    import onnx
    import onnx.utils

    model = onnx.load(source)
    made = {out for node in model.graph.node for out in node.output}
    stem.parent.mkdir(parents=True, exist_ok=True)
    if not set(BOUNDARY) <= made:
        log.warning("%s has no decoder inputs where kokoro-v1.0 has them: not streamed", source)
        unsplit.touch()
        return None
    log.info("cutting %s at its decoder into %s.*.onnx (once)", source, stem)
    extractor = onnx.utils.Extractor(model)
    inputs = [i.name for i in model.graph.input]
    ends = [*BOUNDARY, DURATIONS] if DURATIONS in made else list(BOUNDARY)
    for part, (ins, outs) in (
        (front, (inputs, ends)),
        (decoder, ([*BOUNDARY, "style"], [o.name for o in model.graph.output])),
    ):
        # Per process, renamed last: servers started side by side may each write it.
        partial = part.with_name(f"{part.name}.{os.getpid()}.tmp")
        onnx.save(extractor.extract_model(ins, outs), str(partial))
        partial.replace(part)
    return str(front), str(decoder)


@dataclass(slots=True)
class Features:
    """The front's output for one piece: what the decoder makes audio from."""

    text: np.ndarray  # (1, 512, T)
    f0: np.ndarray  # (1, 2T)
    energy: np.ndarray  # (1, 2T)
    style: np.ndarray  # (1, 256)
    # Frames between words (the middle of each space or mark), where known.
    between_words: tuple[int, ...] = ()

    @property
    def frames(self) -> int:
        return int(self.text.shape[-1])


class SplitSession:
    """The front and the decoder run one after the other, with the methods kokoro-onnx
    calls on a session: a whole synthesis is the same samples as the uncut graph's."""

    def __init__(self, front: Any, decoder: Any, model_path: str) -> None:
        self.front, self.decoder = front, decoder
        self._model_path = model_path
        self._decoder_inputs = [i.name for i in decoder.get_inputs()]
        self._outputs = list(BOUNDARY)
        if DURATIONS in {o.name for o in front.get_outputs()}:
            self._outputs.append(DURATIONS)
        # The decoder's own ms per frame, smoothed, over every synthesis: how long a first
        # part must be. Timing whole syntheses instead (the front, kokoro-onnx's own work,
        # the padding it trims) made it ~25% slower than it is, and first parts longer.
        self.ms_per_frame = 0.0

    def get_inputs(self) -> Any:
        return self.front.get_inputs()

    def get_outputs(self) -> Any:
        return self.decoder.get_outputs()

    def get_modelmeta(self) -> Any:
        return self.front.get_modelmeta()

    def run(self, output_names: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        features = self._features(inputs)
        return self._decoded(output_names, features, 0, features.frames)

    def features(self, tokens: list[int], style: np.ndarray, speed: float) -> Features:
        """The front's output for `tokens` (padded) in `style` at `speed`."""
        return self._features(self._front_feed(tokens, style, speed), tokens)

    def _features(self, inputs: dict[str, np.ndarray], tokens: Sequence[int] = ()) -> Features:
        text, f0, energy, *durations = self.front.run(self._outputs, inputs)
        between: tuple[int, ...] = ()
        if durations and len(tokens) == durations[0].size:
            frames = np.asarray(durations[0]).ravel().astype(np.int64)
            starts = np.cumsum(frames) - frames
            between = tuple(
                int(start + length // 2)
                for token, start, length in zip(tokens, starts, frames, strict=True)
                if token in BETWEEN_WORDS
            )
        return Features(text, f0, energy, inputs["style"], between)

    def _front_feed(
        self, tokens: list[int], style: np.ndarray, speed: float
    ) -> dict[str, np.ndarray]:
        """The front's inputs by their names and types (exports name the tokens `tokens`
        or `input_ids`, and some take the speed as an integer)."""
        feed = {}
        for spec in self.front.get_inputs():
            dtype = np.int64 if spec.type == "tensor(int64)" else np.float32
            if spec.name == "style":
                feed[spec.name] = np.asarray(style, dtype=dtype).reshape(1, -1)
            elif spec.name == "speed":
                feed[spec.name] = np.array([speed], dtype=dtype)
            else:
                feed[spec.name] = np.array([tokens], dtype=dtype)
        return feed

    def decode(self, features: Features, start: int, end: int) -> np.ndarray:
        """Audio for frames [start, end), decoded from them alone."""
        return np.asarray(self._decoded(None, features, start, end)[0], dtype=np.float32).ravel()

    def _decoded(self, names: Any, features: Features, start: int, end: int) -> list[np.ndarray]:
        begun = time.perf_counter()
        outputs = list(self.decoder.run(names, self._decoder_feed(features, start, end)))
        latest = (time.perf_counter() - begun) * 1000 / max(end - start, 1)
        known = self.ms_per_frame
        self.ms_per_frame = latest if not known else known + PACE_WEIGHT * (latest - known)
        return outputs

    def _decoder_feed(self, features: Features, start: int, end: int) -> dict[str, np.ndarray]:
        values = (
            features.text[..., start:end],
            features.f0[..., 2 * start : 2 * end],
            features.energy[..., 2 * start : 2 * end],
            features.style,
        )
        return dict(zip(self._decoder_inputs, values, strict=True))


def first_frames(frames: int, ms_per_frame: float, ahead_ms: float = 0.0) -> int | None:
    """How many frames the first part of a `frames`-long piece needs for the whole to be
    decoded, at `ms_per_frame`, before it has played, with `ahead_ms` of the reply's
    audio still to play before it; None: decode the piece whole."""
    # The whole is decoded once the first part is made, and the audio ahead covers
    # what is left of it after the first part's own decoding.
    covered = max(0.0, ahead_ms - ms_per_frame * (FIRST_FRAMES + RIGHT_CONTEXT))
    needed = SAFETY * max(0.0, ms_per_frame * frames - covered) / FRAME_MS + LEAD_FRAMES
    first = max(FIRST_FRAMES, int(np.ceil(needed)))
    return first if first + RIGHT_CONTEXT < frames else None


def between_words(features: Features, first: int) -> int:
    """Where a first part of about `first` frames ends: the nearest place between words
    from SEAM_EARLIER frames before to SEAM_LATER after, the later of two as near; else
    `first`. Never under FIRST_FRAMES, nor into the right context's last frames."""
    low, high = max(first - SEAM_EARLIER, FIRST_FRAMES), features.frames - RIGHT_CONTEXT - 1
    near = [at for at in features.between_words if low <= at <= min(first + SEAM_LATER, high)]
    return min(near, key=lambda at: (abs(at - first), -at)) if near else first


def first_part(
    session: SplitSession, features: Features, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """The first `first` frames' samples to play, and those held for the crossfade."""
    audio = session.decode(features, 0, first + RIGHT_CONTEXT)
    seam = first * SAMPLES_PER_FRAME
    return audio[: seam - CROSSFADE], audio[seam - CROSSFADE : seam]


def rest(session: SplitSession, features: Features, first: int, held: np.ndarray) -> np.ndarray:
    """The whole piece's samples from the first part's end, faded in over its `held` tail."""
    audio = session.decode(features, 0, features.frames)
    after = audio[first * SAMPLES_PER_FRAME - len(held) :].copy()
    rising = np.linspace(0.0, 1.0, len(held), dtype=np.float32)
    after[: len(held)] = held * (1 - rising) + after[: len(held)] * rising
    return after
