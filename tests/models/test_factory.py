"""Switching provider is configuration only: settings build the right clients."""

from __future__ import annotations

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.models.factory import build_embedder, build_llm, build_reranker
from tests.support.fakes.fake_model_server import FakeModelServer


def test_defaults_are_local_and_offline():
    settings = Settings()
    assert build_embedder(settings.embedder).name.startswith("local:")
    assert build_llm(settings.llm) is None
    assert build_reranker(settings.reranker) is None


def test_remote_embedder_from_settings_alone(tmp_path, monkeypatch):
    with FakeModelServer(embedding_dim=16) as server:
        monkeypatch.setenv("MEMORYSCOPE_EMBEDDER__PROVIDER", "openai")
        monkeypatch.setenv("MEMORYSCOPE_EMBEDDER__MODEL", "bge-m3")
        monkeypatch.setenv("MEMORYSCOPE_EMBEDDER__BASE_URL", server.url + "/v1")
        monkeypatch.setenv("MEMORYSCOPE_EMBEDDER__API_KEY", "sk-from-env")
        monkeypatch.setenv("MEMORYSCOPE_LLM__PROVIDER", "openai")
        monkeypatch.setenv("MEMORYSCOPE_LLM__MODEL", "qwen-plus")
        monkeypatch.setenv("MEMORYSCOPE_LLM__BASE_URL", server.url + "/v1")
        monkeypatch.setenv("MEMORYSCOPE_CONSOLIDATION__ENABLED", "false")
        settings = Settings()
        assert "sk-from-env" not in repr(settings) and "sk-from-env" not in str(settings.redacted())
        with MemoryScope(settings, path=tmp_path / "m.db") as memory:
            assert memory.embedder.name.startswith("openai:bge-m3")
            assert memory.llm is not None
            memory.record("anna", [("user", "remote embeddings work")])
            assert memory.store.count_needing_vectors() == 0
            assert memory.retrieve("anna", "remote embeddings").memories
            headers = {k.lower(): v for k, v in server.requests_to("/v1/embeddings")[0].headers.items()}
            assert headers["authorization"] == "Bearer sk-from-env"
