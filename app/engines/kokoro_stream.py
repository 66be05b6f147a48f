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
a piece too short to gain.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.engines.parts import cache_dir

log = logging.getLogger(__name__)

VERSION = 1  # of the split: a cached pair from another version is not used
# The decoder's inputs in kokoro-v1.0's export: text features (1, 512, T) aligned to
# frames, and the F0 and energy curves (1, 2T).
BOUNDARY = (
    "/encoder/MatMul_1_output_0",
    "/encoder/Reshape_output_0",
    "/encoder/Reshape_1_output_0",
)
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
    for part, (ins, outs) in (
        (front, (inputs, list(BOUNDARY))),
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
        return self._features(self._front_feed(tokens, style, speed))

    def _features(self, inputs: dict[str, np.ndarray]) -> Features:
        text, f0, energy = self.front.run(list(BOUNDARY), inputs)
        return Features(text, f0, energy, inputs["style"])

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


def first_frames(frames: int, ms_per_frame: float) -> int | None:
    """How many frames the first part of a `frames`-long piece needs for the whole to be
    decoded, at `ms_per_frame`, before it has played; None: decode the piece whole."""
    needed = (SAFETY * ms_per_frame * frames) / FRAME_MS + LEAD_FRAMES
    first = max(FIRST_FRAMES, int(np.ceil(needed)))
    return first if first + RIGHT_CONTEXT < frames else None


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
