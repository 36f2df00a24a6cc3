"""ONNX Runtime session options shared by the local embedders: the same graph on every CPU.

In float32, ONNX Runtime's result differs between CPUs only in the order its kernels (AVX2,
AVX-512) add up products, at about 1e-6 of a vector component. Two things could add more, and
both are pinned here:
- graph optimisations: level "extended" (operator fusions such as attention and layer norm,
  which are the same on every x86 CPU) but not "all", whose layout transformations pick blocked
  formats by the CPU's vector width;
- threads: `threads` intra-op threads and one inter-op thread, so a busy machine or a bigger one
  runs the same schedule.
"""

from __future__ import annotations

from typing import Any


def cpu_session_options(threads: int) -> Any:
    """`onnxruntime.SessionOptions` for a local embedder (imported lazily: onnxruntime is heavy)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.log_severity_level = 3
    return options
