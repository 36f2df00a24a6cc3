"""The ranking steps as pure functions: fusion, neighbours, named speakers, type/time weights."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memoryscope_plugins.retrieval.ranking import (
    adjust,
    boost_named_speakers,
    deduplicate,
    fuse,
    propagate_neighbours,
    widen,
)
from memoryscope_plugins.settings import RetrievalSettings
from memoryscope_plugins.storage.base import Candidate
from memoryscope_plugins.types import Memory, MemoryType, ScoredMemory, TimeRange

NOW = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)


def _memory(mid: str, content: str = "x", **kwargs) -> Memory:
    return Memory(id=mid, user_id="u", agent_id="a", content=content, created_at=kwargs.pop("created_at", NOW),
                  **kwargs)


def _scored(mid: str, score: float, **kwargs) -> ScoredMemory:
    return ScoredMemory(memory=_memory(mid, **kwargs), score=score)


def test_linear_fusion_scales_each_channel_to_its_best():
    cands = [Candidate(_memory("a"), text_rank=1, text_score=10.0, vector_rank=2, vector_score=0.5),
             Candidate(_memory("b"), text_rank=2, text_score=5.0),
             Candidate(_memory("c"), vector_rank=1, vector_score=0.7)]
    fused = {s.memory.id: s.score for s in fuse(cands, RetrievalSettings(text_weight=1.0, vector_weight=1.0))}
    assert fused["a"] == 1.0 + 0.0  # best text, worst vector
    assert fused["b"] == 0.5
    assert fused["c"] == 1.0


def test_rrf_fusion():
    cands = [Candidate(_memory("a"), text_rank=1, vector_rank=1), Candidate(_memory("b"), text_rank=2)]
    fused = {s.memory.id: s.score for s in fuse(cands, RetrievalSettings(fusion="rrf", rrf_k=60))}
    assert fused["a"] == 2 / 61 and fused["b"] == 1 / 62


def test_neighbours_share_their_score():
    ranked = [_scored("q", 1.0), _scored("answer", 0.1, previous_id="q"), _scored("far", 0.3)]
    out = {s.memory.id: s.score for s in propagate_neighbours(ranked, 0.5)}
    assert out["answer"] == 0.1 + 0.5 * 1.0
    assert out["q"] == 1.0 + 0.5 * 0.1  # the turn after it counts too (scores from before the update)
    assert out["far"] == 0.3


def test_named_speaker_boost_only_when_some_speakers_are_named():
    ranked = [_scored("1", 0.2, speaker="Caroline"), _scored("2", 0.3, speaker="Melanie Smith"),
              _scored("3", 0.1, content="Melanie likes pottery")]
    out = {s.memory.id: s.score for s in boost_named_speakers(ranked, "What does Melanie like?", 0.5)}
    assert out == {"1": 0.2, "2": 0.8, "3": 0.6}
    both = [_scored("1", 0.2, speaker="Caroline"), _scored("2", 0.3, speaker="Melanie")]
    assert [s.score for s in boost_named_speakers(both, "Did Caroline and Melanie meet?", 0.5)] == [0.2, 0.3]


def test_type_weights_and_time_boost():
    cfg = RetrievalSettings(type_weights={"insight": 2.0, "observation": 1.5, "turn": 1.0}, time_boost=1.0,
                            time_fuzz_days=0)
    ranked = [_scored("turn", 1.0), _scored("obs", 1.0, type=MemoryType.OBSERVATION),
              _scored("ins", 1.0, type=MemoryType.INSIGHT)]
    assert [s.memory.id for s in adjust(ranked, cfg, time_range=None, now=NOW)] == ["ins", "obs", "turn"]
    may = TimeRange(datetime(2026, 5, 1, tzinfo=timezone.utc), datetime(2026, 6, 1, tzinfo=timezone.utc))
    ranked = [_scored("now", 1.0), _scored("event-in-may", 1.0, event_start=datetime(2026, 5, 9, tzinfo=timezone.utc)),
              _scored("said-in-may", 1.0, created_at=datetime(2026, 5, 20, tzinfo=timezone.utc))]
    out = adjust(ranked, cfg, time_range=may, now=NOW)
    assert {s.memory.id for s in out[:2]} == {"event-in-may", "said-in-may"}
    assert out[2].memory.id == "now"


def test_recency_decay_is_off_by_default_and_halves_with_half_life():
    old = _scored("old", 1.0, created_at=NOW - timedelta(days=30))
    new = _scored("new", 1.0)
    assert [s.score for s in adjust([old, new], RetrievalSettings(), time_range=None, now=NOW)] == [1.0, 1.0]
    cfg = RetrievalSettings(recency_half_life_days=30, recency_weight=1.0)
    out = {s.memory.id: s.score for s in adjust([_scored("old", 1.0, created_at=NOW - timedelta(days=30)),
                                                 _scored("new", 1.0)], cfg, time_range=None, now=NOW)}
    assert abs(out["old"] - 0.5) < 1e-9 and out["new"] == 1.0


def test_widen_keeps_open_sides_open():
    rng = widen(TimeRange(None, NOW), 2)
    assert rng.start is None and rng.end == NOW + timedelta(days=2)


def test_deduplicate_keeps_the_best_and_stops_at_limit():
    ranked = [_scored("1", 3, content="Hello, World!"), _scored("2", 2, content="hello world"),
              _scored("3", 1, content="other"), _scored("4", 0.5, content="more")]
    assert [s.memory.id for s in deduplicate(ranked, 2)] == ["1", "3"]


def test_time_ranges_are_half_open_on_both_sides():
    october = TimeRange(datetime(2024, 10, 1), datetime(2024, 11, 1))
    assert not october.overlaps(datetime(2024, 9, 1), datetime(2024, 10, 1))  # September ends as October starts
    assert october.overlaps(datetime(2024, 9, 30), datetime(2024, 10, 2))
    assert october.overlaps(datetime(2024, 10, 1), None)  # an instant at the start is inside
    assert not october.overlaps(datetime(2024, 11, 1), None)  # ... at the end is not
    assert not october.overlaps(datetime(2024, 9, 30, 23), None)
