"""Remote models that fail, faked at the HTTP boundary: the engine degrades, it never loses a memory."""

from __future__ import annotations

import logging

import pytest

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.errors import ModelAuthError
from memoryscope_plugins.models.http_rerank import HttpReranker
from memoryscope_plugins.models.openai_compat import OpenAIEmbedder
from tests.support.fakes.fake_model_server import OPENAI_EMBEDDINGS, FakeModelServer, Reply


def _down(server: FakeModelServer, times: int) -> None:
    server.script(OPENAI_EMBEDDINGS, [Reply(status=503, json={"error": {"message": "overloaded"}})] * times)


def test_failing_embedder_stores_without_vectors_then_catches_up(tmp_path, caplog):
    with FakeModelServer(embedding_dim=8) as server:
        embedder = OpenAIEmbedder("fake-embed", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        with MemoryScope(path=tmp_path / "m.db", embedder=embedder) as memory:
            memory.record("anna", [("user", "I water the orchids on Sundays.")])
            _down(server, 2)  # the next record and the next query both fail to embed
            with caplog.at_level(logging.WARNING, logger="memoryscope_plugins"):
                memory.record("anna", [("user", "My orchid collection has twelve plants.")])
                result = memory.retrieve("anna", "orchid plants")
            assert memory.count("anna") == 2  # nothing lost
            assert memory.store.count_needing_vectors() == 1
            assert "twelve plants" in result.memories[0].memory.content  # found by full text
            assert "embedding failed" in caplog.text and "orchid" not in caplog.text  # no content in logs
            memory.record("anna", [("user", "The embedder is back.")])  # succeeds, and catches up
            assert memory.store.count_needing_vectors() == 0


def test_bad_key_is_a_clear_error_on_start(tmp_path):
    with FakeModelServer() as server:
        server.script(OPENAI_EMBEDDINGS, [Reply(status=401, json={"error": {"message": "invalid key sk-secret"}})] * 3)
        embedder = OpenAIEmbedder("fake-embed", base_url=server.url + "/v1", api_key="sk-secret", dimensions=8,
                                  max_retries=0)
        with pytest.raises(ModelAuthError) as info:
            embedder.embed(["hello"])
        assert "sk-secret" not in str(info.value)


def test_reranker_reorders_and_a_failing_reranker_keeps_the_fused_order(tmp_path, local_embedder):
    with FakeModelServer() as server:
        reranker = HttpReranker("fake-rerank", server.url + "/v1", api_key="sk-test", max_retries=0)
        settings = Settings(reranker={"provider": "http", "model": "fake-rerank", "base_url": server.url + "/v1"})
        with MemoryScope(settings, path=tmp_path / "r.db", embedder=local_embedder, reranker=reranker) as memory:
            memory.record("anna", [("user", "tea"), ("user", "green tea grown in the hills of Japan")])
            result = memory.retrieve("anna", "green tea Japan hills", top_k=2)
            assert "rerank" in result.memories[0].scores and "rerank_ms" in result.timings_ms
            assert server.requests_to("/v1/rerank")
            server.script("/v1/rerank", [Reply(status=500, json={"error": "boom"})])
            degraded = memory.retrieve("anna", "green tea Japan hills", top_k=2)
            assert len(degraded.memories) == 2
            assert memory.retrieve("anna", "green tea", rerank=False).timings_ms.get("rerank_ms") is None
