"""Kokoro's int8 convolutions laid out for onnxruntime's fast int8 kernels.

The bundled Kokoro-82M is dynamically quantized with unsigned weights, and onnxruntime's
ConvInteger takes only u8 x u8, which MLAS multiplies on its generic path (~380 GOPS on
two Xeon vCPUs). Unsigned activations times signed weights (u8 x s8) run on its VNNI and
AMX kernels instead (~3,500 GOPS there; docs/performance/latency.md). So each convolution is
rewritten, once and cached, as one MatMulInteger over its taps:

    x (1, Cin, T) u8 -> (1, T, Cin), padded -> the k taps' shifted slices side by side
    (1, T, k*Cin) x weights (k*Cin, Cout) s8 -> (1, T, Cout) -> (1, Cout, T) float

The weights are the same integers, moved into int8's range with a zero point to match,
where the CPU has VNNI or AMX; elsewhere they are quantized again to 7 bits (exact_weights).
The activations keep the model's own dynamic u8 quantization.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.engines.cpu import has_int8_dot_products
from app.engines.parts import cache_dir

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

VERSION = 1  # of the rewrite: a cached graph from another version is not used
# Narrower convolutions (Kokoro's single-channel F0 and noise inputs) gain nothing.
MIN_CHANNELS = 64
_END = 2**62  # a slice to the end
SEVEN_BITS = 63


def fast_graph(source: str) -> str:
    """The cached rewrite of the ONNX file `source`, made now if missing; `source` itself
    when it has no convolution to rewrite (an upstream float model)."""
    stat = Path(source).stat()
    exact = exact_weights()
    key = hashlib.sha256(f"{Path(source).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    kind = "exact" if exact else "7bit"
    target = cache_dir() / f"kokoro-matmul-v{VERSION}-{kind}-{key.hexdigest()[:16]}.onnx"
    unchanged = target.with_suffix(".unchanged")
    if target.is_file():
        return str(target)
    if unchanged.is_file():
        return source
    import onnx

    log.info("rewriting %s's convolutions for int8 matrix kernels into %s (once)",
             source, target)  # fmt: skip
    model = onnx.load(source)
    rewritten = rewrite(model, exact=exact)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not rewritten:
        unchanged.touch()
        return source
    # Per process, renamed last: servers started side by side may each write it.
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    onnx.save(model, str(partial))
    partial.replace(target)
    log.info("%d convolutions rewritten", rewritten)
    return str(target)


def exact_weights() -> bool:
    """Whether the model's weights can be kept exactly: all of int8 is safe where the CPU
    multiplies u8 by s8 with VNNI or AMX (into 32 bits). AVX2's u8 x s8 instruction adds
    pairs of products into 16 bits, which full-range weights can overflow (onnxruntime's
    quantization guide: reduce_range), so elsewhere they keep to 7 bits."""
    return has_int8_dot_products()


@dataclass(frozen=True, slots=True)
class QuantizedConv:
    """One ConvInteger as onnxruntime's dynamic quantizer writes it, and what it computes."""

    node: onnx.NodeProto
    x_q: str  # u8 activations (1, Cin, T), with...
    x_scale: str  # ...their scale and...
    x_zero: str  # ...zero point (DynamicQuantizeLinear's outputs)
    w_int: np.ndarray  # (Cout, Cin, k), u8 or s8, with...
    w_zero: np.ndarray  # ...their zero point and scale, each one or one per output channel
    w_scale: np.ndarray
    bias: np.ndarray | None  # float (Cout,)
    output: str  # the float result, after the bias and the scales
    pads: tuple[int, int]
    dilation: int

    @property
    def weights(self) -> np.ndarray:
        """The weights' float values (Cout, Cin, k)."""
        per_channel = (-1, 1, 1)
        zero = self.w_zero.astype(np.float32).reshape(per_channel if self.w_zero.ndim else ())
        scale = self.w_scale.reshape(per_channel if self.w_scale.ndim else ())
        return (self.w_int.astype(np.float32) - zero) * scale


class Graph:
    """An ONNX graph's nodes indexed both ways, and the initializers added to it."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.initializers = {i.name: i for i in graph.initializer}
        self.producer = {out: node for node in graph.node for out in node.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = collections.defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self.consumers[name].append(node)
        self.added: list[onnx.TensorProto] = []
        self._constants: dict[tuple[Any, ...], str] = {}

    def array(self, name: str) -> np.ndarray:
        from onnx import numpy_helper

        return numpy_helper.to_array(self.initializers[name])

    def made_by(self, name: str, op_type: str) -> onnx.NodeProto | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def only_consumer(self, name: str, op_type: str) -> onnx.NodeProto | None:
        consumers = self.consumers.get(name, [])
        if len(consumers) == 1 and consumers[0].op_type == op_type:
            return consumers[0]
        return None

    def add(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.added.append(numpy_helper.from_array(value, name))
        return name

    def ints(self, *values: int) -> str:
        """A shared int64 constant."""
        key = ("i64", *values)
        if key not in self._constants:
            name = f"kokoro_graph_i64_{len(self._constants)}"
            self._constants[key] = self.add(name, np.array(values, dtype=np.int64))
        return self._constants[key]


def rewrite(model: onnx.ModelProto, *, exact: bool = True) -> int:
    """Every wide, unstrided, ungrouped ConvInteger in `model` rewritten in place as a
    MatMulInteger over its taps, its weights kept `exact` or in 7 bits; how many were."""
    graph = Graph(model.graph)
    replaced: dict[int, list[onnx.NodeProto]] = {}
    for node in list(model.graph.node):
        conv = match(graph, node) if node.op_type == "ConvInteger" else None
        if conv is not None:
            # In the place of its last node: every input is computed by then.
            replaced[id(graph.producer[conv.output])] = as_matmul(graph, conv, exact)
    nodes = [new for node in model.graph.node for new in replaced.get(id(node), [node])]
    del model.graph.node[:]
    model.graph.node.extend(needed(nodes, {out.name for out in model.graph.output}))
    model.graph.initializer.extend(graph.added)
    used = {name for node in model.graph.node for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return len(replaced)


def match(graph: Graph, node: onnx.NodeProto) -> QuantizedConv | None:
    """`node` and the nodes around it, when they are the dynamic quantizer's pattern:
    DynamicQuantizeLinear -> ConvInteger [-> Add(int32 bias)] -> Cast -> Mul(x_scale *
    w_scale); None for anything else, which is left as it is."""
    from onnx import helper

    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attributes.get("group", 1) != 1 or list(attributes.get("strides", [1])) != [1]:
        return None
    x_q, w_q, _, w_zero = node.input
    quantize = graph.made_by(x_q, "DynamicQuantizeLinear")
    if quantize is None or w_q not in graph.initializers or w_zero not in graph.initializers:
        return None
    w_int = graph.array(w_q)
    if w_int.ndim != 3 or w_int.shape[1] < MIN_CHANNELS:
        return None
    after, bias = node, None
    if (add := graph.only_consumer(after.output[0], "Add")) is not None:
        bias = quantized_bias(graph, add.input[1])
        if bias is None:
            return None
        after = add
    cast = graph.only_consumer(after.output[0], "Cast")
    scale = graph.only_consumer(cast.output[0], "Mul") if cast else None
    scales = graph.made_by(scale.input[1], "Mul") if scale else None
    if scale is None or scales is None or scales.input[0] != quantize.output[1]:
        return None
    pads = attributes.get("pads", [0, 0])
    return QuantizedConv(
        node=node,
        x_q=x_q,
        x_scale=quantize.output[1],
        x_zero=quantize.output[2],
        w_int=w_int,
        w_zero=graph.array(w_zero),
        w_scale=graph.array(scales.input[1]).astype(np.float32),
        bias=bias,
        output=scale.output[0],
        pads=(int(pads[0]), int(pads[1])),
        dilation=int(attributes.get("dilations", [1])[0]),
    )


def quantized_bias(graph: Graph, name: str) -> np.ndarray | None:
    """The float bias behind Reshape(Cast(Floor(Div(bias, x_scale * w_scale))))."""
    node: onnx.NodeProto | None = graph.producer.get(name)
    for op_type in ("Reshape", "Cast", "Floor", "Div"):
        if node is None or node.op_type != op_type:
            return None
        if op_type != "Div":
            node = graph.producer.get(node.input[0])
    assert node is not None
    if node.input[0] not in graph.initializers:
        return None
    return graph.array(node.input[0]).astype(np.float32).ravel()


def signed_weights(
    conv: QuantizedConv, exact: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(s8 weights (Cout, Cin, k), their zero point or None, their scale): the model's own
    integers moved by 128 where `exact` (u8 - zero == (u8 - 128) - (zero - 128)), or the
    float values quantized again to 7 bits per output channel."""
    if exact and conv.w_int.dtype == np.uint8:
        moved = (conv.w_int.astype(np.int16) - 128).astype(np.int8)
        return moved, (conv.w_zero.astype(np.int16) - 128).astype(np.int8), conv.w_scale
    if exact and conv.w_int.dtype == np.int8:
        return conv.w_int, conv.w_zero.astype(np.int8), conv.w_scale
    weights = conv.weights
    peak = np.abs(weights).reshape(len(weights), -1).max(axis=1)
    scale = (np.where(peak > 0, peak, 1.0) / SEVEN_BITS).astype(np.float32)
    ints = np.clip(np.round(weights / scale[:, None, None]), -SEVEN_BITS, SEVEN_BITS)
    return ints.astype(np.int8), None, scale


def as_matmul(graph: Graph, conv: QuantizedConv, exact: bool) -> list[onnx.NodeProto]:
    """The nodes that compute `conv.output` as one u8 x s8 MatMulInteger over the taps."""
    from onnx import TensorProto, helper

    w_int8, w_zero, w_scale = signed_weights(conv, exact)
    out_channels, _, taps = w_int8.shape
    name = conv.node.name or conv.output
    # Rows tap by tap, each tap's input channels in order: as the slices are laid side by side.
    weights = graph.add(f"{name}/taps", w_int8.transpose(2, 1, 0).reshape(-1, out_channels))
    zeros = [] if w_zero is None else [graph.add(f"{name}/w_zero", w_zero)]
    scales = graph.add(f"{name}/w_scale", w_scale)
    span = conv.dilation * (taps - 1)
    node = helper.make_node
    nodes = [
        node("Transpose", [conv.x_q], [f"{name}/by_time"], perm=[0, 2, 1]),
        node(
            "Pad",
            [f"{name}/by_time", graph.ints(0, conv.pads[0], 0, 0, conv.pads[1], 0), conv.x_zero],
            [f"{name}/padded"],
            mode="constant",
        ),
    ]
    shifted = []
    for tap in range(taps):
        start, short = tap * conv.dilation, span - tap * conv.dilation
        nodes.append(
            node(
                "Slice",
                [
                    f"{name}/padded",
                    graph.ints(start),
                    graph.ints(-short if short else _END),
                    graph.ints(1),
                ],
                [f"{name}/tap{tap}"],
            )  # fmt: skip
        )
        shifted.append(f"{name}/tap{tap}")
    nodes += [
        node("Concat", shifted, [f"{name}/columns"], axis=2),
        node("MatMulInteger", [f"{name}/columns", weights, conv.x_zero, *zeros], [f"{name}/int"]),
        node("Cast", [f"{name}/int"], [f"{name}/float"], to=TensorProto.FLOAT),
        node("Mul", [conv.x_scale, scales], [f"{name}/scale"]),
        node("Mul", [f"{name}/float", f"{name}/scale"], [f"{name}/scaled"]),
    ]
    last = f"{name}/scaled"
    if conv.bias is not None:
        bias = graph.add(f"{name}/bias", conv.bias)
        nodes.append(node("Add", [last, bias], [f"{name}/biased"]))
        last = f"{name}/biased"
    nodes.append(node("Transpose", [last], [conv.output], perm=[0, 2, 1]))
    return nodes


def needed(nodes: list[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """`nodes` (in order) that the graph's `outputs` still depend on."""
    wanted, kept = set(outputs), []
    for node in reversed(nodes):
        if wanted.intersection(node.output):
            kept.append(node)
            wanted.update(name for name in node.input if name)
    return kept[::-1]
