"""Retrieval through the entity ledger: the second hop through it when a user's ledger knows
entities, today's full-text hop when not; entity questions (English and Chinese) put the entity's
memories first and the lines that only address it last; the profile and the entities in the block;
never another user's entities."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memoryscope_plugins.person import NameMatcher
from memoryscope_plugins.person.ledger import record_mentions
from memoryscope_plugins.retrieval import ledger_cache
from memoryscope_plugins.retrieval.entity_questions import only_addressed, remainder_terms
from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.storage.text_analysis import analyse
from memoryscope_plugins.types import Entity, EntityKind, EntityMention, Memory, ProfileValue
from tests.support.conversation import BOSTON, FILLER, NOW, NURSE, QUESTION, SAID, record_sessions


def _settings(engine, **update) -> None:
    engine.settings.retrieval = engine.settings.retrieval.model_copy(update=update)


def _ledger(engine, user: str, names: dict[str, tuple[EntityKind, list[str]]]) -> dict[str, Entity]:
    """Entities for `names` (name -> kind, aliases) with a mention in every memory of `user` naming them,
    in place of the names `record` found itself (its named speakers are kept)."""
    stored = engine.store.entities(user)
    known = {entity.name: entity for entity in stored if "speaker_role" in entity.metadata}  # the named speakers
    entities = {name: Entity(id=known[name].id if name in known else f"{user}-{i}", user_id=user, name=name,
                             kind=kind, aliases=aliases) for i, (name, (kind, aliases)) in enumerate(names.items())}
    ids = {entity.id for entity in entities.values()}
    found = [entity.id for entity in stored if "speaker_role" not in entity.metadata and entity.id not in ids]
    memories = [m for batch in engine.store.iter_memories(user) for m in batch]
    mentions = record_mentions(list(entities.values()), memories)
    engine.store.put_ledger(LedgerChanges(user_id=user, entities=list(entities.values()), mentions=mentions,
                                          removed_entities=found))
    ledger_cache.for_store(engine.store).invalidate(user)
    engine._matchers.invalidate(user)
    return entities


def _anna(engine, user: str = "caro") -> None:
    record_sessions(engine, user, [
        [("Caroline", BOSTON), ("Melanie", "Oh, that's a big change for her!")],
        [("Caroline", text) if i % 2 == 0 else ("Melanie", text) for i, text in enumerate(FILLER)],
        [("Melanie", "How are your friends doing?"), ("Caroline", NURSE)],
    ])


SPEAKERS = {"Caroline": (EntityKind.PERSON, []), "Melanie": (EntityKind.PERSON, ["Mel"])}


# the first hop's one search of both channels
FIRST_HOP = 1


def test_the_hop_goes_through_the_ledger_when_it_knows_more_than_the_speakers(engine, monkeypatch):
    _anna(engine)
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    _settings(engine, context_hop=2, context_hop_hits=3)
    searches = []
    real = engine.store.search
    monkeypatch.setattr(engine.store, "search", lambda request: searches.append(request) or real(request))
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert result.memories[0].memory.content == BOSTON
    assert [m.content for m in result.second_hop] == [NURSE]
    assert NURSE in result.context and NURSE not in [item.memory.content for item in result.memories]
    assert len(searches) == FIRST_HOP  # the first hop's searches only: the ledger replaces the second one


def test_record_alone_builds_the_ledger_the_hop_goes_through(engine, monkeypatch):
    """No model: `record` finds Anna and Boston in the turns (`person.record_names`), so the second hop
    walks the ledger from the first hit's names to the nurse line."""
    _anna(engine)
    names = {entity.name: entity.kind.value for entity in engine.store.entities("caro")}
    assert names == {"Caroline": "person", "Melanie": "person", "Anna": "person", "Boston": "unknown"}  # my friend
    _settings(engine, context_hop=2, context_hop_hits=3)
    searches = []
    real = engine.store.search
    monkeypatch.setattr(engine.store, "search", lambda request: searches.append(request) or real(request))
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert [m.content for m in result.second_hop] == [NURSE] and len(searches) == FIRST_HOP


def test_without_a_ledger_or_with_the_speakers_only_the_hop_searches_as_before(engine, monkeypatch):
    _anna(engine)
    _ledger(engine, "caro", {})  # the speakers only, as before record found names
    _settings(engine, context_hop=2, context_hop_hits=3)
    searches = []
    real = engine.store.search
    monkeypatch.setattr(engine.store, "search", lambda request: searches.append(request) or real(request))
    plain = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert NURSE in [m.content for m in plain.second_hop] and len(searches) == FIRST_HOP + 1
    _ledger(engine, "caro", SPEAKERS)
    speakers_only = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert speakers_only.context == plain.context and len(searches) == 2 * (FIRST_HOP + 1)
    _settings(engine, context_hop_source="ledger")  # forced: the speakers lead nowhere new
    assert engine.retrieve("caro", QUESTION, now=NOW, top_k=2).second_hop == []


def test_a_hop_never_reaches_another_users_memories_or_entities(engine):
    _anna(engine, "caro")
    _anna(engine, "other")
    _ledger(engine, "other", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    _settings(engine, context_hop=2, context_entities=5, context_hop_source="ledger")
    result = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert result.second_hop and all(m.user_id == "caro" for m in [*result.second_hop, *result.neighbours])
    assert all(item.memory.user_id == "caro" for item in result.memories)
    cache = ledger_cache.for_store(engine.store)
    assert {e.user_id for e in cache.ledger(engine.store, "caro").entities.values()} == {"caro"}
    # a user whose ledger knows only the speaker sees none of another's entities
    record_sessions(engine, "third", [[("Caroline", BOSTON.lower())]])  # no capitals: record reads no name
    assert [e.name for e in cache.ledger(engine.store, "third").entities.values()] == ["Caroline"]
    third = engine.retrieve("third", "Who is Anna?", now=NOW)
    assert "Anna (" not in third.context and "Boston (" not in third.context and third.second_hop == []
    assert "entity" not in third.memories[0].scores


ADDRESSING = ["Thanks, Melanie!", "Melanie, that sounds amazing!", "Hey Melanie, how are you?",
              "Wow, Melanie! Great job!"]
ABOUT_MEL = ["I run a small vintage clothing shop downtown.", "My clothing line launches in the spring.",
             "My kids and I went camping by the lake."]


def _melanie(engine, user: str = "caro") -> None:
    turns: list[tuple[str, str]] = []
    for addressing, about in zip(ADDRESSING, [*ABOUT_MEL, "I also paint landscapes on weekends."]):
        turns += [("Melanie", about), ("Caroline", addressing)]
    record_sessions(engine, user, [turns[:4], turns[4:]])


def test_an_entity_question_ranks_the_entitys_own_words_above_lines_addressing_it(engine):
    _melanie(engine)
    _settings(engine, context_neighbours=0, context_hop=0, entity_questions=False)
    before = engine.retrieve("caro", "What do you know about Melanie?", now=NOW, top_k=4)
    _ledger(engine, "caro", SPEAKERS)
    _settings(engine, entity_questions=True)
    after = engine.retrieve("caro", "What do you know about Melanie?", now=NOW, top_k=4)
    top = [item.memory.content for item in after.memories]
    assert all(item.memory.speaker == "Melanie" for item in after.memories), top
    assert sum(item.memory.content in ADDRESSING for item in before.memories) > 0  # what the issue saw
    # the question with the name taken out ranks the entity's memories: "family" -> the kids
    family = engine.retrieve("caro", "Tell me about Mel's kids", now=NOW, top_k=1)
    assert family.memories[0].memory.content == ABOUT_MEL[2]


@pytest.mark.parametrize("addressing", ["谢谢你，小王！", "晚安小王。", "小王好！", "好的小王，明天见。"])
def test_an_entity_question_in_chinese_gathers_the_entitys_memories(engine, addressing):
    record_sessions(engine, "zh", [[("我", "小王上个月去了成都出差。"), ("助手", addressing),
                            ("我", "小王在一家设计公司做产品经理。"), ("我", "今天天气不错。")]])
    _ledger(engine, "zh", {"王磊": (EntityKind.PERSON, ["小王"])})
    _settings(engine, context_neighbours=0, context_hop=0)
    result = engine.retrieve("zh", "介绍一下小王", now=NOW, top_k=2)
    assert {item.memory.content for item in result.memories} == {"小王上个月去了成都出差。",
                                                                 "小王在一家设计公司做产品经理。"}
    assert result.memories[0].scores.get("entity") == 1.0


def test_an_entity_question_gathers_mentioned_memories_the_search_missed(engine):
    _anna(engine)
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, [])})
    _settings(engine, context_neighbours=0, context_hop=0, candidates=1, min_relevance=-1)
    result = engine.retrieve("caro", "Who is Anna?", now=NOW, top_k=3)
    assert {BOSTON, NURSE} <= {item.memory.content for item in result.memories}


def test_the_profile_and_the_entities_that_matter_in_the_block_behind_their_settings(engine):
    _anna(engine)
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    engine.store.put_ledger(LedgerChanges(user_id="caro", profile=[
        ProfileValue(id="p1", user_id="caro", key="home", value="Leeds", valid_from=SAID),
        ProfileValue(id="p2", user_id="caro", key="likes", value="tea")]))
    plain = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert "About the user now" not in plain.context and "Named here" not in plain.context
    _settings(engine, context_profile=True, context_entities=2)
    ledger_cache.for_store(engine.store).invalidate("caro")
    lines = engine.retrieve("caro", QUESTION, now=NOW, top_k=2).context.splitlines()
    assert lines[0] == "About the user now: home: Leeds (since 2023-05); likes: tea"
    assert lines[1].startswith("Named here: ") and "Boston (place; 1 mentions" in lines[1]
    assert lines[2].startswith("Today is")
    zh = engine.retrieve("caro", QUESTION, now=NOW, top_k=2, language="zh").context
    assert zh.startswith("用户现在的情况：住址：Leeds")


def test_the_cache_reuses_a_users_matcher_until_it_expires_or_is_dropped(engine):
    clock = [0.0]
    cache = ledger_cache.LedgerCache(ttl_s=10, clock=lambda: clock[0])
    record_sessions(engine, "caro", [[("Caroline", BOSTON)]])
    _ledger(engine, "caro", {"Anna": (EntityKind.PERSON, [])})
    first = cache.ledger(engine.store, "caro")
    assert cache.ledger(engine.store, "caro") is first
    _ledger(engine, "caro", {"Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    assert cache.ledger(engine.store, "caro") is first  # within the TTL
    cache.invalidate("caro")
    assert {e.name for e in cache.ledger(engine.store, "caro").entities.values()} == {"Anna", "Boston", "Caroline"}
    clock[0] = 11
    again = cache.ledger(engine.store, "caro")
    assert again is not first and again.matcher is cache.ledger(engine.store, "caro").matcher
    # the engine drops the store's cache when recording adds an entity (a new named speaker)
    shared = ledger_cache.for_store(engine.store)
    before = shared.ledger(engine.store, "caro")
    record_sessions(engine, "caro", [[("Dana", "Hello there.")]])
    assert "Dana" in {e.name for e in shared.ledger(engine.store, "caro").entities.values()}
    assert shared.ledger(engine.store, "caro") is not before


PROMOTED = "Anna adopted a grey kitten last week."  # names Anna only: no new entity


def test_the_hop_reads_mentions_from_the_cached_index_and_sees_a_mention_recorded_since(engine, monkeypatch):
    _anna(engine)
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    _settings(engine, context_hop=3, context_hop_hits=3, context_hop_source="ledger", entity_questions=False)
    reads = []
    real = engine.store.mentions
    monkeypatch.setattr(engine.store, "mentions", lambda *a, **k: reads.append(k) or real(*a, **k))
    first = engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    assert [m.content for m in first.second_hop] == [NURSE] and len(reads) == 1  # the index, read once
    assert engine.retrieve("caro", QUESTION, now=NOW, top_k=2).context == first.context and len(reads) == 1
    # recording a turn that names Anna adds its mention to the cached index: the next hop sees it, no read
    engine._matchers.invalidate("caro")  # so that recording knows Anna (`_ledger` wrote behind its back)
    engine.retrieve("caro", QUESTION, now=NOW, top_k=2)  # that dropped retrieval's entry too: read again
    reads.clear()
    record_sessions(engine, "caro", [[("Caroline", PROMOTED)]])
    later = engine.retrieve("caro", QUESTION, now=NOW, top_k=1)
    assert PROMOTED in [m.content for m in later.second_hop] and reads == [], later.context
    # a ledger written behind the engine's back is seen once the entry is dropped (or expires)
    engine.store.put_ledger(LedgerChanges(user_id="caro", removed_entities=["caro-2"]))  # Anna
    ledger_cache.for_store(engine.store).invalidate("caro")
    assert engine.retrieve("caro", QUESTION, now=NOW, top_k=2).second_hop == [] and len(reads) == 1
    # deleting a memory drops the entry: its mentions are gone with it
    _ledger(engine, "caro", {**SPEAKERS, "Anna": (EntityKind.PERSON, []), "Boston": (EntityKind.PLACE, [])})
    engine.retrieve("caro", QUESTION, now=NOW, top_k=2)
    reads.clear()
    engine.delete("caro", next(m.id for m in later.second_hop if m.content == NURSE))
    assert NURSE not in [m.content for m in engine.retrieve("caro", QUESTION, now=NOW, top_k=2).second_hop]
    assert len(reads) == 1


def test_the_mention_index_orders_newest_first_and_keeps_to_its_user():
    def mention(entity: str, memory: str, minutes: int, user: str = "caro") -> EntityMention:
        return EntityMention(entity_id=entity, memory_id=memory, user_id=user,
                             said_at=SAID + timedelta(minutes=minutes))

    index = ledger_cache.MentionIndex.of([mention("b", "m1", 0), mention("a", "m2", 5), mention("a", "m3", 5),
                                          mention("a", "m1", 0)])
    assert index.by_memory == {"m1": ("a", "b"), "m2": ("a",), "m3": ("a",)}
    assert [mid for _, _, mid in index.newest(["b", "a"])] == ["m2", "m3", "m1", "m1"]  # ties: entity, memory
    later = index.plus([mention("b", "m1", 9), mention("b", "m4", 1)])  # m1 said again: its time replaced
    assert [(eid, mid) for _, eid, mid in later.newest(["a", "b"])] == [
        ("b", "m1"), ("a", "m2"), ("a", "m3"), ("b", "m4"), ("a", "m1")]
    assert index.newest(["b"]) == [(-SAID.timestamp(), "b", "m1")]  # the old index is unchanged
    cache = ledger_cache.LedgerCache()
    ledger = ledger_cache.user_ledger("caro", [Entity(id="a", user_id="caro", name="Anna")], NameMatcher([]))

    class Store:
        def mentions(self, user_id):
            return [mention("a", "m1", 0, user_id), mention("a", "x1", 0, "other")]

    cache._entries["caro"] = (0.0, ledger)
    assert cache.mention_index(Store(), ledger).by_memory == {"m1": ("a",)}
    cache.add_mentions("caro", [mention("a", "x2", 3, "other")])  # another user's: never taken
    assert "x2" not in cache.mention_index(Store(), ledger).by_memory
    cache.add_mentions("caro", [mention("zz", "m9", 3)])  # an entity the entry does not know: dropped
    assert "caro" not in cache._entries


@pytest.mark.parametrize(("text", "addressed"), [
    ("Thanks, Mel!", True), ("Mel, how are you?", True), ("Hey Mel!", True), ("谢谢你，小王！", True),
    ("I met Mel at the shop.", False), ("Mel's shop is doing well, thanks Mel!", False), ("小王去了成都。", False),
])
def test_a_line_that_only_addresses_the_entity(text, addressed):
    memory = Memory(id="m", user_id="u", agent_id="a", content=text)
    assert only_addressed(memory, ["Mel", "小王"], speaker_is_entity=False) is addressed
    assert only_addressed(memory, ["Mel", "小王"], speaker_is_entity=True) is False


def test_the_question_without_the_name_and_the_asking_words():
    assert remainder_terms("Tell me about Mel's family", ["Melanie", "Mel"]) == analyse("family")
    assert remainder_terms("What do you know about Melanie?", ["Melanie", "Mel"]) == []
    assert remainder_terms("介绍一下王磊的家人", ["王磊"]) == ["家人"]
