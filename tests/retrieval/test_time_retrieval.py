"""Time-aware retrieval, end to end: memories spread over two months, time words in the query."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope, Settings

NOW = datetime(2026, 4, 16, 20, 0, tzinfo=timezone.utc)  # a Thursday

DIARY = [  # (day, text) spread over February-April 2026
    ("2026-02-14", "I cooked a big dinner for friends and we played board games."),
    ("2026-02-21", "I went to the cinema and watched a documentary about whales."),
    ("2026-03-01", "I started a pottery class at the community centre."),
    ("2026-03-12", "I visited the science museum with my nephew."),
    ("2026-03-28", "I ran a half marathon along the river."),
    ("2026-04-04", "I repainted the kitchen walls a pale green."),
    ("2026-04-08", "我和同事去吃了火锅，然后去唱了卡拉OK。"),  # Wednesday of last week
    ("2026-04-11", "I went hiking in the hills and had a picnic by the lake."),  # last weekend (Sat)
    ("2026-04-12", "I spent Sunday reading a novel in the park."),  # last weekend (Sun)
    ("2026-04-14", "I fixed a bug in the billing service at work."),
]


@pytest.fixture
def diary(tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "diary.db", embedder=local_embedder) as memory:
        for day, text in DIARY:
            memory.record("anna", [{"role": "user", "content": text,
                                    "timestamp": datetime.fromisoformat(day).replace(hour=19, tzinfo=timezone.utc)}],
                          session_id=day)
        yield memory


def _top_days(memory, query, n):
    result = memory.retrieve("anna", query, now=NOW, top_k=n)
    return [m.memory.created_at.date().isoformat() for m in result.memories], result


def test_last_weekend(diary):
    days, result = _top_days(diary, "what did I do last weekend?", 2)
    assert sorted(days) == ["2026-04-11", "2026-04-12"]
    assert result.time_range is not None


def test_chinese_last_wednesday(diary):
    days, _ = _top_days(diary, "上周三我做了什么", 1)
    assert days == ["2026-04-08"]


def test_in_march(diary):
    days, _ = _top_days(diary, "what happened in March?", 3)
    assert sorted(days) == ["2026-03-01", "2026-03-12", "2026-03-28"]


def test_topic_still_matters_inside_the_range(diary):
    days, _ = _top_days(diary, "did I go to a museum in March?", 1)
    assert days == ["2026-03-12"]


def test_asking_when_keeps_content_ranking_and_shows_dates(diary):
    result = diary.retrieve("anna", "When did I run the half marathon?", now=NOW, top_k=1)
    assert result.time_range is None
    assert result.memories[0].memory.content.startswith("I ran a half marathon")
    assert "[2026-03-28 Sat]" in result.context


def test_filter_mode_excludes_other_dates(tmp_path, local_embedder):
    settings = Settings(retrieval={"time_mode": "filter", "time_fuzz_days": 0})
    with MemoryScope(settings, path=tmp_path / "f.db", embedder=local_embedder) as memory:
        for day, text in DIARY:
            memory.record("anna", [{"role": "user", "content": text,
                                    "timestamp": datetime.fromisoformat(day).replace(hour=19, tzinfo=timezone.utc)}])
        result = memory.retrieve("anna", "what did I do last weekend?", now=NOW, top_k=10)
        assert sorted(m.memory.created_at.date().isoformat() for m in result.memories) == ["2026-04-11", "2026-04-12"]


def test_event_time_counts_as_well_as_message_time(tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "e.db", embedder=local_embedder) as memory:
        # told on Monday about the weekend: the event time is what matters
        memory.add("anna", "Anna went sailing with her father.", type="observation",
                   created_at=datetime(2026, 4, 13, 9, tzinfo=timezone.utc),
                   event_start=datetime(2026, 4, 11, tzinfo=timezone.utc),
                   event_end=datetime(2026, 4, 13, tzinfo=timezone.utc))
        memory.add("anna", "Anna went sailing as a child.", type="observation",
                   created_at=datetime(2026, 2, 1, 9, tzinfo=timezone.utc))
        result = memory.retrieve("anna", "sailing last weekend", now=NOW, top_k=2)
        assert result.memories[0].memory.content == "Anna went sailing with her father."
        # dated by when it was told, the event time labelled beside it
        assert "[2026-04-13 Mon] Anna went sailing with her father. (event: 2026-04-11 Sat – 2026-04-12 Sun)" \
            in result.context.splitlines()


def test_context_in_chinese_uses_chinese_dates(diary):
    result = diary.retrieve("anna", "上周三我做了什么", now=NOW, top_k=1)
    assert "2026年4月8日 周三" in result.context
    assert timedelta(0) < NOW - result.memories[0].memory.created_at
