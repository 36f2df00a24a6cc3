"""The entity ledger and the profile built by consolidation, end to end: the real engine and store,
the real `openai` client, and a fake HTTP model whose answers carry entities and profile values,
well formed or the way small models write them."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator

import pytest

from tests.support.consolidation_helpers import (
    assistant_msg,
    at,
    entries,
    make_engine,
    named,
    obs,
    raw_entities,
    user_msg,
)

MESSAGES = ["My friend Mel runs a vintage shop in Boston.", "Thanks, see you!"]


def states(engine, user="anna") -> dict[str, tuple[str, int]]:
    return {m.message.content: (m.state, m.attempts) for m in engine.store.recent_messages(user, None, None, 1000)}


def contents(engine, user="anna") -> list[str]:
    return sorted(m.content for m in engine.list(user, types=["observation"]))


def run(tmp_path, server, brain, local_embedder, extra: list[Any], name: str = "run") -> tuple[Any, dict, list[str]]:
    """Consolidate `MESSAGES` with the observation of a good answer plus ``extra`` (entities)."""
    brain.extract = lambda p: [obs("Anna's friend Mel runs a vintage shop in Boston.", [1], about="Mel"), *extra]
    engine = make_engine(tmp_path / name, server, local_embedder)
    try:
        engine.record("anna", [user_msg(text, at(1)) for text in MESSAGES])
        report = engine.consolidate("anna")
        return report, states(engine), contents(engine)
    finally:
        engine.close()


MISBEHAVIOURS = {
    "left out": [raw_entities(..., 1), raw_entities(..., 2)],
    "null": [raw_entities(None, 1), raw_entities(None, 2)],
    "a string": [raw_entities("Mel, Boston", 1)],
    "an object": [raw_entities({"name": "Boston", "kind": "city"}, 1)],
    "unknown kinds": [named("Mel", 1, kind="friend-ish"), named("Boston", 1, kind=None)],
    "names not in the message": [named("Caroline", 1), named("Paris", 2, kind="place")],
    "a loop": [named("Mel", 1)] * 60,
    "huge names": [named("Mel runs a vintage shop in Boston " * 20, 1), named("x" * 5000, 1)],
    "junk items": [raw_entities([None, 3, ["Mel"], {"name": {"x": 1}}, "Mel"], 1)],
    "bad profile values": [obs("Anna likes Boston.", [1], profile="nonsense"),
                           obs("Anna shops in Boston.", [1], profile={"key": None, "value": ["Boston"]})],
}


@pytest.mark.parametrize("case", sorted(MISBEHAVIOURS))
def test_what_a_model_writes_in_the_extras_never_changes_the_verdicts(tmp_path, server, brain, local_embedder, case):
    clean_report, clean_states, clean_contents = run(tmp_path, server, brain, local_embedder, [], "clean")
    report, got_states, got_contents = run(tmp_path, server, brain, local_embedder, MISBEHAVIOURS[case], case)
    assert got_states == clean_states == dict.fromkeys(MESSAGES, ("done", 0))
    assert report.unaccounted_ids == [] and not report.errors and not report.incomplete
    assert [c for c in got_contents if c in clean_contents] == clean_contents


def test_an_answer_cut_off_in_an_entity_list_asks_that_message_again(tmp_path, server, brain, local_embedder):
    answered: list[list[str]] = []

    def cut_then_whole(server_, request):
        reply = brain(server_, request)
        prompt = brain.prompts[-1]
        if prompt.kind != "consolidate":
            return reply
        answered.append([content for *_, content in prompt.new])
        body = reply.json
        text = body["choices"][0]["message"]["content"]
        if len(answered) == 1:  # the first answer stops inside the second entry's entities
            body["choices"][0]["message"]["content"] = text[:text.index('"Boston"') + 3]
            body["choices"][0]["finish_reason"] = "length"
        return reply

    from tests.support.fakes.fake_model_server import OPENAI_CHAT
    server.route(OPENAI_CHAT, cut_then_whole)
    brain.extract = lambda p: [obs(f"Anna said: {c}", [n]) for n, _, _, c in p.new] + \
        [named("Boston", n, kind="place") for n, _, _, c in p.new if "Boston" in c]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("Hello there, I'm new here.", at(1)),
                               user_msg("My shop is in Boston.", at(1))])
        report = engine.consolidate("anna")
        assert report.incomplete
        assert answered == [["Hello there, I'm new here.", "My shop is in Boston."], ["My shop is in Boston."]]
        assert states(engine) == {"Hello there, I'm new here.": ("done", 0), "My shop is in Boston.": ("done", 1)}
    finally:
        engine.close()


def test_the_entities_schema_reaches_the_endpoint(tmp_path, server, brain, local_embedder):
    from tests.support.fakes.fake_model_server import OPENAI_CHAT
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My friend Mel runs a vintage shop in Boston.", at(1))])
        engine.consolidate("anna")
        body = server.requests_to(OPENAI_CHAT)[0].json
        entry = body["response_format"]["json_schema"]["schema"]["properties"]["messages"]["prefixItems"][0]
        assert "entities" in entry["required"]
        system = body["messages"][0]["content"]
        assert '"entities"' in system and '"alias_of"' in system and '"profile"' in system
        assert json.loads(json.dumps(entries(brain.prompts[0], [])))["messages"][0]["entities"] == []
    finally:
        engine.close()


# -- the ledger and the profile in the store ----------------------------------------------------------


def ledger(engine, user="anna"):
    """What consolidation wrote: the speakers' own entities (made by `record` from the messages'
    names, tested in tests/engine) are left out."""
    entities = {e.name: e for e in engine.store.entities(user) if "speaker_role" not in e.metadata}
    ids = {e.id for e in entities.values()}
    mentions = [m for m in engine.store.mentions(user) if m.entity_id in ids]
    return entities, mentions, engine.store.profile_values(user)


def turn_id(engine, text: str, user="anna") -> str:
    return next(m.id for m in engine.store.recent_messages(user, None, None, 1000) if m.message.content == text)


@contextlib.contextmanager
def said_by_xiaomei(tmp_path, server, brain, local_embedder, said: dict[str, list[Any]]) -> Iterator[Any]:
    """A Chinese engine after 小美 said each of ``said`` on its own day, each consolidated with the
    model's answer items listed for it."""
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        for day, text in enumerate(said, start=1):
            engine.record("xm", [user_msg(text, at(day), name="小美")])
            engine.consolidate("xm")
        yield engine
    finally:
        engine.close()


def _kinds(engine, user: str) -> dict[str, str]:
    return {e.name: e.kind.value for e in engine.store.entities(user) if "speaker_role" not in e.metadata}


def test_record_alone_finds_names_and_consolidation_types_one_and_drops_another(tmp_path, server, brain,
                                                                                 local_embedder):
    """No model at record: the naming phrases make 橘子 and 回锅肉 `unknown` entities and the dictionary
    makes 成都 a place. The model's answer then makes 橘子 a pet and calls 回锅肉 a topic, which the
    common-word rule refuses (a dish, like 高血压): that unknown entity goes, with its mention."""
    texts = ["我家那只猫，叫橘子，三岁了。", "成都那家店的招牌菜，叫回锅肉，特别香。"]
    brain.extract = lambda p: [obs("小美养了一只叫橘子的猫。", [1], about="小美"), named("橘子", 1, kind="pet"),
                               named("回锅肉", 2, kind="topic")]
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        engine.record("xm", [user_msg(text, at(1), name="小美") for text in texts])
        assert _kinds(engine, "xm") == {"橘子": "unknown", "回锅肉": "unknown", "成都": "place"}
        soup = next(e.id for e in engine.store.entities("xm") if e.name == "回锅肉")
        report = engine.consolidate("xm")
        assert _kinds(engine, "xm") == {"橘子": "pet", "成都": "place"}
        assert engine.store.mentions("xm", entity_ids=[soup]) == [] and engine.count("xm") == 3  # memories kept
        assert report.entities == ["橘子 (pet)"] and not report.errors
    finally:
        engine.close()


def test_consolidation_merges_a_name_record_found_into_the_entity_the_model_says_it_names(
        tmp_path, server, brain, local_embedder):
    texts = ["We finally visited Seattle with my friend Melanie.", "Everyone calls her Mel, it suits her."]
    brain.extract = lambda p: [named("Seattle", 1, kind="place"), named("Melanie", 1),
                               named("Mel", 2, alias_of="Melanie")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg(text, at(1)) for text in texts])
        assert _kinds(engine, "anna") == {"Seattle": "unknown", "Melanie": "person", "Mel": "unknown"}
        engine.consolidate("anna")
        entities, mentions, _ = ledger(engine)
        assert {name: (e.kind.value, e.aliases, e.mention_count) for name, e in entities.items()} == {
            "Seattle": ("place", [], 1), "Melanie": ("person", ["Mel"], 2)}
        assert {m.memory_id for m in mentions if m.entity_id == entities["Melanie"].id} == {
            turn_id(engine, text) for text in texts}
    finally:
        engine.close()


def test_consolidation_builds_the_ledger_and_keeps_the_profile_current(tmp_path, server, brain, local_embedder):
    said = {"Boston is freezing today.": [],
            "I live in Boston now.": [obs("Anna lives in Boston.", [1], profile={"key": "lives in", "value": "Boston"}),
                                      named("Boston", 1, kind="city")],
            "My friend Melanie runs a vintage shop.": [
                obs("Anna's friend Melanie runs a vintage shop.", [1], about="Melanie",
                    profile={"key": "friends", "value": "Melanie"}), named("Melanie", 1),
                named("Caroline", 1)],  # not in the message: never an entity
            "Everyone calls her Mel, Melanie I mean.": [named("Mel", 1, alias_of="Melanie")],
            "We moved to Denver last month, Mel helped.": [
                obs("Anna moved to Denver.", [1], kind="event", time="last month",
                    profile={"home": "Denver"}), named("Denver", 1, kind="place"), named("Mel", 1)]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        for month, text in enumerate(said, start=1):
            engine.record("anna", [user_msg(text, at(1, month=month))])
            engine.consolidate("anna")
        entities, mentions, profile = ledger(engine)
        assert sorted(entities) == ["Boston", "Denver", "Melanie"]
        boston, melanie = entities["Boston"], entities["Melanie"]
        assert boston.kind.value == "place" and melanie.aliases == ["Mel"]
        # "Boston is freezing today." was said before Boston was known: found again and counted
        assert boston.mention_count == 2 and boston.first_mentioned_at == at(1, month=1)
        assert melanie.mention_count == 3 and melanie.last_mentioned_at == at(1, month=5)
        counted = {(m.entity_id, m.memory_id) for m in mentions if m.counted}
        assert (boston.id, turn_id(engine, "Boston is freezing today.")) in counted
        evidence = {m.memory_id for m in mentions if not m.counted and m.entity_id == melanie.id}
        assert [m.content for m in engine.store.get("anna", sorted(evidence))] == \
            ["Anna's friend Melanie runs a vintage shop."]
        # the profile: a value stated, changed later, kept as history, with its sources and times
        homes = sorted((v for v in profile if v.key == "home"), key=lambda v: v.valid_from)
        assert [(v.value, v.current) for v in homes] == [("Boston", False), ("Denver", True)]
        denver = next(m for m in engine.list("anna", types=["observation"]) if "Denver" in m.content)
        assert homes[1].source_ids == [denver.id] and homes[1].valid_from == denver.event_start
        assert homes[0].superseded_by == homes[1].id and homes[0].valid_to == homes[1].valid_from
        assert [v.value for v in profile if v.key == "friends"] == ["Melanie"]
    finally:
        engine.close()


def test_the_report_names_new_entities_and_profile_values(tmp_path, server, brain, local_embedder):
    brain.extract = lambda p: [obs("Anna lives in Boston.", [1], profile={"key": "home", "value": "Boston"}),
                               named("Boston", 1, kind="place")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Boston now.", at(1))])
        report = engine.consolidate("anna")
        assert report.entities == ["Boston (place)"] and report.profile == ["home: Boston"]
        assert "new entity: Boston (place)" in report.lines() and report.llm_calls == 1
    finally:
        engine.close()


def test_a_value_neither_the_observation_nor_its_message_says_is_not_a_profile_value(tmp_path, server, brain,
                                                                                    local_embedder):
    brain.extract = lambda p: [obs("Anna lives in Boston.", [1], profile={"key": "home", "value": "Paris"}),
                               obs("Anna's novel is set in Rome.", [1], reality="fiction",
                                   profile={"key": "home", "value": "Rome"})]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Boston now, and my novel is set in Rome.", at(1))])
        engine.consolidate("anna")
        assert engine.store.profile_values("anna") == []
    finally:
        engine.close()


def test_a_broken_answer_leaves_the_ledger_untouched(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        brain.extract = lambda p: '{"observations": "not the shape asked for"}'
        engine.record("anna", [user_msg("I live in Boston now.", at(1))])
        recorded = ledger(engine)  # Boston, found by record without a model, of the kind unknown
        report = engine.consolidate("anna")
        assert report.errors and states(engine) == {"I live in Boston now.": ("pending", 1)}
        assert ledger(engine) == recorded and recorded[0]["Boston"].kind.value == "unknown"
        brain.extract = lambda p: [obs("Anna lives in Boston.", [1], profile={"key": "home", "value": "Boston"}),
                                   named("Boston", 1, kind="place")]
        engine.consolidate("anna")  # the next run succeeds, with everything
        entities, mentions, profile = ledger(engine)
        assert list(entities) == ["Boston"] and len(mentions) == 2 and [v.value for v in profile] == ["Boston"]
    finally:
        engine.close()


def test_a_step_whose_lease_was_taken_over_writes_no_ledger(tmp_path, server, brain, local_embedder):
    engine = make_engine(tmp_path, server, local_embedder, lease_ttl_s=30)
    owner = engine._consolidation.owner

    def taken_over(prompt):  # while the model answers, another worker takes the lease over
        engine.store.release_lease("anna", owner)
        assert engine.store.acquire_lease("anna", "another-worker", 30)
        return [obs("Anna lives in Boston.", [1], profile={"key": "home", "value": "Boston"}),
                named("Boston", 1, kind="place")]

    brain.extract = taken_over
    try:
        engine.record("anna", [user_msg("I live in Boston now.", at(1))])
        recorded = ledger(engine)
        report = engine.consolidate("anna")
        assert report.errors == ["the user's lease was taken over by another worker"]
        assert ledger(engine) == recorded and engine.list("anna", types=["observation"]) == []
    finally:
        engine.close()


def test_chinese_names_and_profile_values(tmp_path, server, brain, local_embedder):
    said = {"我同事王磊下周去杭州出差。": [named("王磊", 1), named("杭州", 1, kind="城市"),
                                    obs("小美的同事王磊下周去杭州出差。", [1], about="王磊")],
            "大家都叫王磊小王，我住在南京。": [named("小王", 1, alias_of="王磊"),
                                  obs("小美住在南京。", [1], about="小美", profile={"key": "住址", "value": "南京"})]}
    with said_by_xiaomei(tmp_path, server, brain, local_embedder, said) as engine:
        entities, _, profile = ledger(engine, "xm")
        assert sorted(entities) == ["南京", "杭州", "王磊"]  # 南京: the dictionary's, the model named none
        assert entities["王磊"].aliases == ["小王"] and entities["王磊"].mention_count == 2
        assert entities["杭州"].kind.value == "place" and entities["南京"].kind.value == "place"
        assert [(v.key, v.value, v.current) for v in profile] == [("home", "南京", True)]


def test_a_new_alias_finds_the_earlier_turns_that_used_it(tmp_path, server, brain, local_embedder):
    said = {"Mel sent me a postcard from Lisbon.": [],  # nobody named Mel is known yet
            "My friend Melanie runs a vintage shop.": [named("Melanie", 1)],
            "We all call Melanie Mel, by the way.": [named("Mel", 1, alias_of="Melanie")]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        for day, text in enumerate(said, start=1):
            engine.record("anna", [user_msg(text, at(day))])
            engine.consolidate("anna")
        entities = ledger(engine)[0]
        melanie = entities["Melanie"]  # record found Melanie and Mel without a model; the model's alias merged them
        assert sorted(entities) == ["Lisbon", "Melanie"] and entities["Lisbon"].kind.value == "unknown"
        assert melanie.aliases == ["Mel"] and melanie.mention_count == 3
        assert melanie.first_mentioned_at == at(1)
    finally:
        engine.close()


def test_a_failure_while_planning_the_ledger_never_costs_the_memories(tmp_path, server, brain, local_embedder,
                                                                      monkeypatch, caplog):
    from memoryscope_plugins.consolidation import ledger_step

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the ledger rules")

    monkeypatch.setattr(ledger_step, "plan_entities", broken)
    brain.extract = lambda p: [obs("Anna lives in Boston.", [1], profile={"key": "home", "value": "Boston"}),
                               named("Boston", 1, kind="place")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Boston now.", at(1))])
        recorded = ledger(engine)
        with caplog.at_level("WARNING", logger="memoryscope_plugins.consolidation"):
            report = engine.consolidate("anna")
        assert report.added == ["Anna lives in Boston."] and not report.errors
        assert states(engine) == {"I live in Boston now.": ("done", 0)}
        assert ledger(engine) == recorded and "was not updated" in caplog.text
    finally:
        engine.close()


def test_the_assistants_turns_of_the_batch_count_too(tmp_path, server, brain, local_embedder):
    brain.extract = lambda p: [named("Boston", 1, kind="place")]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("I live in Boston now.", at(1)),
                               assistant_msg("Boston is lovely in spring!", at(1))])
        engine.consolidate("anna")
        [boston] = ledger(engine)[0].values()
        assert boston.mention_count == 2
        assert {m.memory_id for m in engine.store.mentions("anna")} == \
            {turn_id(engine, "I live in Boston now."), turn_id(engine, "Boston is lovely in spring!")}
    finally:
        engine.close()


# -- what consolidation wrote, seen at once; a ledger edited meanwhile -----------------------------------

def test_a_name_consolidation_just_learnt_is_counted_and_retrieved_at_once(tmp_path, server, brain, local_embedder):
    from memoryscope_plugins.retrieval import ledger_cache
    brain.extract = lambda p: [obs(f"Anna said: {c}", [n]) for n, _, _, c in p.new] + \
        [named("Mel", n) for n, _, _, c in p.new if "Mel" in c]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("anna", [user_msg("My friend Mel runs a vintage shop in Boston.", at(1))])
        engine.retrieve("anna", "Who is Mel?")  # both caches now hold a ledger without Mel
        engine.consolidate("anna")
        engine.record("anna", [user_msg("Mel called me today.", at(2))])
        entities, mentions, _ = ledger(engine)
        mel = entities["Mel"]
        assert (mel.id, turn_id(engine, "Mel called me today.")) in {(m.entity_id, m.memory_id) for m in mentions}
        cached = ledger_cache.for_store(engine.store).ledger(engine.store, "anna")
        assert mel.id in cached.entities
    finally:
        engine.close()


@pytest.mark.parametrize("edits", [1, 2])
def test_an_entity_deleted_during_a_step_never_costs_the_step_its_memories(tmp_path, server, brain, local_embedder,
                                                                           monkeypatch, edits):
    """Another client edits the ledger while a step is between planning its ledger and committing:
    the store refuses the stale links (nothing written), the step plans its ledger again and commits
    (``edits`` 1), or, refused once more, commits without the ledger (2). The memories and the
    messages' verdicts land either way."""
    from memoryscope_plugins.consolidation import steps
    brain.extract = lambda p: [obs(f"Anna's friend Mel said: {c}", [n], about="Mel") for n, _, _, c in p.new] + \
        [named("Mel", n) for n, _, _, c in p.new if "Mel" in c]
    engine = make_engine(tmp_path, server, local_embedder)
    planned = steps.plan_ledger
    plans = []

    def first_turn() -> str:
        return turn_id(engine, "Mel is my oldest friend.")

    def plan_then_edit(*args, **kwargs):
        plan = planned(*args, **kwargs)
        plans.append(plan)
        linked = {m.entity_id for m in plan.changes.mentions} | {m.memory_id for m in plan.changes.mentions}
        if len(plans) == 1:  # the plan links the Mel already known: the user deletes it
            assert entities_before["Mel"].id in linked
            engine.delete_entity("anna", "Mel")
        elif len(plans) == 2 and edits == 2:  # the new Mel's backfill links the first turn: deleted too
            assert first_turn() in linked
            engine.delete("anna", [first_turn()])
        return plan

    try:
        engine.record("anna", [user_msg("Mel is my oldest friend.", at(1))])
        engine.consolidate("anna")
        entities_before, _, _ = ledger(engine)
        monkeypatch.setattr(steps, "plan_ledger", plan_then_edit)
        engine.record("anna", [user_msg("Mel moved to Denver.", at(2))])
        report = engine.consolidate("anna")
        assert not report.errors and report.messages == 1 and len(plans) == 2
        assert states(engine)["Mel moved to Denver."] == ("done", 0)
        assert "Anna's friend Mel said: Mel moved to Denver." in contents(engine)
        entities, mentions, _ = ledger(engine)
        if edits == 1:  # Mel made again by the second plan, linked to what the step wrote
            assert report.entities == ["Mel (person)"] and "Mel" in entities
            assert turn_id(engine, "Mel moved to Denver.") in {m.memory_id for m in mentions}
        else:
            assert report.entities == [] and "Mel" not in entities
    finally:
        engine.close()


def test_without_the_models_profile_the_observations_own_words_keep_it_current(tmp_path, server, brain,
                                                                               local_embedder):
    """A small model leaves ``profile`` out; the observations still say where the user lives: the
    profile follows them, with the old home kept as history (`profile_cues`)."""
    said = {"I live in Bristol with my partner Dev.": [obs("Anna lives in Bristol.", [1]),
                                                       obs("Anna's partner is Dev.", [1])],
            "My sister lives in Paris.": [obs("Anna's sister lives in Paris.", [1], about="Anna's sister")],
            "We moved to Glasgow last month.": [obs("Anna moved to Glasgow.", [1], kind="event", time="last month")]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        for month, text in enumerate(said, start=1):
            engine.record("anna", [user_msg(text, at(1, month=month))])
            engine.consolidate("anna")
        _, _, profile = ledger(engine)
        homes = sorted((v for v in profile if v.key == "home"), key=lambda v: v.valid_from)
        assert [(v.value, v.current) for v in homes] == [("Bristol", False), ("Glasgow", True)]
        assert homes[0].superseded_by == homes[1].id
        assert [v.value for v in profile if v.key == "family"] == ["Dev (partner)"]
        glasgow = next(m for m in engine.list("anna", types=["observation"]) if "Glasgow" in m.content)
        assert homes[1].source_ids == [glasgow.id]
    finally:
        engine.close()


def test_the_short_form_a_speaker_is_addressed_by_joins_their_entity(tmp_path, server, brain, local_embedder):
    """LoCoMo's conv-26 with the shared model: "Mel" proposed for Caroline's "Hey Mel!" made a Mel
    apart from the speaker Melanie. Now it is Melanie's alias, and a later "Mel" counts for her."""
    hello = "Hey Mel! How was the pottery class?"
    brain.extract = lambda p: [item for n, _, _, c in p.new if c == hello
                               for item in (obs("Caroline asked Mel about the pottery class.", [n], about="Caroline"),
                                            named("Mel", n))]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        engine.record("caroline", [user_msg(hello, at(1), name="Caroline"),
                                   {"role": "assistant", "name": "Melanie", "content": "Great, I made a bowl.",
                                    "timestamp": at(1)}])
        engine.consolidate("caroline")
        people = {e.name: e.aliases for e in engine.store.entities("caroline")}
        assert people == {"Caroline": [], "Melanie": ["Mel"]}
        engine.record("caroline", [user_msg("Mel, the bowl looks lovely.", at(2), name="Caroline")])
        details = engine.entity("caroline", "mel")
        assert details.entity.name == "Melanie" and details.entity.mention_count == 2  # the two turns saying Mel
    finally:
        engine.close()


@pytest.mark.parametrize("now_said, now_observed, habit", [
    ("最近开始喝红酒了，周末会喝一杯。", "周航开始喝红酒。", "喝红酒"),
    ("现在开始喝酒了。", "周航开始喝酒。", "喝酒"),  # contains the old value, yet says its opposite
])
def test_a_chinese_habit_that_changes_keeps_the_old_one_as_history(tmp_path, server, brain, local_embedder,
                                                                   now_said, now_observed, habit):
    """The shared model's observations of the zh_change scenario: no ``profile`` field, the habit
    in so many words; the new habit replaces the old, which is kept with its end."""
    said = {"我在深圳做程序员，平时不喝酒。": [obs("周航平时不喝酒。", [1])],
            now_said: [obs(now_observed, [1])]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        for month, text in enumerate(said, start=1):
            engine.record("zh", [user_msg(text, at(1, month=month), name="周航")])
            engine.consolidate("zh")
        diet = sorted((v for v in ledger(engine, "zh")[2] if v.key == "diet"), key=lambda v: v.valid_from)
        assert [(v.value, v.current) for v in diet] == [("不喝酒", False), (habit, True)]
        assert diet[0].superseded_by == diet[1].id and diet[0].valid_to is not None
    finally:
        engine.close()


BAKER = ("I work as a baker in Lyon.", ["Omar works as a baker in Lyon."])


@pytest.mark.parametrize("first, later, language, ended", [
    # the shared model's answers in zh_change: "no longer true" to both, the job's included
    (("我在深圳做程序员，平时不喝酒。", ["周航在深圳工作。", "周航平时不喝酒。"]),
     ("最近开始喝红酒了，周末会喝一杯。", "周航开始喝红酒。"), "zh", ["周航平时不喝酒。"]),
    (BAKER, ("Now I teach cooking classes.", "Omar teaches cooking classes now."), "en", BAKER[1]),
    (BAKER, ("I moved to Paris.", "Omar moved to Paris."), "en", []),  # a home does not end a job
    (BAKER, ("I quit the bakery.", "Omar quit the bakery."), "en", BAKER[1]),  # no profile value: the model's
])
def test_no_longer_true_is_refused_between_a_job_and_a_diet(tmp_path, server, brain, local_embedder, first, later,
                                                             language, ended):
    """A judge that calls every pair outdated: where both lines state profile values of different
    keys only, the old line is kept (a wrong reference); a job ends a job; a line that states no
    profile value is left to the model."""
    user, name = ("zh", "周航") if language == "zh" else ("omar", "Omar")
    said = {first[0]: [obs(text, [1]) for text in first[1]], later[0]: [obs(later[1], [1])]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    brain.judge = lambda p: ["outdated"] * len(p.pairs)
    engine = make_engine(tmp_path, server, local_embedder, language=language)
    try:
        reports = []
        for month, text in enumerate(said, start=1):
            engine.record(user, [user_msg(text, at(1, month=month), name=name)])
            reports.append(engine.consolidate(user))
        status = {m.content: m.status.value
                  for m in engine.list(user, types=["observation"], include_expired=True)}
        assert status == {**dict.fromkeys(first[1], "active"), **dict.fromkeys(ended, "expired"), later[1]: "active"}
        assert reports[1].kept_apart == len(first[1]) - len(ended)
    finally:
        engine.close()


def test_the_models_zh_change_answers_pass_the_scenarios_profile_checks(tmp_path, server, brain, local_embedder):
    """Exactly what the shared model answered in zh_change (27 November): the job only as where, and
    "no longer true" to every pair. The profile: work is what the user said (程序员), the drink
    changed and the old one is history; the job's line is not ended by the drink."""
    said = {"我在深圳做程序员，平时不喝酒。": [obs("周航在深圳工作。", [1]), obs("周航平时不喝酒。", [1])],
            "最近开始喝红酒了，周末会喝一杯。": [obs("周航开始喝红酒。", [1])]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    brain.judge = lambda p: ["outdated"] * len(p.pairs)
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        for month, text in enumerate(said, start=1):
            engine.record("zh", [user_msg(text, at(1, month=month), name="周航")])
            engine.consolidate("zh")
        profile = engine.profile("zh")
        assert [v.value for v in profile["work"]] == ["深圳做程序员"]
        assert [v.value for v in profile["diet"]] == ["喝红酒"]
        diet = [(v.value, v.current) for v in engine.profile_history("zh", "饮食")]
        assert diet == [("不喝酒", False), ("喝红酒", True)]
        active = {m.content for m in engine.list("zh", types=["observation"], include_expired=False)}
        assert active == {"周航在深圳工作。", "周航开始喝红酒。"}
    finally:
        engine.close()


def test_the_models_own_work_value_gives_way_to_the_job_its_later_observation_states(tmp_path, server, brain,
                                                                                     local_embedder):
    """The shared model's answers in the job_change_and_repeat scenario: a profile value for the
    first job, none for the new one, which only its observation says ("teaches cooking classes")."""
    said = {"I work as a baker in Lyon.": [obs("Omar works as a baker in Lyon.", [1], about="Omar",
                                               profile={"key": "work", "value": "baker in Lyon"})],
            "Big news: I quit the bakery last month and now I teach cooking classes.": [
                obs("Omar quit the bakery last month.", [1], about="Omar", kind="event", time="last month"),
                obs("Omar teaches cooking classes now.", [1], about="Omar")]}
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in said[c]]
    engine = make_engine(tmp_path, server, local_embedder)
    try:
        for month, text in enumerate(said, start=3):
            engine.record("omar", [user_msg(text, at(1, month=month), name="Omar")])
            engine.consolidate("omar")
        work = sorted((v for v in ledger(engine, "omar")[2] if v.key == "work"), key=lambda v: v.valid_from)
        assert [(v.value, v.current) for v in work] == [("baker in Lyon", False), ("teaches cooking classes", True)]
        assert work[0].superseded_by == work[1].id
    finally:
        engine.close()


def test_chinese_places_and_festivals_the_model_left_out_come_from_the_dictionary(tmp_path, server, brain,
                                                                                 local_embedder):
    said = ["我老家在眉山，现在住成都武侯区。", "国庆节打算去青海湖，买了好多东西。", "Paris in May, maybe.",
            "国庆还去青海湖吗？", "我在杭州"]
    proposed = {"我在杭州": [named("杭州", 1, kind="topic")]}  # the model's kind, refined by the dictionary
    brain.extract = lambda p: [{**item, "messages": [n]} for n, _, _, c in p.new for item in proposed.get(c, [])]
    engine = make_engine(tmp_path, server, local_embedder, language="zh")
    try:
        engine.record("xm", [user_msg(text, at(1)) for text in said[:3]])
        engine.consolidate("xm")
        entities, _, _ = ledger(engine, "xm")
        assert sorted(entities) == ["国庆", "成都", "武侯区", "眉山", "青海湖"]
        assert entities["国庆"].kind.value == "topic" and entities["国庆"].aliases == ["国庆节"]
        assert entities["武侯区"].kind.value == "place"  # the dictionary tags it as a person's name
        assert entities["青海湖"].kind.value == "place" and "东西" not in entities and "Paris" not in entities
        engine.record("xm", [user_msg(said[3], at(2))])  # known names are counted at record time
        entities, _, _ = ledger(engine, "xm")
        assert entities["国庆"].mention_count == 2 and entities["青海湖"].mention_count == 2
        engine.record("xm", [user_msg(said[4], at(3))])
        engine.consolidate("xm")
        assert ledger(engine, "xm")[0]["杭州"].kind.value == "place"
    finally:
        engine.close()


def test_a_new_chinese_topic_that_is_only_a_common_word_is_dropped(tmp_path, server, brain, local_embedder):
    said = {"我爸有高血压，周末打羽毛球。": [named("高血压", 1, kind="topic"), named("羽毛球", 1, kind="topic")],
            "清明去医院复查高血压": [named("清明", 1, kind="topic"), named("高血压", 1, kind="object")],
            "羽毛球拍断了": [named("羽毛球", 1, kind="topic")]}
    with said_by_xiaomei(tmp_path, server, brain, local_embedder, said) as engine:
        entities, _, _ = ledger(engine, "xm")
        # 高血压 as an object is the model's call (kept, and its earlier turn found); as a topic it was dropped
        assert sorted(entities) == ["清明", "高血压"]
        assert entities["高血压"].kind.value == "object" and entities["高血压"].mention_count == 2


def test_a_short_name_learnt_later_is_not_found_inside_a_longer_known_one(tmp_path, server, brain, local_embedder):
    """The backfill of a new name's earlier turns matches with every known name, so 华西 (learnt
    from the second turn) is not linked to the first turn, which says 华西医院."""
    said = {"她妈妈是华西医院的护士。": [named("华西医院", 1, kind="organization")],
            "华西那边排队太久了。": [named("华西", 1, kind="organization")]}
    with said_by_xiaomei(tmp_path, server, brain, local_embedder, said) as engine:
        entities, mentions, _ = ledger(engine, "xm")
        linked = {(e.name, m.memory_id) for e in entities.values() for m in mentions if m.entity_id == e.id
                  and m.counted}
        first, second = (turn_id(engine, text, "xm") for text in said)
        assert linked == {("华西医院", first), ("华西", second)}
