"""The store contract for the entity ledger and the profile: what every backend must do with
`LedgerChanges`, the same way. Collected by `tests/storage/test_store_contract.py` (with
``from tests.support.ledger_contract import *``), whose ``store`` fixture runs it on SQLite,
PostgreSQL and Elasticsearch.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import numpy as np
import pytest

from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.types import Entity, EntityKind, EntityMention, Memory, Message, ProfileValue
from tests.support.store_contract import IST, T0, mem, unit


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def ent(id: str, name: str, user: str = "alice", kind: EntityKind = EntityKind.PERSON, **kw) -> Entity:
    kw.setdefault("created_at", T0)
    kw.setdefault("updated_at", T0)
    return Entity(id=id, user_id=user, name=name, kind=kind, **kw)


def men(entity: str, memory: str, said: datetime, user: str = "alice", **kw) -> EntityMention:
    return EntityMention(entity_id=entity, memory_id=memory, user_id=user, said_at=said, **kw)


def prof(id: str, key: str, value: str, user: str = "alice", **kw) -> ProfileValue:
    kw.setdefault("created_at", T0)
    kw.setdefault("updated_at", T0)
    return ProfileValue(id=id, user_id=user, key=key, value=value, **kw)


def seeded(store, user: str = "alice", n: int = 4) -> list[str]:
    """`n` memories of `user` (ids <user>-m0 ...) and two entities, e-mel (person) and e-leeds (place)."""
    ids = [f"{user}-m{i}" for i in range(n)]
    store.put([mem(i, user=user, content=f"turn {n} about Mel in Leeds") for n, i in enumerate(ids)])
    store.put_ledger(LedgerChanges(user, entities=[ent(f"{user}-e-mel", "Melanie", user, aliases=["Mel"]),
                                                   ent(f"{user}-e-leeds", "Leeds", user, kind=EntityKind.PLACE)]))
    return ids


def by_id(entities) -> dict[str, Entity]:
    return {e.id: e for e in entities}


def test_ledger_items_round_trip_and_upsert_by_id(store):
    seeded(store)
    entity = ent("e-1", "王磊", aliases=["小王", "Wang Lei"], kind=EntityKind.PERSON,
                 created_at=datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=IST), metadata={"note": "同事", "n": [1, 2]})
    value = prof("p-1", "home", "Leeds", valid_from=datetime(2024, 2, 1, tzinfo=IST),
                 source_ids=["alice-m0", "alice-m1"], set_by="user")
    store.put_ledger(LedgerChanges("alice", entities=[entity], profile=[value]))
    (got,) = store.entities("alice", ids=["e-1"])
    assert (got.name, got.aliases, got.kind, got.metadata) == ("王磊", ["小王", "Wang Lei"], EntityKind.PERSON,
                                                               {"note": "同事", "n": [1, 2]})
    assert got.created_at == entity.created_at and got.created_at.utcoffset() == timedelta(hours=5, minutes=30)
    assert (got.mention_count, got.first_mentioned_at, got.last_mentioned_at) == (0, None, None)
    (stored,) = store.profile_values("alice", key="home")
    assert stored == value
    store.put_ledger(LedgerChanges("alice", entities=[ent("e-1", "Wang Lei", aliases=["王磊"])],
                                   profile=[prof("p-1", "home", "York")]))
    assert [(e.name, e.aliases) for e in store.entities("alice", ids=["e-1"])] == [("Wang Lei", ["王磊"])]
    assert [v.value for v in store.profile_values("alice", key="home")] == ["York"]
    assert sorted(e.id for e in store.entities("alice")) == ["alice-e-leeds", "alice-e-mel", "e-1"]
    assert [e.id for e in store.entities("alice", kind="place")] == ["alice-e-leeds"]
    assert [e.id for e in store.entities("alice", kind=EntityKind.PLACE, ids=["e-1", "alice-e-leeds"])] == [
        "alice-e-leeds"]
    assert store.entities("bob") == [] and store.profile_values("bob") == []


def test_mention_figures_are_computed_from_the_mentions(store):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", mentions=[
        men("alice-e-mel", ids[0], day(3)), men("alice-e-mel", ids[1], day(1).astimezone(IST)),
        men("alice-e-mel", ids[2], day(9), counted=False, event_at=day(20)),  # evidence: not counted
        men("alice-e-mel", ids[3], day(5), event_at=day(2)),
        men("alice-e-leeds", ids[2], day(7), counted=False), men("alice-e-leeds", ids[3], day(4), counted=False),
    ]))
    entities = by_id(store.entities("alice"))
    mel, leeds = entities["alice-e-mel"], entities["alice-e-leeds"]
    assert (mel.mention_count, mel.first_mentioned_at, mel.last_mentioned_at, mel.last_event_at) == (
        3, day(1), day(5), day(20))
    # no counted mention: the times of every mention
    assert (leeds.mention_count, leeds.first_mentioned_at, leeds.last_mentioned_at, leeds.last_event_at) == (
        0, day(4), day(7), None)
    assert by_id(store.entities("alice", ids=["alice-e-mel"]))["alice-e-mel"].mention_count == 3
    # mentions come back as written, times with their offsets, ordered by entity then time
    got = store.mentions("alice", entity_ids=["alice-e-mel"])
    assert [m.memory_id for m in got] == [ids[1], ids[0], ids[3], ids[2]]
    assert got[0].said_at.utcoffset() == timedelta(hours=5, minutes=30)
    assert (got[3].counted, got[3].event_at) == (False, day(20))
    assert {(m.entity_id, m.memory_id) for m in store.mentions("alice", memory_ids=[ids[2]])} == {
        ("alice-e-mel", ids[2]), ("alice-e-leeds", ids[2])}


def test_a_mention_is_unique_on_entity_and_memory(store):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", ids[0], day(1))]))
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", ids[0], day(2), counted=False)]))
    (only,) = store.mentions("alice")
    assert (only.said_at, only.counted) == (day(2), False)
    assert by_id(store.entities("alice"))["alice-e-mel"].mention_count == 0


def test_a_merge_removes_one_entity_and_moves_its_mentions_in_one_call(store):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", entities=[ent("e-mel2", "Mel")], mentions=[
        men("alice-e-mel", ids[0], day(1)), men("e-mel2", ids[1], day(2)), men("e-mel2", ids[2], day(3))]))
    store.put_ledger(LedgerChanges(
        "alice", entities=[ent("alice-e-mel", "Melanie", aliases=["Mel", "Mel B"])], removed_entities=["e-mel2"],
        mentions=[men("alice-e-mel", ids[1], day(2)), men("alice-e-mel", ids[2], day(3))]))
    entities = by_id(store.entities("alice"))
    assert "e-mel2" not in entities and entities["alice-e-mel"].aliases == ["Mel", "Mel B"]
    assert entities["alice-e-mel"].mention_count == 3
    assert store.mentions("alice", entity_ids=["e-mel2"]) == []
    assert len(store.get("alice", ids)) == 4  # never the memories


def test_an_unknown_entity_is_kept_found_by_its_kind_typed_and_dropped(store):
    """`unknown` (a name record found without a model) is a kind like the others on every backend:
    stored, filtered on, replaced by a kind later, or removed with its mentions."""
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", entities=[ent("e-sea", "Seattle", kind=EntityKind.UNKNOWN),
                                                      ent("e-yoga", "Yoga", kind=EntityKind.UNKNOWN)],
                                   mentions=[men("e-sea", ids[0], day(1)), men("e-yoga", ids[1], day(2))]))
    assert sorted(e.id for e in store.entities("alice", kind="unknown")) == ["e-sea", "e-yoga"]
    assert store.entities("alice", ids=["e-sea"])[0].kind is EntityKind.UNKNOWN
    store.put_ledger(LedgerChanges("alice", entities=[ent("e-sea", "Seattle", kind=EntityKind.PLACE)],
                                   removed_entities=["e-yoga"]))
    assert [e.id for e in store.entities("alice", kind=EntityKind.UNKNOWN)] == []
    assert [(e.id, e.mention_count) for e in store.entities("alice", kind="place")] == [
        ("alice-e-leeds", 0), ("e-sea", 1)]
    assert store.mentions("alice", entity_ids=["e-yoga"]) == [] and len(store.get("alice", ids)) == 4


def test_deleting_memories_removes_their_mentions_only(store):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", i, day(n)) for n, i in enumerate(ids)],
                                   profile=[prof("p-1", "home", "Leeds", source_ids=[ids[0]])]))
    assert store.delete("alice", [ids[0], ids[1]]) == 2
    assert [m.memory_id for m in store.mentions("alice")] == ids[2:]
    mel = by_id(store.entities("alice"))["alice-e-mel"]
    assert (mel.mention_count, mel.first_mentioned_at) == (2, day(2))
    assert [v.id for v in store.profile_values("alice")] == ["p-1"]


def test_relinking_a_memory_replaces_its_mentions_and_no_others(store):
    ids = seeded(store)
    bob = seeded(store, "bob")
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", ids[0], day(1)),
                                                      men("alice-e-leeds", ids[0], day(1)),
                                                      men("alice-e-mel", ids[1], day(2))]))
    store.put_ledger(LedgerChanges("bob", mentions=[men("bob-e-mel", bob[0], day(1), user="bob")]))
    # the memory's text changed: it names Leeds only now (written again with a new time)
    changed = mem(ids[0], content="now only Leeds", created_at=day(6))
    store.commit_consolidation([changed], None, (), ledger=LedgerChanges(
        "alice", mentions=[men("alice-e-leeds", ids[0], day(6))], relinked_memories=[ids[0], bob[0]]))
    assert [(m.entity_id, m.said_at) for m in store.mentions("alice", memory_ids=[ids[0]])] == [
        ("alice-e-leeds", day(6))]
    assert [m.memory_id for m in store.mentions("alice", entity_ids=["alice-e-mel"])] == [ids[1]]
    assert by_id(store.entities("alice"))["alice-e-mel"].mention_count == 1
    assert [m.memory_id for m in store.mentions("bob")] == [bob[0]]  # another user's memory id: untouched
    # relinked with no mentions: the memory names nothing known any more
    store.put_ledger(LedgerChanges("alice", relinked_memories=[ids[0]]))
    assert store.mentions("alice", memory_ids=[ids[0]]) == []
    assert [m.memory_id for m in store.mentions("alice")] == [ids[1]]
    assert store.get("alice", [ids[0]])[0].content == "now only Leeds"


def test_delete_user_removes_the_ledger_and_profile_of_that_user_only(store):
    for user in ("alice", "bob"):
        ids = seeded(store, user)
        store.put_ledger(LedgerChanges(user, mentions=[men(f"{user}-e-mel", ids[0], day(1), user=user)],
                                       profile=[prof(f"{user}-p", "home", "Leeds", user=user)]))
    store.delete_user("alice")
    assert (store.entities("alice"), store.mentions("alice"), store.profile_values("alice")) == ([], [], [])
    assert len(store.entities("bob")) == 2 and len(store.mentions("bob")) == 1 and len(store.profile_values("bob")) == 1


def test_rename_user_moves_the_ledger_and_profile(store):
    ids = seeded(store, "old")
    store.put_ledger(LedgerChanges("old", mentions=[men("old-e-mel", ids[0], day(1), user="old")],
                                   profile=[prof("old-p", "home", "Leeds", user="old")]))
    store.rename_user("old", "new")
    assert (store.entities("old"), store.mentions("old"), store.profile_values("old")) == ([], [], [])
    assert by_id(store.entities("new"))["old-e-mel"].mention_count == 1
    assert [m.user_id for m in store.mentions("new")] == ["new"]
    assert [v.user_id for v in store.profile_values("new")] == ["new"]
    # the ledger counts as data of the new id: no rename onto a user who has only a profile
    store.put_ledger(LedgerChanges("carol", profile=[prof("carol-p", "home", "Paris", user="carol")]))
    with pytest.raises(ValueError):
        store.rename_user("new", "carol")
    assert len(store.entities("new")) == 2


def _nothing_changed(store) -> None:
    assert sorted(e.id for e in store.entities("alice")) == ["alice-e-leeds", "alice-e-mel"]
    assert sorted(e.id for e in store.entities("bob")) == ["bob-e-leeds", "bob-e-mel"]
    assert store.mentions("alice") == [] and store.profile_values("alice") == []
    assert by_id(store.entities("bob"))["bob-e-mel"].name == "Melanie"


@pytest.mark.parametrize("case", ["item_of_another_user", "entity_id_of_another_user", "profile_id_of_another_user",
                                  "mention_of_another_users_memory", "mention_of_another_users_entity",
                                  "mention_of_an_unknown_memory", "mention_of_a_removed_entity"])
def test_cross_user_and_unknown_references_are_refused_and_nothing_is_written(store, case):
    seeded(store, "alice")
    bob_ids = seeded(store, "bob")
    store.put_ledger(LedgerChanges("bob", profile=[prof("bob-p", "home", "Oslo", user="bob")]))
    good = [ent("e-new", "Caroline"), ent("alice-e-mel", "Mel")]
    changes = {
        "item_of_another_user": LedgerChanges("alice", entities=[*good, ent("e-x", "X", user="bob")]),
        "entity_id_of_another_user": LedgerChanges("alice", entities=[*good, ent("bob-e-mel", "Mallory")]),
        "profile_id_of_another_user": LedgerChanges("alice", entities=good, profile=[prof("bob-p", "home", "Rome")]),
        "mention_of_another_users_memory": LedgerChanges("alice", entities=good,
                                                         mentions=[men("alice-e-mel", bob_ids[0], day(1))]),
        "mention_of_another_users_entity": LedgerChanges("alice", entities=good,
                                                         mentions=[men("bob-e-mel", "alice-m0", day(1))]),
        "mention_of_an_unknown_memory": LedgerChanges("alice", entities=good,
                                                      mentions=[men("alice-e-mel", "nope", day(1))]),
        "mention_of_a_removed_entity": LedgerChanges("alice", entities=good, removed_entities=["alice-e-leeds"],
                                                     mentions=[men("alice-e-leeds", "alice-m0", day(1))]),
    }[case]
    with pytest.raises(ValueError):
        store.put_ledger(changes)
    _nothing_changed(store)
    assert [v.value for v in store.profile_values("bob")] == ["Oslo"]


def test_a_refused_ledger_leaves_the_memories_and_messages_of_that_call_unwritten(store):
    seeded(store, "alice")
    bob_ids = seeded(store, "bob")
    bad = LedgerChanges("alice", entities=[ent("e-new", "Caroline")],
                        mentions=[men("e-new", "t1", day(1)), men("e-new", bob_ids[0], day(1))])
    msg_ids = store.append_messages("alice", "agent", [Message(role="user", content="hi", timestamp=T0)])
    with pytest.raises(ValueError):
        store.commit_consolidation([mem("t1"), mem("o1")], np.stack([unit(1), unit(2)]), msg_ids, ledger=bad)
    assert store.get("alice", ["t1", "o1"]) == []
    assert [m.id for m in store.pending_messages("alice")] == msg_ids
    with pytest.raises(ValueError):
        store.append_messages("alice", "agent", [Message(role="user", content="Caroline", timestamp=T0)],
                              memories=[mem("t1")], message_ids=["t1"], ledger=bad)
    assert store.get("alice", ["t1"]) == [] and len(store.pending_messages("alice")) == 1
    _nothing_changed(store)


def test_the_ledger_is_written_with_the_memories_of_the_same_call(store):
    seeded(store)
    ledger = LedgerChanges("alice", entities=[ent("e-car", "Caroline")],
                           mentions=[men("e-car", "t1", day(1)), men("e-car", "o1", day(1), counted=False)],
                           profile=[prof("p-1", "friends", "Caroline", source_ids=["o1"])])
    store.append_messages("alice", "agent", [Message(role="user", content="I met Caroline", timestamp=day(1))],
                          memories=[mem("t1", content="I met Caroline")], message_ids=["t1"],
                          ledger=LedgerChanges("alice", mentions=[men("alice-e-mel", "t1", day(1))]))
    store.commit_consolidation([mem("o1", content="The user met Caroline")], None, ["t1"], ledger=ledger)
    assert by_id(store.entities("alice"))["e-car"].mention_count == 1
    assert {m.memory_id for m in store.mentions("alice", entity_ids=["e-car"])} == {"t1", "o1"}
    assert [m.entity_id for m in store.mentions("alice", memory_ids=["t1"])] == ["alice-e-mel", "e-car"]
    assert store.pending_messages("alice") == []


def test_profile_history_and_current_values(store):
    seeded(store)
    old = prof("p-1", "home", "Leeds", valid_from=day(1), valid_to=day(5), superseded_by="p-2")
    new = prof("p-2", "home", "York", valid_from=day(5))
    pets = [prof("p-3", "pets", "a cat named Tom"), prof("p-4", "pets", "a dog", valid_from=day(2))]
    store.put_ledger(LedgerChanges("alice", profile=[new, *pets, old]))
    assert [v.id for v in store.profile_values("alice")] == ["p-1", "p-2", "p-3", "p-4"]
    assert [v.id for v in store.profile_values("alice", current_only=True)] == ["p-2", "p-3", "p-4"]
    assert [v.value for v in store.profile_values("alice", key="home", current_only=True)] == ["York"]
    assert store.profile_values("alice", key="home")[0] == old


def test_an_empty_ledger_change_writes_nothing_and_needs_no_memories(store):
    store.put_ledger(LedgerChanges("alice"))
    store.commit_consolidation([mem("m1")], None, (), ledger=LedgerChanges("alice"))
    assert [m.id for m in store.get("alice", ["m1"])] == ["m1"]
    assert store.entities("alice") == []
    with pytest.raises(ValueError):
        store.put_ledger(LedgerChanges("alice", entities=[ent("e-1", "")]))


def test_memories_survive_with_their_ledger_through_a_second_store_object(store, store_factory):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", ids[0], day(1))]))
    other = store_factory("model-a")
    assert by_id(other.entities("alice"))["alice-e-mel"].mention_count == 1
    memory: Memory = other.get("alice", [ids[0]])[0]
    assert memory.content.startswith("turn 0")


def _add_alias(store, alias: str, started: threading.Barrier):
    def edit(ledger):
        (mel,) = ledger.entities("alice", ids=["alice-e-mel"])
        time.sleep(0.02)  # the other edits run meanwhile: each must wait for, or redo after, this one
        return LedgerChanges("alice", entities=[dataclasses.replace(mel, aliases=[*mel.aliases, alias])])
    started.wait()
    return store.edit_ledger("alice", edit)


def test_concurrent_edits_of_one_user_lose_nothing(store):
    seeded(store)
    aliases = [f"Mel {n}" for n in range(6)]
    started = threading.Barrier(len(aliases))
    with ThreadPoolExecutor(len(aliases)) as pool:
        written = list(pool.map(lambda alias: _add_alias(store, alias, started), aliases))
    (mel,) = store.entities("alice", ids=["alice-e-mel"])
    assert sorted(mel.aliases) == sorted(["Mel", *aliases])
    assert all(isinstance(changes, LedgerChanges) for changes in written)


def test_an_edit_reads_the_ledger_and_writes_what_it_returns_or_nothing(store):
    ids = seeded(store)
    store.put_ledger(LedgerChanges("alice", mentions=[men("alice-e-mel", ids[0], day(1))]))

    def merge(ledger):
        moved = [dataclasses.replace(m, entity_id="alice-e-leeds") for m in ledger.mentions("alice")]
        return LedgerChanges("alice", removed_entities=["alice-e-mel"], mentions=moved,
                             profile=[prof("p-1", "home", "Leeds")])
    assert store.edit_ledger("alice", lambda ledger: None) is None
    written = store.edit_ledger("alice", merge)
    assert [e.id for e in written.entities] == [] and written.removed_entities == ["alice-e-mel"]
    assert [e.id for e in store.entities("alice")] == ["alice-e-leeds"]
    assert by_id(store.entities("alice"))["alice-e-leeds"].mention_count == 1
    assert [v.value for v in store.profile_values("alice", current_only=True)] == ["Leeds"]

    def failing(ledger):
        assert ledger.profile_values("alice", key="home")
        raise KeyError("the edit failed")
    with pytest.raises(KeyError):
        store.edit_ledger("alice", failing)
    with pytest.raises(ValueError):  # changes of another user
        store.edit_ledger("alice", lambda ledger: LedgerChanges("bob", entities=[ent("e-b", "Bob", "bob")]))
    with pytest.raises(ValueError):  # a mention of an unknown memory: nothing of the edit is written
        store.edit_ledger("alice", lambda ledger: LedgerChanges(
            "alice", entities=[ent("e-new", "New")], mentions=[men("e-new", "no-such-memory", day(1))]))
    assert [e.id for e in store.entities("alice")] == ["alice-e-leeds"] and store.entities("bob") == []
    # a later edit is not held up by the ones that failed
    store.edit_ledger("alice", lambda ledger: LedgerChanges("alice", entities=[ent("e-new", "New")]))
    assert sorted(e.id for e in store.entities("alice")) == ["alice-e-leeds", "e-new"]
