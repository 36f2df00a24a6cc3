"""Listings show when a memory was said or recorded, and its event time beside it, labelled."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.cli.main import main
from memoryscope_plugins.timeparse.labels import event_text, when_label
from memoryscope_plugins.types import Memory, MemoryType, Message

SAID = datetime(2026, 11, 25, 9, 30, tzinfo=timezone.utc)  # a Wednesday
OCT = datetime(2026, 10, 1, tzinfo=timezone.utc)


def memory(kind: MemoryType, **fields) -> Memory:
    return Memory(id="m1", user_id="tom", agent_id="assistant", content="x", type=kind, created_at=SAID,
                  **fields)


def test_labels_name_both_times():
    assert when_label(memory(MemoryType.OBSERVATION, role="user")) == "said 2026-11-25 Wed"
    assert when_label(memory(MemoryType.OBSERVATION, role="user", event_start=OCT,
                             event_end=datetime(2026, 11, 1, tzinfo=timezone.utc))) == \
        "said 2026-11-25 Wed · event 2026-10"
    assert when_label(memory(MemoryType.TURN, role="user", event_start=OCT,
                             event_end=datetime(2026, 11, 1, tzinfo=timezone.utc))) == \
        "said 2026-11-25 Wed · mentions 2026-10"
    assert when_label(memory(MemoryType.INSIGHT)) == "recorded 2026-11-25 Wed"
    assert when_label(memory(MemoryType.CUSTOM, event_start=OCT, event_end=OCT + timedelta(days=1))) == \
        "recorded 2026-11-25 Wed · event 2026-10-01 Thu"
    assert when_label(memory(MemoryType.OBSERVATION, role="user", event_start=OCT,
                             metadata={"event_time_kind": "start"})) == "said 2026-11-25 Wed · since 2026-10-01 Thu"
    assert when_label(memory(MemoryType.OBSERVATION, role="user", event_start=OCT,
                             event_end=datetime(2026, 11, 1, tzinfo=timezone.utc)), "zh") == \
        "说于 2026年11月25日 周三 · 事件 2026-10"


def test_event_text_of_years_and_spans():
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert event_text(start, datetime(2026, 1, 1, tzinfo=timezone.utc)) == "2025"
    assert event_text(OCT, OCT + timedelta(days=7)) == "2026-10-01 Thu – 2026-10-07 Wed"


def test_cli_list_shows_a_turn_under_the_day_it_was_said(tmp_path, capsys, local_embedder):
    store = tmp_path / "cli.db"
    engine = MemoryScope(path=store, embedder=local_embedder)
    try:
        engine.record("tom", [Message("user", "I moved to Hangzhou last month.", name="Tom", timestamp=SAID)])
    finally:
        engine.close()
    assert main(["--store", str(store), "list", "tom"]) == 0
    line = capsys.readouterr().out.strip()
    assert "[said 2026-11-25 Wed · mentions 2026-10] turn: I moved to Hangzhou last month." in line
