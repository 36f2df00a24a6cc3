"""Export and import carry the entity ledger and the profile (`transfer`); `delete_all` removes them."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import ValidationError
from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.transfer import derived_id
from memoryscope_plugins.types import Entity, EntityKind, EntityMention, ProfileValue

T0 = datetime(2024, 5, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))


def _anna(engine) -> list[str]:
    """Three turns and an observation of anna, and a ledger and profile resting on them."""
    ids = [engine.add("anna", text, created_at=T0 + timedelta(days=n)).id for n, text in enumerate(
        ["I met Mel in Leeds.", "Mel has a dog called Bo.", "We moved to York."])]
    obs = engine.add("anna", "Anna lives in York.", type="observation").id
    engine.store.put_ledger(LedgerChanges(
        "anna",
        entities=[Entity(id="e-mel", user_id="anna", name="Melanie", kind=EntityKind.PERSON, aliases=["Mel"],
                         metadata={"note": "friend"}),
                  Entity(id="e-bo", user_id="anna", name="Bo", kind=EntityKind.PET)],
        mentions=[EntityMention("e-mel", ids[0], "anna", said_at=T0),
                  EntityMention("e-mel", ids[1], "anna", said_at=T0 + timedelta(days=1)),
                  EntityMention("e-bo", ids[1], "anna", said_at=T0 + timedelta(days=1), event_at=T0),
                  EntityMention("e-mel", obs, "anna", said_at=T0 + timedelta(days=2), counted=False)],
        profile=[ProfileValue("p-old", "anna", "home", "Leeds", valid_from=T0, valid_to=T0 + timedelta(days=2),
                              superseded_by="p-new", source_ids=[ids[0]]),
                 ProfileValue("p-new", "anna", "home", "York", valid_from=T0 + timedelta(days=2),
                              source_ids=[ids[2], obs], set_by="user")]))
    return [*ids, obs]


def _ledger(engine, user):
    entities = {e.name: e for e in engine.store.entities(user)}
    return (entities, engine.store.mentions(user), engine.store.profile_values(user))


def test_export_carries_the_ledger_and_an_import_maps_every_id(engine, tmp_path):
    ids = _anna(engine)
    path = tmp_path / "anna.jsonl"
    assert engine.export("anna", path) == 4  # memories
    records = [json.loads(line).get("record") for line in path.read_text(encoding="utf-8").splitlines()]
    assert records == [None] * 4 + ["entity"] * 2 + ["mention"] * 4 + ["profile"] * 2
    result = engine.import_with_ids("carl", path)
    assert result.imported == 4
    entities, mentions, profile = _ledger(engine, "carl")
    mel = entities["Melanie"]
    assert mel.id == derived_id("carl", "e-mel") and mel.aliases == ["Mel"] and mel.metadata == {"note": "friend"}
    assert (mel.mention_count, mel.first_mentioned_at, mel.last_mentioned_at) == (2, T0, T0 + timedelta(days=1))
    assert entities["Bo"].last_event_at == T0
    carl_memories = {m.id for m in engine.list("carl", limit=10)}
    assert {m.memory_id for m in mentions} == {result.ids[i] for i in ids[:2]} | {result.ids[ids[3]]}
    assert {m.memory_id for m in mentions} <= carl_memories
    old, new = profile
    assert (old.id, old.superseded_by, old.source_ids) == (derived_id("carl", "p-old"), new.id, [result.ids[ids[0]]])
    assert (new.value, new.set_by, new.source_ids) == ("York", "user", [result.ids[ids[2]], result.ids[ids[3]]])
    # a second import stores the same ids: nothing doubles
    engine.import_("carl", path)
    again = _ledger(engine, "carl")
    assert (len(again[0]), len(again[1]), len(again[2])) == (2, 4, 2)
    assert again[0]["Melanie"].mention_count == 2
    # anna's own ledger is untouched
    assert _ledger(engine, "anna")[0]["Melanie"].id == "e-mel"


def test_reimporting_ones_own_export_keeps_the_ids(engine, tmp_path):
    _anna(engine)
    path = tmp_path / "anna.jsonl"
    engine.export("anna", path)
    before = _ledger(engine, "anna")
    engine.import_("anna", path)
    assert _ledger(engine, "anna") == before


def test_an_unknown_entity_travels_with_its_kind(engine, tmp_path):
    """A name record found without a model (kind `unknown`) is exported and imported as unknown, so
    a later consolidation may still type, merge or drop it."""
    memory_id = engine.add("anna", "Dinner at Luigi's with Bo.", created_at=T0).id
    engine.store.put_ledger(LedgerChanges("anna", entities=[
        Entity(id="e-luigi", user_id="anna", name="Luigi", kind=EntityKind.UNKNOWN)],
        mentions=[EntityMention("e-luigi", memory_id, "anna", said_at=T0)]))
    path = tmp_path / "anna.jsonl"
    engine.export("anna", path)
    assert '"kind": "unknown"' in path.read_text(encoding="utf-8")
    engine.import_("carl", path)
    [luigi] = engine.store.entities("carl", kind="unknown")
    assert (luigi.name, luigi.kind, luigi.mention_count) == ("Luigi", EntityKind.UNKNOWN, 1)


def test_an_export_without_ledger_lines_still_imports(engine):
    old = "\n".join(json.dumps({"id": f"a{i}", "user_id": "x", "content": f"old line {i}"}) for i in range(3))
    assert engine.import_("dora", io.StringIO(old + "\n")) == 3
    assert engine.store.entities("dora") == [] and engine.store.profile_values("dora") == []


@pytest.mark.parametrize("bad", [
    {"record": "planet", "id": "x"},
    {"record": "entity", "id": "e1", "name": "Mel", "kind": "wizard"},
    {"record": "entity", "id": "e1", "name": ""},
    {"record": "entity", "id": "e1", "name": "Mel", "colour": "red"},
    {"record": "mention", "entity_id": "e1", "memory_id": "a0"},  # no said_at
    {"record": "profile", "id": "p1", "key": "home", "value": "York", "set_by": "robot"},
])
def test_a_bad_ledger_line_is_refused_with_its_number_and_nothing_is_stored(engine, bad):
    lines = [json.dumps({"id": "a0", "content": "I met Mel."}), json.dumps(bad)]
    with pytest.raises(ValidationError, match="line 2"):
        engine.import_("dora", io.StringIO("\n".join(lines)))
    assert engine.count("dora") == 0 and engine.store.entities("dora") == []


@pytest.mark.parametrize("mention", [
    {"record": "mention", "entity_id": "e1", "memory_id": "elsewhere", "said_at": "2024-05-01T00:00:00+00:00"},
    {"record": "mention", "entity_id": "e-unknown", "memory_id": "a0", "said_at": "2024-05-01T00:00:00+00:00"},
])
def test_a_mention_of_something_neither_in_the_file_nor_the_users_is_refused(engine, mention):
    lines = [json.dumps({"id": "a0", "content": "I met Mel."}),
             json.dumps({"record": "entity", "id": "e1", "name": "Mel", "kind": "person"}), json.dumps(mention)]
    with pytest.raises(ValidationError):
        engine.import_("dora", io.StringIO("\n".join(lines)))
    assert engine.count("dora") == 0 and engine.store.entities("dora") == []


def test_delete_all_removes_the_ledger_and_profile(engine):
    _anna(engine)
    engine.add("bob", "Bob likes tea.")
    engine.store.put_ledger(LedgerChanges("bob", entities=[Entity(id="e-tea", user_id="bob", name="tea")]))
    engine.delete_all("anna")
    assert _ledger(engine, "anna") == ({}, [], [])
    assert [e.name for e in engine.store.entities("bob")] == ["tea"]
