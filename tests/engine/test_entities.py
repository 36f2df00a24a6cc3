"""The entity ledger through the engine: counting at record time (English and Chinese), named speakers,
the edits (rename, alias, merge, delete) that never touch a memory, ranking, details, isolation, twins.
Real SQLite store and the real local embedder."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import (
    Entity,
    EntityDetails,
    EntityKind,
    MemoryScope,
    MemoryType,
    NotFoundError,
    ValidationError,
    engine as engine_module,
)
from memoryscope_plugins.person import NameMatcher, record_names
from memoryscope_plugins.storage.base import LedgerChanges

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)


def _known(engine: MemoryScope, user: str, name: str, kind=EntityKind.PERSON, aliases=(), entity_id=None) -> Entity:
    """An entity as consolidation would have written it."""
    entity = Entity(id=entity_id or f"{user}-{name}", user_id=user, name=name, kind=kind, aliases=list(aliases))
    engine.store.put_ledger(LedgerChanges(user_id=user, entities=[entity]))
    return entity


def _say(engine: MemoryScope, user: str, *texts: str, start=T0, **kwargs) -> list[str]:
    return engine.record(user, [{"role": "user", "content": text, "timestamp": start + timedelta(minutes=i)}
                                for i, text in enumerate(texts)], **kwargs)


def _by_name(engine: MemoryScope, user: str) -> dict[str, Entity]:
    return {entity.name: entity for entity in engine.entities(user, limit=1000)}


def test_record_counts_known_names_and_aliases_the_moment_they_are_said(engine):
    _known(engine, "anna", "Melanie", aliases=["Mel"])
    _known(engine, "anna", "pottery", kind=EntityKind.TOPIC)
    ids = _say(engine, "anna", "I saw Mel's kids at the park.", "Melody is a song, not a person.",
               "Melanie took up Pottery last week.", "Nothing here.")
    counts = {name: entity.mention_count for name, entity in _by_name(engine, "anna").items()}
    assert counts == {"Melanie": 2, "pottery": 1}
    linked = {m.memory_id for m in engine.store.mentions("anna", entity_ids=["anna-Melanie"])}
    assert linked == {ids[0], ids[2]}
    assert _by_name(engine, "anna")["Melanie"].last_mentioned_at == T0 + timedelta(minutes=2)


def test_capitalised_names_do_not_match_common_words(engine):
    _known(engine, "anna", "Will")
    _say(engine, "anna", "I will call you tomorrow.", "Will called me.")
    assert _by_name(engine, "anna")["Will"].mention_count == 1


def test_record_counts_chinese_names_and_aliases(engine):
    _known(engine, "lei", "王磊", aliases=["小王"])
    _known(engine, "lei", "成都", kind=EntityKind.PLACE)
    ids = _say(engine, "lei", "今天和小王在成都吃火锅。", "王磊升职了！", "我们明天见。")
    entities = _by_name(engine, "lei")
    assert entities["王磊"].mention_count == 2
    assert entities["成都"].mention_count == 1
    assert {m.memory_id for m in engine.store.mentions("lei", entity_ids=["lei-王磊"])} == set(ids[:2])


def test_a_chinese_full_name_is_counted_and_found_by_its_given_name(engine):
    engine.record("lxw", [
        {"role": "user", "name": "林晓雯", "content": "今天又改稿到十点。", "timestamp": T0},
        {"role": "assistant", "content": "晓雯辛苦了，早点休息。", "timestamp": T0 + timedelta(minutes=1)}])
    [user] = engine.entities("lxw")
    assert (user.name, user.mention_count) == ("林晓雯", 1)
    assert engine.entity("lxw", "晓雯").entity.id == user.id
    with pytest.raises(NotFoundError):
        engine.delete_entity("lxw", "晓雯")  # an edit takes a name the entity holds
    with pytest.raises(NotFoundError):
        engine.entity("lxw", "小雯")


def test_a_named_user_becomes_a_person_once_and_is_counted_when_named(engine):
    engine.record("caro", [
        {"role": "user", "name": "Caroline", "content": "Hi!", "timestamp": T0},
        {"role": "user", "name": "Caroline", "content": "Me again.", "timestamp": T0 + timedelta(minutes=1)},
        {"role": "assistant", "content": "Hello Caroline, welcome back.", "timestamp": T0 + timedelta(minutes=2)},
    ])
    entities = engine.entities("caro")
    assert [(e.name, e.kind, e.metadata.get("speaker_role")) for e in entities] == [
        ("Caroline", EntityKind.PERSON, "user")]
    assert entities[0].mention_count == 1  # named by the assistant in the same call; her own turns do not name her
    engine.record("caro", [{"role": "user", "name": "caroline", "content": "Still me."}])
    assert len(engine.entities("caro")) == 1  # the same name, another case: known already


def test_a_speaker_naming_themself_does_not_mention_themself(engine):
    """docs/entities.md: a speaker's own messages are not mentions of them, even when they say their name."""
    lines = [("user", "Tiago", "Hello Anna, it's Tiago."), ("assistant", "Caroline", "Hi, I'm Caroline"),
             ("user", "Tiago", "Nice to meet you, Caroline!")]
    engine.record("anna", [{"role": role, "name": name, "content": text, "timestamp": T0 + timedelta(minutes=i)}
                           for i, (role, name, text) in enumerate(lines)])
    people = _by_name(engine, "anna")
    assert (people["Tiago"].mention_count, people["Caroline"].mention_count) == (0, 1)


def test_record_alone_adds_the_names_a_message_writes_as_unknown_entities(engine):
    """No model: names read from the message (`person.record_names`) become entities at once, kind
    `unknown` unless a rule knows it, and later messages count them."""
    _say(engine, "anna", "We flew to Lisbon with my sister Ruth.", "周末去了成都。", "Lisbon was sunny, Ruth agreed.")
    people = _by_name(engine, "anna")
    assert {name: (e.kind.value, e.mention_count) for name, e in people.items()} == {
        "Lisbon": ("unknown", 2), "Ruth": ("person", 2), "成都": ("place", 1)}
    assert engine.entities("anna", kind="unknown")[0].name == "Lisbon"


def test_an_unknown_entity_named_before_its_speaker_speaks_becomes_that_speaker(engine):
    _talk(engine, "caro", ("Caroline", "I told John about the trip."))
    assert _by_name(engine, "caro")["John"].kind is EntityKind.UNKNOWN
    _talk(engine, "caro", ("John", "Thanks for telling me, Caroline!"), start=T0 + timedelta(minutes=5))
    john = _by_name(engine, "caro")["John"]
    assert (john.kind, john.metadata.get("speaker_role"), john.mention_count) == (EntityKind.PERSON, "assistant", 1)


def test_record_never_writes_over_an_entity_made_meanwhile_elsewhere(engine, tmp_path, local_embedder):
    """A name the engine's cached names do not hold yet, but the store does (another process typed it
    within the cache's few seconds), is linked to the stored entity, which keeps its kind and aliases."""
    _say(engine, "anna", "Nothing named yet.")  # the engine caches anna's (empty) names
    other = MemoryScope(path=tmp_path / "memory.db", embedder=local_embedder)
    try:  # a consolidation worker elsewhere makes Seattle, with the id record would give it
        [made] = record_names.new_entities("anna", [], NameMatcher([]), ["in Seattle"])
        other.store.put_ledger(LedgerChanges(user_id="anna", entities=[
            Entity(id=made.id, user_id="anna", name="Seattle", kind=EntityKind.PLACE, aliases=["Emerald City"])]))
    finally:
        other.close()
    _say(engine, "anna", "We flew to Seattle.", start=T0 + timedelta(minutes=5))
    seattle = _by_name(engine, "anna")["Seattle"]
    assert (seattle.kind, seattle.aliases, seattle.mention_count) == (EntityKind.PLACE, ["Emerald City"], 1)


def test_a_failure_reading_names_never_costs_the_message(engine, monkeypatch, caplog):
    from memoryscope_plugins.person import record_names

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the name rules")

    monkeypatch.setattr(record_names, "new_entities", broken)
    with caplog.at_level("WARNING", logger="memoryscope_plugins"):
        ids = _say(engine, "anna", "We flew to Lisbon.")
    assert [m.content for m in engine.store.get("anna", ids)] == ["We flew to Lisbon."]
    assert engine.entities("anna") == [] and "no new names were read" in caplog.text
    assert "Lisbon" not in caplog.text and "a bug in the name rules" not in caplog.text  # no content in the log


def test_a_speakers_name_is_kept_as_given_even_when_it_opens_with_a_relation(engine):
    """A model's 表妹小林 is 小林 (`consolidation.ledger_answer`); a speaker's name is given, not read."""
    engine.record("xl", [{"role": "user", "name": "表妹小林", "content": "你好！"},
                         {"role": "assistant", "name": "my sister Ruth", "content": "Hi!"}])
    assert sorted(e.name for e in engine.entities("xl")) == ["my sister Ruth", "表妹小林"]


def test_named_assistant_speakers_are_people_unless_they_are_agents(engine):
    engine.record("team", [{"role": "assistant", "name": "planner", "content": "Plan ready."}], agent_id="planner")
    engine.record("team", [
        {"role": "user", "name": "Caroline", "content": "Hi Melanie!"},
        {"role": "assistant", "name": "Melanie", "content": "Hi Caroline!"},  # LoCoMo's second speaker
        {"role": "assistant", "name": "coder", "content": "Code written."},  # this call's agent
        {"role": "assistant", "name": "planner", "content": "Next step."},  # an agent of this store
        {"role": "system", "name": "Rules", "content": "Be brief."},
        {"role": "tool", "name": "Search", "content": "No results."},
    ], agent_id="coder")
    roles = {e.name: e.metadata.get("speaker_role") for e in engine.entities("team")}
    assert roles == {"Caroline": "user", "Melanie": "assistant"}


def _talk(engine: MemoryScope, user: str, *lines: tuple[str, str], start=T0) -> list[str]:
    """Record LoCoMo-style lines: Caroline is the user, anyone else the assistant, each named."""
    return engine.record(user, [{"role": "user" if name == "Caroline" else "assistant", "name": name,
                                 "content": text, "timestamp": start + timedelta(minutes=i)}
                                for i, (name, text) in enumerate(lines)])


def test_a_short_form_a_speaker_is_addressed_by_is_their_alias_at_once(engine):
    """No model: "Hey Mel!" to Melanie makes Mel her alias, in the call that names her first and in
    later ones, and those turns count for her."""
    _talk(engine, "caro", ("Melanie", "Hi there!"), ("Caroline", "Hey Mel! How was the class?"))
    melanie = _by_name(engine, "caro")["Melanie"]
    assert melanie.aliases == ["Mel"] and melanie.mention_count == 1
    _talk(engine, "caro", ("Caroline", "Nice one, Mel!"), ("Melanie", "Thanks, Caro!"), start=T0 + timedelta(days=1))
    people = _by_name(engine, "caro")
    assert {name: (e.aliases, e.mention_count) for name, e in people.items()} == {
        "Melanie": (["Mel"], 2), "Caroline": (["Caro"], 1)}
    assert engine.entity("caro", "mel").entity.name == "Melanie"


def test_a_chinese_title_a_speaker_is_addressed_by_is_their_alias_at_once(engine):
    """No model: 陈老师好！ to 陈志强 makes 陈老师 his alias, and later lines that name him so count for him."""
    engine.record("chen", [
        {"role": "user", "name": "陈志强", "content": "小智，在不在？叫我老陈就行，陈志强。", "timestamp": T0},
        {"role": "assistant", "name": "小智", "content": "陈老师好！教了二十年物理了吧？",
         "timestamp": T0 + timedelta(minutes=1)}])
    assert _by_name(engine, "chen")["陈志强"].aliases == ["陈老师"]
    engine.record("chen", [{"role": "assistant", "name": "小智", "content": "哇！陈老师还有这个才华。",
                            "timestamp": T0 + timedelta(days=1)}])
    people = _by_name(engine, "chen")
    # his own 叫我老陈就行，陈志强 does not mention him; the two 陈老师 lines do
    assert {name: e.mention_count for name, e in people.items()} == {"陈志强": 2, "小智": 1}
    assert engine.entity("chen", "陈老师").entity.name == "陈志强"


def test_a_greeting_said_before_the_speaker_first_speaks_counts_for_them(engine):
    """LoCoMo opens with "Hey Mel!" one turn before Melanie speaks (and "Hey John!" before John): the
    turn just before a new speaker's first words is linked to them when it names them."""
    for user, greeting, name in (("caro", "Hey Mel! Good to see you!", "Melanie"), ("maria", "Hey John!", "John")):
        _talk(engine, user, ("Caroline", greeting))
        _talk(engine, user, (name, "Hi! Good to see you too."), start=T0 + timedelta(minutes=5))
        found = _by_name(engine, user)[name]
        assert found.mention_count == 1 and found.first_mentioned_at == T0
    assert _by_name(engine, "caro")["Melanie"].aliases == ["Mel"]


def test_a_turn_before_deleted_meanwhile_never_costs_the_message(engine, monkeypatch):
    _talk(engine, "caro", ("Caroline", "Hey Mel!"))
    gone = engine.list("caro", types=["turn"])[0]
    engine.store.delete("caro", [gone.id])
    monkeypatch.setattr(engine, "_previous_turn", lambda *args: gone)  # read just before it was deleted
    ids = _talk(engine, "caro", ("Melanie", "Hi!"), start=T0 + timedelta(minutes=5))
    assert [m.content for m in engine.store.get("caro", ids)] == ["Hi!"]
    assert _by_name(engine, "caro")["Melanie"].mention_count == 0


def test_a_store_that_refuses_the_alias_still_keeps_the_message(engine, monkeypatch, caplog):
    _talk(engine, "caro", ("Melanie", "Hi there!"))

    def refuse(*args, **kwargs):
        raise engine_module.StoreError("locked")
    monkeypatch.setattr(engine.store, "edit_ledger", refuse)
    with caplog.at_level("WARNING", logger="memoryscope_plugins"):
        ids = _talk(engine, "caro", ("Caroline", "Hey Mel!"), start=T0 + timedelta(minutes=1))
    assert [m.content for m in engine.store.get("caro", ids)] == ["Hey Mel!"]
    assert "short form was not added" in caplog.text and "Hey Mel" not in caplog.text and "caro " not in caplog.text
    monkeypatch.undo()
    _talk(engine, "caro", ("Caroline", "Thanks, Mel!"), start=T0 + timedelta(minutes=2))
    assert _by_name(engine, "caro")["Melanie"].aliases == ["Mel"]


@pytest.mark.parametrize("lines", [
    [("Melanie", "Hi."), ("Caroline", "My friend Mel runs a shop.")],  # named, not addressed
    [("Melanie", "Hi."), ("Melissa", "Hello."), ("Caroline", "Hey Mel!")],  # two speakers it could be
    [("Melanie", "Hey Mel!")],  # a speaker does not address herself
    [("Melanie", "Hi."), ("Caroline", "Hey Me!")],  # too short
])
def test_a_short_form_without_one_clear_speaker_is_no_alias(engine, lines):
    _talk(engine, "caro", *lines)
    assert all(e.aliases == [] for e in engine.entities("caro"))


def test_a_short_form_the_ledger_knows_stays_that_entity(engine):
    _known(engine, "caro", "Mel")  # another person the user calls Mel
    _talk(engine, "caro", ("Melanie", "Hi."), ("Caroline", "Hey Mel!"))
    people = _by_name(engine, "caro")
    assert people["Melanie"].aliases == [] and people["Mel"].mention_count == 1


def test_add_links_the_memory_in_the_same_write(engine):
    _known(engine, "anna", "Porto", kind=EntityKind.PLACE)
    memory = engine.add("anna", "Anna's sister lives in Porto.", type="observation")
    mentions = engine.store.mentions("anna", memory_ids=[memory.id])
    assert [(m.entity_id, m.counted) for m in mentions] == [("anna-Porto", False)]  # evidence, not a mention
    custom = engine.add("anna", "Porto trip booked for June.")
    assert [m.counted for m in engine.store.mentions("anna", memory_ids=[custom.id])] == [True]
    assert _by_name(engine, "anna")["Porto"].mention_count == 1


def test_rename_keeps_the_old_name_as_an_alias_and_counting_goes_on(engine):
    _known(engine, "anna", "Mel")
    _say(engine, "anna", "Mel called.")
    renamed = engine.rename_entity("anna", "mel", "Melanie")
    assert (renamed.name, renamed.aliases, renamed.mention_count) == ("Melanie", ["Mel"], 1)
    _say(engine, "anna", "Mel and Melanie are the same person.", start=T0 + timedelta(days=1))
    assert _by_name(engine, "anna")["Melanie"].mention_count == 2
    _known(engine, "anna", "Boston", kind=EntityKind.PLACE)
    with pytest.raises(ValidationError, match="merge"):
        engine.rename_entity("anna", "Melanie", "boston")
    with pytest.raises(ValidationError):
        engine.rename_entity("anna", "Melanie", "I")  # not a name


def test_add_alias_counts_the_new_name_at_once(engine):
    _known(engine, "lei", "王磊")
    _say(engine, "lei", "小王来了。")
    assert _by_name(engine, "lei")["王磊"].mention_count == 0
    entity = engine.add_alias("lei", "王磊", "小王")
    assert entity.aliases == ["小王"]
    assert engine.add_alias("lei", "王磊", "小王").aliases == ["小王"]  # again: nothing changes
    _say(engine, "lei", "小王又来了。", start=T0 + timedelta(hours=1))
    assert _by_name(engine, "lei")["王磊"].mention_count == 1  # the engine's matcher saw its own write
    _known(engine, "lei", "李娜")
    with pytest.raises(ValidationError):
        engine.add_alias("lei", "王磊", "李娜")
    with pytest.raises(ValidationError):
        engine.add_alias("lei", "王磊", "我们")


def test_merge_moves_mentions_and_keeps_every_memory(engine):
    _known(engine, "anna", "Melanie")
    _known(engine, "anna", "Mel")
    _say(engine, "anna", "Melanie called.", "Mel wrote back.", "Melanie and Mel, one person.")
    before = engine.count("anna")
    merged = engine.merge_entities("anna", "Melanie", "Mel")
    assert (merged.name, merged.aliases, merged.mention_count) == ("Melanie", ["Mel"], 3)
    assert [e.name for e in engine.entities("anna")] == ["Melanie"]
    assert engine.count("anna") == before
    with pytest.raises(ValidationError):
        engine.merge_entities("anna", "Melanie", "mel")  # now one entity
    with pytest.raises(NotFoundError):
        engine.merge_entities("anna", "Melanie", "Nobody")


def test_delete_entity_removes_links_never_memories(engine):
    _known(engine, "anna", "Porto", kind=EntityKind.PLACE)
    _say(engine, "anna", "Porto is lovely.", "Back from Porto.")
    assert engine.delete_entity("anna", "porto") == 2
    assert engine.entities("anna") == []
    assert engine.count("anna") == 2
    assert engine.store.mentions("anna") == []
    with pytest.raises(NotFoundError):
        engine.delete_entity("anna", "Porto")


def test_entities_order_kind_and_limit(engine):
    _known(engine, "anna", "Boston", kind=EntityKind.PLACE)
    _known(engine, "anna", "Mel")
    _known(engine, "anna", "Rex", kind="pet")
    _say(engine, "anna", "Boston trip.", "Boston again.", "Boston, third time.", start=T0)
    _say(engine, "anna", "Mel says hi.", start=T0 + timedelta(days=60))
    now = T0 + timedelta(days=61)
    assert [e.name for e in engine.entities("anna", order="frequency", now=now)][:2] == ["Boston", "Mel"]
    assert [e.name for e in engine.entities("anna", order="recency", now=now)][:2] == ["Mel", "Boston"]
    assert [e.name for e in engine.entities("anna", kind="place")] == ["Boston"]
    assert [e.name for e in engine.entities("anna", kind=EntityKind.PET)] == ["Rex"]
    assert len(engine.entities("anna", limit=1)) == 1
    assert engine.entities("nobody") == []


def test_entity_details_timeline_memories_and_profile(engine):
    engine.record("caro", [{"role": "user", "name": "Caroline", "content": "Hi.", "timestamp": T0}])
    _known(engine, "caro", "Melanie", aliases=["Mel"])
    turns = _say(engine, "caro", "Mel painted a lake.", start=T0)
    _say(engine, "caro", "Melanie ran a charity race.", start=T0 + timedelta(days=40))
    observation = engine.add("caro", "Melanie likes painting.", type="observation", created_at=T0)
    gone = engine.add("caro", "Melanie lives in Ohio.", type="observation", created_at=T0)
    engine.update("caro", gone.id, status="expired")
    details = engine.entity("caro", "mel", limit=10)
    assert isinstance(details, EntityDetails)
    assert details.entity.name == "Melanie"
    assert [count for _, count in details.timeline] == [1, 1]
    assert details.timeline[0][0] == datetime(2026, 5, 1, tzinfo=timezone.utc)
    assert [m.id for m in details.memories][0] == observation.id  # observations first
    assert gone.id not in [m.id for m in details.memories]
    assert details.memories[-1].id == turns[0]  # then turns, newest first
    assert details.profile == []  # Melanie is not the user
    assert len(engine.entity("caro", "Melanie", limit=1).memories) == 1
    assert [c for _, c in engine.entity("caro", "Melanie", bucket="week").timeline] == [1, 1]
    engine.set_profile("caro", "home", "Ohio")
    user = engine.entity("caro", "Caroline")
    assert [(v.key, v.value) for v in user.profile] == [("home", "Ohio")]
    assert engine.entity("caro", details.entity.id).entity.name == "Melanie"  # by id too


def test_unknown_users_and_entities(engine):
    with pytest.raises(NotFoundError):
        engine.entity("nobody", "Mel")
    with pytest.raises(NotFoundError):
        engine.rename_entity("nobody", "Mel", "Melanie")
    with pytest.raises(NotFoundError):
        engine.add_alias("nobody", "Mel", "Melly")
    with pytest.raises(NotFoundError):
        engine.delete_entity("nobody", "Mel")


@pytest.mark.parametrize("call", [
    lambda e: e.entities("anna", kind="alien"),
    lambda e: e.entities("anna", kind=3),
    lambda e: e.entities("anna", order="best"),
    lambda e: e.entities("anna", order=None),
    lambda e: e.entities("anna", limit=0),
    lambda e: e.entities("anna", limit="5"),
    lambda e: e.entities("anna", now="not a time"),
    lambda e: e.entities(None),
    lambda e: e.entity("anna", 42),
    lambda e: e.entity("anna", ""),
    lambda e: e.entity("anna", "   "),
    lambda e: e.entity("anna", "x" * 10_000),
    lambda e: e.entity("anna", "Mel", bucket="year"),
    lambda e: e.entity("anna", "Mel", limit=-1),
    lambda e: e.entity("anna", "Mel\x00"),
    lambda e: e.rename_entity("anna", "Mel", None),
    lambda e: e.rename_entity("an/na", "Mel", "Melanie"),
    lambda e: e.add_alias("anna", "Mel", ["Melly"]),
    lambda e: e.merge_entities("anna", "Mel", 7),
    lambda e: e.delete_entity("anna", b"Mel"),
])
def test_wrong_arguments_are_validation_errors(engine, call):
    _known(engine, "anna", "Mel")
    with pytest.raises(ValidationError):
        call(engine)


def test_one_rule_for_names_with_one_message_per_rule(engine):
    _known(engine, "anna", "Melanie")
    refused = {"Mel\u202eina": "alias holds U+202E, a format character (Unicode Cf)",  # displays as "Melanie"
               "Me\u200bl": "alias holds U+200B, a format character (Unicode Cf)",
               "🐱🐱": "alias holds fewer than 2 letters or digits",
               "x" * 300: "alias has 300 characters; a name or key is at most 80",
               "Mel ": "alias begins or ends with white space"}
    for alias, message in refused.items():
        with pytest.raises(ValidationError) as caught:
            engine.add_alias("anna", "Melanie", alias)
        assert str(caught.value).startswith(message)
    with pytest.raises(ValidationError, match=r"^new_name holds U\+202E"):
        engine.rename_entity("anna", "Melanie", "Mel\u202eina")
    with pytest.raises(ValidationError, match=r"^other holds U\+000A"):
        engine.merge_entities("anna", "Melanie", "Mel\n")
    assert engine.entity("anna", "Melanie").entity.aliases == []
    assert engine.add_alias("anna", "Melanie", "Mel ☕").aliases == ["Mel ☕"]  # a symbol inside a name is fine
    engine.record("anna", [{"role": "user", "name": "Eve\u202eevil", "content": "Hi."}])
    assert "Eve\u202eevil" not in _by_name(engine, "anna")  # a speaker's name follows the rule too


def test_a_wrong_kind_lists_the_kinds_and_nothing_else(engine):
    with pytest.raises(ValidationError) as caught:
        engine.entities("anna", kind="alien")
    assert str(caught.value) == f"kind must be one of {', '.join(k.value for k in EntityKind)}, not 'alien'"


def test_huge_input_is_counted_in_one_call(engine):
    for name in ("Alice", "Bob", "王磊"):
        _known(engine, "anna", name)
    texts = [f"Alice met Bob, turn {i}." if i % 2 else f"和王磊聊了第{i}次。" for i in range(600)]
    engine.record("anna", [{"role": "user", "content": text, "timestamp": T0 + timedelta(seconds=i)}
                           for i, text in enumerate(texts)])
    counts = {name: entity.mention_count for name, entity in _by_name(engine, "anna").items()}
    assert counts == {"Alice": 300, "Bob": 300, "王磊": 300}
    long_text = ("Alice " * 15_000).strip()
    engine.record("anna", [{"role": "user", "content": long_text, "timestamp": T0 + timedelta(days=1)}])
    assert _by_name(engine, "anna")["Alice"].mention_count == 301  # one message, one mention


def test_users_never_see_or_count_each_others_entities(engine, monkeypatch):
    anna_mel = _known(engine, "anna", "Mel")
    _say(engine, "bob", "Mel is my neighbour.")
    assert _by_name(engine, "anna")["Mel"].mention_count == 0
    assert engine.entities("bob") == []
    with pytest.raises(NotFoundError):
        engine.entity("bob", "Mel")
    with pytest.raises(NotFoundError):
        engine.entity("bob", anna_mel.id)
    with pytest.raises(NotFoundError):
        engine.delete_entity("bob", anna_mel.id)
    _known(engine, "bob", "Mel", entity_id="bob-Mel")  # written behind the engine's back: read after the TTL
    monkeypatch.setattr(engine_module, "MATCHER_TTL_S", 0.0)
    _say(engine, "bob", "Mel again.", start=T0 + timedelta(hours=1))
    assert _by_name(engine, "bob")["Mel"].mention_count == 1
    assert _by_name(engine, "anna")["Mel"].mention_count == 0


def test_entities_written_elsewhere_are_counted_after_the_ttl(engine, monkeypatch, tmp_path, local_embedder):
    _say(engine, "anna", "Before anyone was known.")  # the engine caches anna's (empty) matcher
    other = MemoryScope(path=tmp_path / "memory.db", embedder=local_embedder)  # e.g. a consolidation worker
    try:
        _known(other, "anna", "Mel")
    finally:
        other.close()
    monkeypatch.setattr(engine_module, "MATCHER_TTL_S", 0.0)
    _say(engine, "anna", "Mel is known now.", start=T0 + timedelta(hours=1))
    assert _by_name(engine, "anna")["Mel"].mention_count == 1


def test_delete_all_removes_the_ledger(engine):
    engine.record("anna", [{"role": "user", "name": "Anna", "content": "Hi Mel."}])
    engine.set_profile("anna", "home", "Porto")
    assert engine.entities("anna")
    engine.delete_all("anna")
    assert engine.entities("anna") == []
    assert engine.profile("anna") == {}
    _say(engine, "anna", "Anna is back.")  # the cached matcher of the deleted ledger links nothing stale
    assert engine.store.mentions("anna") == []


def test_async_twins(engine):
    _known(engine, "anna", "Mel")
    _say(engine, "anna", "Mel called.")

    async def run():
        entities = await engine.aentities("anna")
        details = await engine.aentity("anna", "Mel")
        renamed = await engine.arename_entity("anna", "Mel", "Melanie")
        aliased = await engine.aadd_alias("anna", "Melanie", "Melly")
        _known(engine, "anna", "M.")
        merged = await engine.amerge_entities("anna", "Melanie", "M.")
        value = await engine.aset_profile("anna", "home", "Porto")
        profile = await engine.aprofile("anna")
        removed = await engine.aremove_profile_value("anna", value.id)
        history = await engine.aprofile_history("anna", "home")
        deleted = await engine.adelete_entity("anna", "Melanie")
        return entities, details, renamed, aliased, merged, profile, removed, history, deleted

    entities, details, renamed, aliased, merged, profile, removed, history, deleted = asyncio.run(run())
    assert [e.name for e in entities] == ["Mel"] and details.entity.mention_count == 1
    assert renamed.name == "Melanie" and aliased.aliases == ["Mel", "Melly"] and "M." in merged.aliases
    assert list(profile) == ["home"] and removed.valid_to is not None and len(history) == 1
    assert deleted == 1
    for name in ("entities", "entity", "rename_entity", "add_alias", "merge_entities", "delete_entity", "profile",
                 "profile_history", "set_profile", "remove_profile_value"):
        assert getattr(MemoryScope, "a" + name).__doc__ == f"Async twin of :meth:`{name}`."


def test_turn_type_memories_are_counted(engine):
    _known(engine, "anna", "Mel")
    ids = _say(engine, "anna", "Mel called.")
    assert engine.get("anna", ids[0]).type is MemoryType.TURN
    assert [m.counted for m in engine.store.mentions("anna", memory_ids=ids)] == [True]


def test_update_links_the_names_of_the_new_text(engine):
    _known(engine, "anna", "Porto", kind=EntityKind.PLACE)
    memory = engine.add("anna", "A trip is planned.")
    engine.update("anna", memory.id, content="A trip to Porto is planned.")
    assert [m.memory_id for m in engine.store.mentions("anna")] == [memory.id]
    engine.update("anna", memory.id, status="expired")  # no new text: nothing to link again
    assert _by_name(engine, "anna")["Porto"].mention_count == 1


def test_new_text_replaces_the_old_texts_links(engine):
    _known(engine, "anna", "Porto", kind=EntityKind.PLACE)
    _known(engine, "anna", "Lisbon", kind=EntityKind.PLACE)
    _known(engine, "anna", "Mel")
    memory = engine.add("anna", "Mel booked a trip to Porto.")
    kept = engine.add("anna", "Porto again next year.")
    engine.update("anna", memory.id, content="Mel booked a trip to Lisbon instead.")
    linked = {(m.entity_id, m.memory_id) for m in engine.store.mentions("anna")}
    assert linked == {("anna-Mel", memory.id), ("anna-Lisbon", memory.id), ("anna-Porto", kept.id)}
    assert {n: e.mention_count for n, e in _by_name(engine, "anna").items()} == {"Porto": 1, "Lisbon": 1, "Mel": 1}
    assert [m.id for m in engine.entity("anna", "Porto").memories] == [kept.id]
    engine.update("anna", memory.id, content="A quiet week at home.")  # names nothing known: unlinked
    assert {m.memory_id for m in engine.store.mentions("anna")} == {kept.id}
    # add with the id of a memory replaces it, and its links with it
    engine.add("anna", "Mel lives in Lisbon.", memory_id=kept.id)
    assert {m.entity_id for m in engine.store.mentions("anna", memory_ids=[kept.id])} == {"anna-Mel", "anna-Lisbon"}
    assert _by_name(engine, "anna")["Porto"].mention_count == 0


def test_an_expired_memory_keeps_its_links_as_history(engine):
    _known(engine, "anna", "Porto", kind=EntityKind.PLACE)
    ids = _say(engine, "anna", "Porto was lovely.", "Back to Porto in May.")
    engine.update("anna", ids[0], status="expired")
    porto = engine.entity("anna", "Porto")
    assert (porto.entity.mention_count, porto.entity.first_mentioned_at) == (2, T0)  # said: it still counts
    assert [m.id for m in porto.memories] == [ids[1]]  # the memories shown are the active ones


def test_an_unchanged_ledger_is_not_compiled_again_after_the_ttl(engine, monkeypatch):
    _known(engine, "anna", "Mel")
    monkeypatch.setattr(engine_module, "MATCHER_TTL_S", 0.0)
    _say(engine, "anna", "Mel one.")
    first = engine._matchers.get("anna").matcher
    _say(engine, "anna", "Mel two.", start=T0 + timedelta(hours=1))  # mentions changed, names did not
    assert engine._matchers.get("anna").matcher is first
    engine.add_alias("anna", "Mel", "Melly")
    assert engine._matchers.get("anna").matcher is not first
