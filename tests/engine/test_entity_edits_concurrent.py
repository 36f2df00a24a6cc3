"""The engine's ledger and profile edits under concurrency: each is a read-modify-write, done in one
`edit_ledger` step, so edits made at the same time (threads of one engine, or two engines on one
store file, as several service instances are) all land. Real SQLite store, real threads."""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from memoryscope_plugins import Entity, EntityKind, MemoryScope, person
from memoryscope_plugins.storage.base import LedgerChanges

ALIASES = ["Mel", "Melly", "Lanie", "Mellie", "Lani", "Melo", "Mela", "Mels"]


def _together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in threads released at the same moment; their results in order."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        barrier.wait()
        return call()
    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(run, call) for call in calls]]


def _slow(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    @functools.wraps(function)
    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)  # lets the other threads run between an edit's read and its write
        return function(*args, **kwargs)
    return slow


@pytest.fixture
def engines(engine, tmp_path, local_embedder, monkeypatch):
    """The test's engine and a second engine on the same store file (another instance); the
    person logic an edit computes with between its read and its write is slowed down, so edits
    that were not kept apart would overlap every time."""
    for name, seconds in (("normalise_name", 0.002), ("rename", 0.05), ("merge", 0.05), ("set_by_user", 0.05)):
        monkeypatch.setattr(person, name, _slow(getattr(person, name), seconds))
    other = MemoryScope(path=tmp_path / "memory.db", embedder=local_embedder)
    yield engine, other
    other.close()


def _known(engine: MemoryScope, name: str, kind=EntityKind.PERSON) -> None:
    engine.store.put_ledger(LedgerChanges(user_id="anna", entities=[
        Entity(id=f"anna-{name}", user_id="anna", name=name, kind=kind)]))


def test_concurrent_alias_edits_all_land(engines):
    _known(engines[0], "Melanie")
    _together([lambda i=i, alias=alias: engines[i % 2].add_alias("anna", "Melanie", alias)
               for i, alias in enumerate(ALIASES)])
    assert sorted(engines[0].entity("anna", "Melanie").entity.aliases) == sorted(ALIASES)


def test_concurrent_renames_and_aliases_keep_every_name(engines):
    _known(engines[0], "Melanie")
    calls = [lambda alias=alias: engines[0].add_alias("anna", "anna-Melanie", alias) for alias in ALIASES[:4]]
    calls.append(lambda: engines[1].rename_entity("anna", "anna-Melanie", "Melanie Smith"))
    _together(calls)
    entity = engines[1].entity("anna", "anna-Melanie").entity
    assert entity.name == "Melanie Smith"
    assert sorted(entity.aliases) == sorted([*ALIASES[:4], "Melanie"])


def test_concurrent_profile_values_all_land(engines):
    likes = ["tea", "hiking", "jazz", "pottery", "chess", "rowing"]
    _together([lambda i=i, value=value: engines[i % 2].set_profile("anna", "likes", value, replace=False)
               for i, value in enumerate(likes)])
    assert sorted(v.value for v in engines[0].profile("anna")["likes"]) == sorted(likes)


def test_concurrent_replacements_leave_one_current_value_and_the_rest_as_history(engines):
    homes = ["Leeds", "York", "Porto", "Lisbon", "成都", "Oslo"]
    _together([lambda i=i, home=home: engines[i % 2].set_profile("anna", "home", home)
               for i, home in enumerate(homes)])
    (current,) = engines[0].profile("anna")["home"]
    history = engines[0].profile_history("anna", "home")
    assert sorted(v.value for v in history) == sorted(homes)
    ended = [v for v in history if v.id != current.id]
    assert all(v.valid_to is not None and v.superseded_by for v in ended)
    # each value replaced the one current before it: one chain through every value
    assert sorted(v.superseded_by for v in ended) == sorted(v.id for v in history if v.id != history[0].id)


def test_concurrent_merges_and_deletes_never_leave_a_dangling_mention(engines):
    for name in ("Melanie", "Mel", "Mellie", "Lani"):
        _known(engines[0], name)
    engines[0].record("anna", [{"role": "user", "content": "Melanie, Mel, Mellie and Lani met."}])
    _together([lambda: engines[0].merge_entities("anna", "Melanie", "Mel"),
               lambda: engines[1].merge_entities("anna", "Melanie", "Mellie"),
               lambda: engines[0].merge_entities("anna", "Lani", "Melanie")])
    (left,) = engines[0].entities("anna")
    assert left.name == "Lani" and sorted(left.aliases) == ["Mel", "Melanie", "Mellie"]
    assert {m.entity_id for m in engines[0].store.mentions("anna")} == {left.id}


def test_a_stale_cached_name_never_loses_a_recorded_message(engines):
    """Another instance deletes an entity this engine's name cache still holds: the store refuses
    the stale link, the engine reads the ledger again, and the message is stored."""
    engine, other = engines
    _known(engine, "Melanie")
    _known(engine, "Caroline")
    engine.record("anna", [{"role": "user", "content": "Melanie called"}])  # caches the names
    assert engine.entity("anna", "Melanie").entity.mention_count == 1
    other.delete_entity("anna", "Melanie")
    engine.record("anna", [{"role": "user", "content": "Melanie called again"}])
    assert [m.content for m in engine.list("anna", newest_first=False)] == ["Melanie called", "Melanie called again"]
    assert [e.name for e in engine.entities("anna")] == ["Caroline"]
    # and update / add with a stale cache keep their text too
    memory = engine.add("anna", "Caroline moved", memory_id="m1")
    assert len(engine.entity("anna", "Caroline").memories) == 1
    other.delete_entity("anna", "Caroline")
    assert engine.update("anna", memory.id, content="Caroline moved to Boston").content == "Caroline moved to Boston"
    assert engine.add("anna", "Caroline again", memory_id="m2").id == "m2"
