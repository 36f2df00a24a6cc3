"""LangChain's own standard tests (``langchain-tests``) for `MemoryScopeRetriever`, plus per-call options."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("langchain_core", reason="pip install 'memoryscope-plugins[langchain]'")
pytest.importorskip("langchain_tests", reason="pip install 'memoryscope-plugins[dev]' (langchain-tests)")

from langchain_tests.integration_tests import RetrieversIntegrationTests
from memoryscope_plugins.adapters.langchain import MemoryScopeRetriever

FACTS = ["Anna's dog Biscuit loves the beach.", "Anna walks her dog every morning.",
         "Anna bought her dog a red collar.", "Anna's dog is afraid of thunder.", "Anna works as a nurse."]


@pytest.fixture(scope="module")
def shared_engine(local_embedder):
    from memoryscope_plugins import MemoryScope
    with tempfile.TemporaryDirectory() as folder:
        engine = MemoryScope(path=Path(folder) / "memory.db", embedder=local_embedder)
        for fact in FACTS:
            engine.add("anna", fact)
        engine.add("bob", "Bob's dog is called Rex.")
        yield engine
        engine.close()


class TestMemoryScopeRetrieverStandard(RetrieversIntegrationTests):
    engine = None

    @pytest.fixture(autouse=True)
    def _engine(self, shared_engine):
        type(self).engine = shared_engine

    @property
    def retriever_constructor(self) -> type[MemoryScopeRetriever]:
        return MemoryScopeRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"memory": self.engine, "user_id": "anna"}

    @property
    def retriever_query_example(self) -> str:
        return "What do I know about Anna's dog?"


def test_user_and_k_per_call(shared_engine):
    retriever = MemoryScopeRetriever(memory=shared_engine)
    assert retriever.invoke("dog") == []  # no user: no documents, nobody's memories
    bob = retriever.invoke("dog", config={"configurable": {"user_id": "bob"}})
    assert [d.page_content for d in bob] == ["Bob's dog is called Rex."]
    assert len(retriever.invoke("dog", user_id="anna", k=2)) == 2
    assert len(MemoryScopeRetriever(memory=shared_engine, user_id="anna", top_k=1).invoke("dog")) == 1
    assert len(retriever.invoke("dog", user_id="anna", top_k=1)) == 1
    with pytest.raises(ValueError):
        retriever.invoke("dog", user_id="anna", k=0)
    with pytest.raises(TypeError):
        retriever.invoke("dog", user_id="anna", limit=2)


def test_relevance_floor(shared_engine):
    retriever = MemoryScopeRetriever(memory=shared_engine, user_id="anna")
    assert retriever.invoke("What is 2 + 2?") == []
    assert len(MemoryScopeRetriever(memory=shared_engine, user_id="anna", min_relevance=0).invoke("What is 2 + 2?")) == 5
