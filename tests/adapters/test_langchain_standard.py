"""LangChain's own standard tests (``langchain-tests``) for `MemoryScopeRetriever`, plus per-call options.

The standard tests run a realistic question over six facts of which only two are about pets or
family: with the engine's relevance floor (0.1) only those two clear it here (measured: calibrated
0.17 and 0.11; the next is 0.08), so a retriever that applied the floor by default would return
2 documents for k=3 and fail them. LangChain's convention is k documents and an opt-in threshold
(``search_type="similarity_score_threshold"``); the floor tests below use thresholds far from
every score here (1.0: the same text), never the default floor's edge.
"""

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
SIX_FACTS = ["Anna's dog Biscuit loves the beach.", "Anna's sister Marie visits every Sunday.",
             "Anna works as a nurse.", "Anna is allergic to peanuts.", "Anna plays the cello.",
             "Anna drives a blue Volvo."]
QUESTION = "What do I know about the user's pets and family?"  # shares no word with the facts


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


@pytest.fixture(scope="module")
def six_facts(local_embedder):
    from memoryscope_plugins import MemoryScope
    with tempfile.TemporaryDirectory() as folder:
        engine = MemoryScope(path=Path(folder) / "memory.db", embedder=local_embedder)
        for fact in SIX_FACTS:
            engine.add("anna", fact)
        yield engine
        engine.close()


@pytest.fixture(scope="module")
def strict_engine(local_embedder):
    """The six facts under an engine whose own floor is 1.0: nothing here reaches it."""
    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.settings import Settings
    settings = Settings()
    settings = settings.model_copy(update={"retrieval": settings.retrieval.model_copy(update={"min_relevance": 1.0})})
    with tempfile.TemporaryDirectory() as folder:
        engine = MemoryScope(settings, path=Path(folder) / "memory.db", embedder=local_embedder)
        for fact in SIX_FACTS:
            engine.add("anna", fact)
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


class TestMemoryScopeRetrieverStandardFewerThanKClearTheFloor(TestMemoryScopeRetrieverStandard):
    """The same standard tests on a question where fewer than k facts clear the engine's floor."""

    @pytest.fixture(autouse=True)
    def _engine(self, six_facts):
        type(self).engine = six_facts

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


def test_k_documents_unless_a_floor_is_asked_for(strict_engine):
    retriever = MemoryScopeRetriever(memory=strict_engine, user_id="anna", k=3)
    assert len(retriever.invoke(QUESTION)) == 3  # the engine's floor (1.0 here) does not apply
    assert retriever.invoke(QUESTION, min_relevance=1.0) == []
    assert retriever.invoke(QUESTION, score_threshold=1.0) == []
    assert len(retriever.invoke(QUESTION, min_relevance=-1)) == 3
    floored = MemoryScopeRetriever(memory=strict_engine, user_id="anna", k=3, min_relevance=1.0)
    assert floored.invoke(QUESTION) == []
    assert len(floored.invoke(QUESTION, min_relevance=-1)) == 3  # per call beats the instance
    by_kwargs = MemoryScopeRetriever(memory=strict_engine, user_id="anna", search_type="similarity_score_threshold",
                                     search_kwargs={"k": 2, "score_threshold": 1.0})
    assert by_kwargs.invoke(QUESTION) == []
    assert len(by_kwargs.invoke(QUESTION, score_threshold=-1)) == 2  # search_kwargs' k
    # similarity_score_threshold without a threshold: the engine's own floor (1.0 in this engine)
    engine_floor = MemoryScopeRetriever(memory=strict_engine, user_id="anna", k=3,
                                        search_type="similarity_score_threshold")
    assert engine_floor.invoke(QUESTION) == []
    assert len(MemoryScopeRetriever(memory=strict_engine, user_id="anna", search_kwargs={"k": 4}).invoke(QUESTION)) == 4


async def test_the_floor_per_call_async(strict_engine):
    retriever = MemoryScopeRetriever(memory=strict_engine, user_id="anna", k=3)
    assert len(await retriever.ainvoke(QUESTION)) == 3
    assert await retriever.ainvoke(QUESTION, min_relevance=1.0) == []


def test_the_middleware_keeps_the_engines_floor(strict_engine):
    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware
    assert MemoryScopeMiddleware(strict_engine, user_id="anna").bridge.retrieve("anna", QUESTION).memories == []
    loose = MemoryScopeMiddleware(strict_engine, user_id="anna", top_k=3, min_relevance=-1)
    assert len(loose.bridge.retrieve("anna", QUESTION).memories) == 3


@pytest.mark.parametrize("options", [{"min_relevance": 2}, {"score_threshold": "high"}, {"min_relevance": True},
                                     {"min_relevance": float("nan")}, {"min_relevance": 0.1, "score_threshold": 0.1}])
def test_a_bad_floor_is_refused(shared_engine, options):
    retriever = MemoryScopeRetriever(memory=shared_engine, user_id="anna")
    with pytest.raises(ValueError):
        retriever.invoke("dog", **options)
    with pytest.raises(ValueError):
        MemoryScopeRetriever(memory=shared_engine, user_id="anna", search_kwargs=options)


def test_bad_search_settings_are_refused(shared_engine):
    for bad in ({"search_type": "mmr"}, {"search_kwargs": {"fetch_k": 20}}, {"search_kwargs": {"k": 0}}):
        with pytest.raises(ValueError):
            MemoryScopeRetriever(memory=shared_engine, user_id="anna", **bad)


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


def test_no_floor_by_default(shared_engine):
    retriever = MemoryScopeRetriever(memory=shared_engine, user_id="anna")
    assert len(retriever.invoke("What is 2 + 2?")) == 5  # every memory of anna, none of bob's
    floor_zero = MemoryScopeRetriever(memory=shared_engine, user_id="anna", min_relevance=0)
    assert len(floor_zero.invoke("What is 2 + 2?")) == 5
