"""The retrieval pipeline's stages (retrieval/pipeline.py), each alone, and the whole as the engine runs it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.retrieval import pipeline
from memoryscope_plugins.settings import RerankerSettings, RetrievalSettings
from memoryscope_plugins.storage.base import Candidate
from memoryscope_plugins.storage.sqlite_store import SQLiteStore
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType, ScoredMemory, TimeRange

NOW = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)  # a Friday
LAST_FRIDAY = datetime(2026, 11, 13, tzinfo=timezone.utc)


def _memory(mid: str, content: str = "x", **kwargs) -> Memory:
    return Memory(id=mid, user_id="u", agent_id="a", content=content, created_at=kwargs.pop("created_at", NOW),
                  **kwargs)


def _scored(mid: str, score: float, **kwargs) -> ScoredMemory:
    return ScoredMemory(memory=_memory(mid, **kwargs), score=score)


def _request(query: str = "anything", **kwargs) -> pipeline.RetrievalRequest:
    return pipeline.RetrievalRequest(**{"user_id": "u", "query": query, "now": NOW, "top_k": 3,
                                        "min_relevance": 0.1, **kwargs})


def test_the_query_time_is_the_range_its_words_name_and_none_when_it_would_leave_datetime():
    parsed = pipeline.query_time("what did I cook last Friday?", NOW)
    assert parsed.range == TimeRange(LAST_FRIDAY, LAST_FRIDAY + timedelta(days=1))
    assert parsed.language == "en"
    beyond = pipeline.query_time("what will I do in 3 years?", datetime(9998, 6, 1, tzinfo=timezone.utc))
    assert beyond.range is None and beyond.remainder == "what will I do in 3 years?"


def test_full_text_searches_the_query_without_its_time_words_unless_nothing_else_is_left():
    assert pipeline.search_text("what did I cook last Friday?", pipeline.query_time("what did I cook last Friday?",
                                                                                   NOW)) == "what did I cook?"
    assert pipeline.search_text("last Friday", pipeline.query_time("last Friday", NOW)) == "last Friday"
    assert pipeline.search_text("what did I cook?", pipeline.query_time("what did I cook?", NOW)) == "what did I cook?"


def test_the_filter_takes_the_callers_range_else_the_query_range_only_in_filter_mode():
    parsed = pipeline.query_time("what did I cook last Friday?", NOW)
    boost = pipeline.memory_filter(_request(), parsed, RetrievalSettings(time_mode="boost"))
    assert boost.time_range is None and boost.statuses == (MemoryStatus.ACTIVE,)
    widened = pipeline.memory_filter(_request(), parsed, RetrievalSettings(time_mode="filter", time_fuzz_days=1))
    assert widened.time_range == TimeRange(LAST_FRIDAY - timedelta(days=1), LAST_FRIDAY + timedelta(days=2))
    explicit = TimeRange(NOW - timedelta(days=30), NOW)
    flt = pipeline.memory_filter(_request(time_range=explicit, include_expired=True, agent_id="a",
                                          types=(MemoryType.TURN,)), parsed, RetrievalSettings(time_mode="filter"))
    assert (flt.time_range, flt.statuses, flt.agent_id, flt.types) == (explicit, None, "a", (MemoryType.TURN,))


def test_fusion_prefers_both_channels_and_the_speaker_the_query_names():
    cands = [Candidate(_memory("text", speaker="Caroline"), text_rank=1, text_score=4.0),
             Candidate(_memory("both", speaker="Melanie"), text_rank=2, text_score=2.0, vector_rank=1,
                       vector_score=0.8),
             Candidate(_memory("vector", speaker="Caroline"), vector_rank=2, vector_score=0.4)]
    cfg = RetrievalSettings(fusion="linear", neighbour_weight=0, speaker_boost=0)
    plain = pipeline.fuse_candidates(cands, "what happened?", cfg)
    assert max(plain, key=lambda s: s.score).memory.id == "both"
    named = pipeline.fuse_candidates(cands, "what did Caroline say?", cfg.model_copy(update={"speaker_boost": 1.0}))
    assert max(named, key=lambda s: s.score).memory.id == "text"


def test_adjusting_lifts_the_time_the_query_names_and_for_the_present_the_newest():
    cfg = RetrievalSettings(time_boost=1.0, time_fuzz_days=0, recency_weight=0, present_half_life_days=30,
                            present_weight=0.9, type_weights={"turn": 1.0})
    parsed = pipeline.query_time("what did I cook last Friday?", NOW)
    ranked = [_scored("other day", 1.0, created_at=NOW - timedelta(days=3)),
              _scored("that friday", 1.0, created_at=LAST_FRIDAY + timedelta(hours=12))]
    out = pipeline.adjust_scores(ranked, cfg, parsed, NOW, about_present=False)
    assert out[0].memory.id == "that friday" and out[0].score > out[1].score
    plain = pipeline.query_time("where do I live?", NOW)
    ranked = [_scored("old", 1.0, created_at=NOW - timedelta(days=300)), _scored("new", 0.9, created_at=NOW)]
    assert pipeline.adjust_scores(ranked, cfg, plain, NOW, about_present=False)[0].memory.id == "old"
    assert pipeline.adjust_scores(ranked, cfg, plain, NOW, about_present=True)[0].memory.id == "new"


def test_the_relevance_floor_keeps_shared_words_and_close_meanings_only():
    ranked = [ScoredMemory(_memory("word", "ramen"), 1.0, {"bm25": 2.0, "cosine": 0.1}),
              ScoredMemory(_memory("close", "noodles"), 0.9, {"cosine": 0.9}),
              ScoredMemory(_memory("far", "taxes"), 0.8, {"cosine": 0.2})]
    kept = pipeline.relevance_floor(ranked, 0.3, 0.5, "ramen")
    assert [s.memory.id for s in kept] == ["word", "close"]
    assert len(pipeline.relevance_floor(ranked, -1, 0.5, "ramen")) == 3


def test_the_shortlist_is_the_best_few_without_repeats():
    ranked = [_scored("a", 3, content="I like tea."), _scored("b", 2, content="i like TEA"),
              _scored("c", 1, content="I like coffee.")]
    assert [s.memory.id for s in pipeline.shortlist(ranked, 2, deduplicated=True)] == ["a", "c"]
    assert [s.memory.id for s in pipeline.shortlist(ranked, 2, deduplicated=False)] == ["a", "b"]


class _Reverser:
    name = "reverser"

    def rerank(self, query, documents):
        return [float(i) for i in range(len(documents))]  # the last one best


class _Broken:
    name = "broken"

    def rerank(self, query, documents):
        raise RuntimeError("down")


def test_rerank_reorders_the_head_and_a_failing_reranker_keeps_the_fused_order():
    ranked = [_scored("a", 3), _scored("b", 2), _scored("c", 1)]
    out = pipeline.rerank("q", ranked, _Reverser(), RerankerSettings(candidates=2, weight=1.0))
    assert [s.memory.id for s in out] == ["b", "a", "c"]  # only the head of 2 is reranked
    assert out[0].scores["rerank"] == 1.0
    same = [_scored("a", 3), _scored("b", 2)]
    assert [s.memory.id for s in pipeline.rerank("q", same, _Broken(), RerankerSettings())] == ["a", "b"]


@pytest.fixture
def store(tmp_path):
    store = SQLiteStore(tmp_path / "m.db", embedding_model="none")
    yield store
    store.close()


def _turns(store, texts: list[str]) -> list[Memory]:
    memories, previous = [], None
    for i, text in enumerate(texts):
        memory = _memory(f"t{i}", text, type=MemoryType.TURN, created_at=NOW + timedelta(minutes=i),
                         speaker="Caroline", previous_id=previous)
        memories.append(memory)
        previous = memory.id
    store.put(memories)
    return memories


def test_neighbour_turns_are_the_turns_around_a_hit_read_from_the_store(store):
    turns = _turns(store, ["Where should we go in June?", "Let's visit Lisbon.", "Great, I'll book it.",
                           "Unrelated chatter."])
    chosen = [ScoredMemory(turns[1], 1.0)]
    found = pipeline.neighbour_turns(store, _request(), chosen, [Candidate(turns[2])], RetrievalSettings())
    assert [m.id for m in found] == ["t0", "t2"]
    off = RetrievalSettings(context_neighbours=0)
    assert pipeline.neighbour_turns(store, _request(), chosen, [], off) == []


def test_the_second_hop_finds_what_the_best_hit_names_and_the_query_does_not(store):
    turns = _turns(store, ["My friend Anna moved to Boston last spring.", "The weather is rainy.",
                           "Anna works night shifts as a nurse."])
    query = "What does the person who moved to Boston do?"
    request = _request(query)
    flt = pipeline.memory_filter(request, pipeline.query_time(query, NOW), RetrievalSettings())
    found = pipeline.hop(store, request, [ScoredMemory(turns[0], 1.0)], [], [], flt, RetrievalSettings())
    assert [m.id for m in found] == ["t2"]
    off = RetrievalSettings(context_hop=0)
    assert pipeline.hop(store, request, [ScoredMemory(turns[0], 1.0)], [], [], flt, off) == []


def test_the_pipeline_run_alone_gives_what_the_engine_returns(engine):
    engine.record("anna", [{"role": "user", "content": text, "timestamp": NOW - timedelta(days=i)}
                           for i, text in enumerate(["I moved to Lisbon last May.", "My dog is called Biscuit.",
                                                     "I had ramen for dinner yesterday."])])
    through_engine = engine.retrieve("anna", "what did I eat yesterday?", now=NOW, top_k=2)
    request = _request("what did I eat yesterday?", user_id="anna", top_k=2,
                       min_relevance=engine.settings.retrieval.min_relevance)
    alone = pipeline.retrieve(request, settings=engine.settings, store=engine.store, embedder=engine.embedder,
                              reranker=None)
    assert [(s.memory.id, s.score) for s in alone.memories] == [(s.memory.id, s.score)
                                                               for s in through_engine.memories]
    assert alone.context == through_engine.context and alone.time_range == through_engine.time_range
    assert alone.memories[0].memory.content == "I had ramen for dinner yesterday."
    assert set(alone.timings_ms) == {"parse_ms", "embed_ms", "search_ms", "rank_ms", "context_ms", "total_ms"}
