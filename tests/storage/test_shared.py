"""The parts every store backend shares: records, time codes, message states, the backend registry."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins.errors import ConfigError
from memoryscope_plugins.settings import StoreSettings
from memoryscope_plugins.storage import registry
from memoryscope_plugins.storage.base import MemoryFilter
from memoryscope_plugins.storage.filtering import matches
from memoryscope_plugins.storage.messages import MESSAGE_STATES, check_state
from memoryscope_plugins.storage.records import (
    MEMORY_COLUMNS,
    MEMORY_VALUE_COLUMNS,
    MESSAGE_COLUMNS,
    MESSAGE_WRITE_COLUMNS,
    memory_from_row,
    memory_values,
    message_from_row,
    message_values,
)
from memoryscope_plugins.storage.sqlite_store import SQLiteStore
from memoryscope_plugins.storage.timecodes import epoch_microseconds, epoch_seconds, iso, parse_iso
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType, Message, TimeRange

IST = timezone(timedelta(hours=5, minutes=30))
T0 = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_a_memory_round_trips_through_its_row():
    memory = Memory(id="m1", user_id="u", agent_id="a", content="c", type=MemoryType.INSIGHT,
                    status=MemoryStatus.EXPIRED, created_at=T0.astimezone(IST), updated_at=T0,
                    event_start=T0, event_end=None, source_ids=["x"], metadata={"k": [1, "v"]}, previous_id="p",
                    speaker="s", role="user", session_id="s1", context="ctx", superseded_by="m2")
    values = memory_values(memory)
    assert tuple(values) == MEMORY_VALUE_COLUMNS
    row = [values.get(c, "model") for c in MEMORY_COLUMNS]
    back = memory_from_row(row)
    assert back == Memory(**{**{s: getattr(memory, s) for s in Memory.__slots__}, "embedding_model": "model"})
    assert back.created_at.utcoffset() == timedelta(hours=5, minutes=30)


def test_a_message_round_trips_through_its_row():
    message = Message(role="user", content="hi", name="Ann", timestamp=T0, metadata={"k": 1})
    values = message_values("id1", "u", "a", None, message, "pending")
    assert len(values) == len(MESSAGE_WRITE_COLUMNS)
    row = dict(zip(MESSAGE_WRITE_COLUMNS, values), seq=7, attempts=0)
    stored = message_from_row([row[c] for c in MESSAGE_COLUMNS])
    assert (stored.id, stored.seq, stored.state, stored.message) == ("id1", 7, "pending", message)


def test_times_encode_exactly_and_naive_means_utc():
    assert parse_iso(iso(T0.astimezone(IST))) == T0 and iso(None) is None
    naive = datetime(2024, 3, 1, 12, 0)
    assert epoch_seconds(naive) == epoch_seconds(T0) == 1709294400.0
    assert epoch_microseconds(T0 + timedelta(microseconds=1)) == 1709294400_000001


def test_message_states_are_checked():
    assert [check_state(s) for s in MESSAGE_STATES] == ["pending", "done", "failed"]
    with pytest.raises(ValueError):
        check_state("finished")


def test_the_reference_filter_on_its_edges():
    memory = Memory(id="m", user_id="u", agent_id="a", content="c", created_at=T0, updated_at=T0,
                    event_start=T0 - timedelta(days=3), event_end=T0 - timedelta(days=2))
    assert matches(memory, MemoryFilter(types=(), statuses=()))  # empty: no constraint
    assert not matches(memory, MemoryFilter(statuses=(MemoryStatus.EXPIRED,)))
    assert matches(memory, MemoryFilter(time_range=TimeRange(T0, T0 + timedelta(seconds=1))))  # start inclusive
    assert not matches(memory, MemoryFilter(time_range=TimeRange(T0 - timedelta(days=1), T0)))  # end exclusive
    assert matches(memory, MemoryFilter(time_range=TimeRange(T0 - timedelta(days=2), T0 - timedelta(days=1))))
    assert not matches(memory, MemoryFilter(time_range=TimeRange(T0 - timedelta(days=4), T0 - timedelta(days=3))))


def test_the_registry_opens_the_backend_the_settings_name(tmp_path):
    assert set(registry.backend_names()) >= {"sqlite", "postgres", "elasticsearch"}
    store = registry.build_store(StoreSettings(path=tmp_path / "m.db"), embedding_model="e")
    try:
        assert isinstance(store, SQLiteStore) and store.embedding_model == "e"
    finally:
        store.close()


def test_the_registry_refuses_an_unknown_backend_and_names_a_missing_driver(monkeypatch):
    with pytest.raises(ConfigError, match="unknown store backend"):
        registry.build_store(StoreSettings.model_construct(backend="nosuch"))
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "memoryscope_plugins.storage.postgres_store", raising=False)
    with pytest.raises(ConfigError, match=r"memoryscope-plugins\[postgres\]"):
        registry.build_store(StoreSettings(backend="postgres", url="postgresql://x@127.0.0.1:1/none"))


def test_a_registered_backend_is_built_by_name(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    registry.register_backend("mine", lambda cfg, model: SQLiteStore(tmp_path / "mine.db", embedding_model=model))
    store = registry.build_store(StoreSettings.model_construct(backend="mine"), embedding_model="e")
    try:
        assert isinstance(store, SQLiteStore)
    finally:
        store.close()
