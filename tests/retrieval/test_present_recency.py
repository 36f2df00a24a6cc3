"""A question about the present ("now", "现在", "目前") ranks the newer of similar memories first."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope, Settings
from memoryscope_plugins.retrieval.present import asks_about_present
from memoryscope_plugins.retrieval.ranking import prefer_recent
from memoryscope_plugins.types import Memory, MemoryType, ScoredMemory


@pytest.mark.parametrize("query", [
    "Where does she work now?", "Is he still vegetarian?", "What is Anna currently reading?",
    "What have you been up to lately?", "用户目前的感情状况如何？", "用户现在的职位是什么？",
    "用户最近在自学哪种技能？", "他还在上海工作吗？",
])
def test_present_questions(query):
    assert asks_about_present(query)


@pytest.mark.parametrize("query", [
    "Where did she work in 2022?", "What did I say about my job?", "Why did Melanie go to the beach?",
    "用户的老家在哪座城市？", "2024年国庆用户去了哪里？", "knowledge of snow",  # "now" inside a word
])
def test_other_questions(query):
    assert not asks_about_present(query)


def _scored(content: str, day: int, score: float) -> ScoredMemory:
    memory = Memory(id=content, user_id="u", agent_id="a", content=content, type=MemoryType.TURN,
                    created_at=datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(days=day))
    return ScoredMemory(memory=memory, score=score, scores={})


def test_age_counts_back_from_the_newest_candidate():
    ranked = prefer_recent([_scored("old", 0, 1.0), _scored("new", 90, 0.9)], half_life_days=90, weight=0.3)
    assert [item.memory.content for item in ranked] == ["new", "old"]
    assert ranked[0].scores["present"] == pytest.approx(1.0)
    assert ranked[1].scores["present"] == pytest.approx(0.7 + 0.3 * 0.5)
    assert ranked[1].score == pytest.approx(0.85)


def test_weight_zero_changes_nothing():
    items = [_scored("old", 0, 1.0), _scored("new", 90, 0.9)]
    assert [i.memory.content for i in prefer_recent(items, 90, 0.0)] == ["old", "new"]
    assert "present" not in items[0].scores


FILLERS = ["My sister lives in Lisbon.", "I love hiking in the mountains.", "Our cat is called Mochi.",
           "I had pasta for dinner."]


def _memory(tmp_path, local_embedder, half_life):
    settings = Settings()
    settings = settings.model_copy(update={
        "retrieval": settings.retrieval.model_copy(update={"present_half_life_days": half_life})})
    memory = MemoryScope(settings, path=tmp_path / f"{half_life}.db", embedder=local_embedder)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    memory.record("ann", [{"role": "user", "content": text, "timestamp": start + timedelta(days=i)}
                          for i, text in enumerate(FILLERS)], session_id="fillers")
    memory.record("ann", [{"role": "user", "content": "I work as a nurse at the city hospital.",
                           "timestamp": datetime(2025, 1, 10, tzinfo=timezone.utc)}], session_id="january")
    memory.record("ann", [{"role": "user", "content": "I work as a teacher at the primary school.",
                           "timestamp": datetime(2025, 6, 10, tzinfo=timezone.utc)}], session_id="june")
    return memory


def _top(memory, query):
    result = memory.retrieve("ann", query, now=datetime(2025, 7, 1, tzinfo=timezone.utc))
    return result.memories[0]


def test_the_latest_job_first_when_asked_about_now(tmp_path, local_embedder):
    with _memory(tmp_path, local_embedder, 90.0) as memory:
        # final scores, float32 (int8 compute): teacher 1.639 (1.676) over nurse 1.588 (1.588); a CPU
        # moves them by about 1e-6, and int8's far larger change kept the order
        now = _top(memory, "Where do I work now?")
        assert "teacher" in now.memory.content and now.scores["present"] == pytest.approx(1.0)
        # nurse 2.0 over teacher 1.76 (int8: 1.85)
        plain = _top(memory, "Where do I work?")  # no present words: relevance alone
        assert "nurse" in plain.memory.content and "present" not in plain.scores


def test_off_when_the_half_life_is_none(tmp_path, local_embedder):
    with _memory(tmp_path, local_embedder, None) as memory:
        top = _top(memory, "Where do I work now?")  # nurse 2.0 over teacher 1.64 (int8: 1.68)
        assert "nurse" in top.memory.content and "present" not in top.scores
