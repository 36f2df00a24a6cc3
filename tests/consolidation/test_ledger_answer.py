"""The entities and profile values of an extraction answer: what a small model writes there is
parsed or dropped, and never changes which messages the answer gives a verdict on."""

from __future__ import annotations

import json

import pytest

from memoryscope_plugins.consolidation.extract import answer_schema, parse_extraction, salvage_entries
from memoryscope_plugins.consolidation.ledger_answer import (
    MAX_ENTITIES_PER_MESSAGE,
    entity_kind,
    parse_entities,
    parse_profile,
)
from memoryscope_plugins.storage.base import StoredMessage
from memoryscope_plugins.types import Message
from tests.support.consolidation_helpers import at

TEXTS = ["My friend Mel, Melanie really, runs a shop in Boston.", "我同事小王下周去杭州出差。", "Thanks!"]


def numbered(texts=TEXTS) -> list[StoredMessage]:
    return [StoredMessage(id=f"m{i}", user_id="u", agent_id="a", session_id=None,
                          message=Message(role="user", content=text, timestamp=at(1)), seq=i, state="pending",
                          attempts=0) for i, text in enumerate(texts, start=1)]


def entry(n: int, says: str, observations=None, **extra) -> dict:
    return {"n": n, "says": says, "observations": observations if observations is not None else [], **extra}


def names(parsed) -> list[tuple[str, str, str | None, int]]:
    return [(e.name, e.kind, e.alias_of, e.message) for e in parsed.entities]


def test_entities_and_aliases_named_in_the_message_are_kept():
    answer = {"messages": [
        entry(1, "My friend Mel, Melanie really,", entities=[
            {"name": "Mel", "kind": "person", "alias_of": "Melanie"}, {"name": "Melanie", "kind": "person"},
            {"name": "Boston", "kind": "place", "alias_of": None}]),
        entry(2, "我同事小王下周去杭州", entities=[{"name": "小王", "kind": "person"},
                                          {"name": "杭州", "kind": "place"}]),
        entry(3, "Thanks!", entities=[])]}
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {0, 1, 2} and parsed.dropped_entities == 0
    assert names(parsed) == [("Mel", "person", "Melanie", 0), ("Melanie", "person", None, 0),
                             ("Boston", "place", None, 0), ("小王", "person", None, 1), ("杭州", "place", None, 1)]


@pytest.mark.parametrize("value, expected", [
    (None, []),  # null
    ("Mel, Boston", [("Mel", "topic"), ("Boston", "topic")]),  # a string instead of a list
    ({"name": "Boston", "kind": "city"}, [("Boston", "place")]),  # one object instead of a list
    (["Mel", 7, None, {"kind": "person"}, {"name": ["Mel"]}], [("Mel", "topic")]),  # junk items
    ([{"name": "Boston", "kind": "planet"}], [("Boston", "topic")]),  # an unknown kind
    ([{"name": "Mel", "kind": None}], [("Mel", "topic")]),
    (42, []),
])
def test_whatever_the_entities_value_the_verdict_stands(value, expected):
    answer = {"messages": [entry(1, "My friend Mel", [{"content": "Mel runs a shop in Boston.", "about": "Mel"}],
                                 entities=value)]}
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {0} and [i.content for i in parsed.items] == ["Mel runs a shop in Boston."]
    assert [(e.name, e.kind) for e in parsed.entities] == expected


def test_a_missing_entities_key_is_a_verdict_with_no_entities():
    parsed = parse_extraction({"messages": [entry(1, "My friend Mel"), entry(3, "Thanks!")]}, numbered())
    assert parsed.accounted == {0, 2} and parsed.entities == [] and parsed.dropped_entities == 0


def test_names_the_message_does_not_hold_are_dropped():
    answer = {"messages": [entry(1, "My friend Mel", entities=[
        {"name": "Melbourne", "kind": "place"},  # not said
        {"name": "Al", "kind": "person"},  # "Al" is inside "really", not a word of its own
        {"name": "Caroline", "kind": "person"},  # invented
        {"name": "MEL", "kind": "person"},  # said, in another case: kept as the model wrote it
        {"name": "the user", "kind": "person"}])]}
    parsed = parse_extraction(answer, numbered())
    assert [e.name for e in parsed.entities] == ["MEL"] and parsed.dropped_entities == 4


def test_a_name_with_its_relation_is_the_name_the_message_holds():
    """表妹小林 for 小林是我表妹 (the whole is not in the message, the name is)."""
    answer = {"messages": [
        entry(1, "小林是我表妹", entities=[{"name": "表妹小林", "kind": "person"},
                                      {"name": "my sister Ruth", "kind": "person"}]),
        entry(2, "My sister Ruth lives", entities=[{"name": "my sister Ruth", "kind": "person"},
                                                   {"name": "Ru", "kind": "person", "alias_of": "my sister Ruth"}])]}
    parsed = parse_extraction(answer, numbered(["小林是我表妹，她叫我去扬州。",
                                                "My sister Ruth lives here, we call her Ru."]))
    assert names(parsed) == [("小林", "person", None, 0), ("Ruth", "person", None, 1), ("Ru", "person", "Ruth", 1)]
    assert parsed.dropped_entities == 1  # Ruth is not in the first message


def test_another_messages_name_is_not_this_ones():
    answer = {"messages": [entry(3, "Thanks!", entities=[{"name": "Boston", "kind": "place"}])]}
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {2} and parsed.entities == []


def test_a_looping_entity_list_is_kept_once_and_bounded():
    texts = ["I met " + ", ".join(f"Person{i}" for i in range(20)) + " at the party."]
    looping = [{"name": "Person1", "kind": "person"}] * 40 + \
        [{"name": f"Person{i}", "kind": "person"} for i in range(20)]
    parsed = parse_extraction({"messages": [entry(1, "I met", entities=looping)]}, numbered(texts))
    assert parsed.accounted == {0}
    assert len(parsed.entities) == MAX_ENTITIES_PER_MESSAGE
    assert len({e.name for e in parsed.entities}) == MAX_ENTITIES_PER_MESSAGE
    assert parsed.dropped_entities == 60 - MAX_ENTITIES_PER_MESSAGE


def test_huge_names_are_dropped_even_when_the_message_holds_them():
    long_text = "word " * 100
    parsed = parse_entities([{"name": long_text.strip()}, {"name": "a b c d e f g"}, {"name": ""},
                             {"name": "  "}], long_text + " a b c d e f g", 0)
    assert parsed.entities == [] and parsed.dropped == 4


def test_alias_of_the_name_itself_is_no_alias():
    parsed = parse_entities([{"name": "Mel", "alias_of": "mel"}], "Mel is here", 0)
    assert [(e.name, e.alias_of) for e in parsed.entities] == [("Mel", None)]


@pytest.mark.parametrize("kind, expected", [("Person", "person"), ("organisation", "organization"),
                                            ("Location", "place"), ("dog", "pet"), ("城市", "place"),
                                            ("thing", "object"), ("ORGANIZATION", "organization"),
                                            ("spaceship", "topic"), (3, "topic"),
                                            ("unknown", "topic")])  # the ledger's, not the model's to say
def test_kinds_small_models_write_map_to_the_known_ones(kind, expected):
    assert entity_kind(kind) == expected


@pytest.mark.parametrize("value, expected", [
    ({"key": "home", "value": "Boston"}, ("home", "Boston")),
    ({"home": "Boston"}, ("home", "Boston")),  # the one-pair shortcut
    ("home: Boston", ("home", "Boston")),
    ("住处：杭州", ("住处", "杭州")),
    ([None, {"key": "age", "value": 34}], ("age", "34")),
    ({"key": "home", "value": None}, None),
    ({"key": "home", "value": "unknown"}, None),
    ({"key": "", "value": "Boston"}, None),
    ({"key": "home", "value": "x" * 500}, None),  # a paragraph is not a profile value
    ({"key": "k" * 80, "value": "Boston"}, None),
    ({"a": 1, "b": 2}, None),
    ("Boston", None),
    (True, None),
    (None, None),
])
def test_profile_values_are_read_from_what_models_write(value, expected):
    assert parse_profile(value) == expected


def test_profile_values_ride_on_their_observations():
    answer = {"messages": [entry(1, "My friend Mel", [
        {"content": "Mel runs a shop in Boston.", "about": "Mel"},
        {"content": "Anna's friend is Mel.", "about": "Mel", "profile": {"key": "family", "value": "friend Mel"}},
        {"content": "Anna likes Boston.", "profile": "nonsense"}])]}
    parsed = parse_extraction(answer, numbered())
    assert [i.profile for i in parsed.items] == [None, ("family", "friend Mel"), None]


def test_an_answer_cut_off_inside_the_entities_loses_that_entry_only():
    answer = {"messages": [
        entry(1, "My friend Mel, Melanie really,", [{"content": "Mel runs a shop in Boston.", "about": "Mel"}],
              entities=[{"name": "Mel", "kind": "person"}, {"name": "Boston", "kind": "place"}]),
        entry(2, "我同事小王下周去杭州", [{"content": "小王下周去杭州出差。", "about": "小王"}],
              entities=[{"name": "小王", "kind": "person"}, {"name": "杭州", "kind": "place"}])]}
    text = json.dumps(answer, ensure_ascii=False)
    cut = text[:text.index('"杭州", "kind"') + 4]  # in the middle of the second entry's entities
    parsed = parse_extraction(salvage_entries(cut), numbered(), complete=False)
    assert parsed.accounted == {0} and not parsed.complete
    assert [e.name for e in parsed.entities] == ["Mel", "Boston"]  # nothing of the cut-off entry


def test_the_schema_asks_for_entities_and_allows_a_profile():
    schema = answer_schema(numbered(), "en")
    first = schema["properties"]["messages"]["prefixItems"][0]
    assert first["required"] == ["n", "says", "observations", "entities"]
    entities = first["properties"]["entities"]
    assert entities["maxItems"] == MAX_ENTITIES_PER_MESSAGE
    assert set(entities["items"]["properties"]["kind"]["enum"]) == {"person", "place", "organization", "pet",
                                                                   "object", "topic"}
    observation = first["properties"]["observations"]["items"]
    assert "profile" in observation["properties"] and "profile" not in observation["required"]


def test_entities_written_inside_the_observations_are_found():
    answer = {"messages": [entry(1, "My friend Mel", [
        {"content": "Mel runs a shop in Boston.", "about": "Mel",
         "entities": [{"name": "Mel", "kind": "person"}, {"name": "Boston", "kind": "place"}]},
        {"content": "Anna likes Mel.", "entities": "junk"}])]}
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {0} and [e.name for e in parsed.entities] == ["Mel", "Boston"]
    # an entry's own list wins over anything inside its observations
    answer["messages"][0]["entities"] = [{"name": "Melanie", "kind": "person"}]
    assert [e.name for e in parse_extraction(answer, numbered()).entities] == ["Melanie"]


@pytest.mark.parametrize("importance", ["1e999", "-1e999", "NaN", "[3]", "\"high\""])
def test_an_importance_no_integer_can_hold_keeps_the_observation_at_the_default(importance):
    # json.loads reads 1e999 as infinity: int() of it raised OverflowError and failed the whole batch
    answer = json.loads('{"messages": [{"n": 1, "says": "Mel", "observations": [{"content": "Mel runs a shop.", '
                        f'"importance": {importance}}}]}}, {{"n": 2, "says": "Xiao Wang", "observations": []}}]}}')
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {0, 1}
    assert [(i.content, i.importance) for i in parsed.items] == [("Mel runs a shop.", 2)]


@pytest.mark.parametrize("label", ["\u00b2", "9" * 5000, "M" + "9" * 5000, "M0", "M4", "#-1", "1.5"])
def test_a_message_label_that_names_no_message_is_left_out_not_a_crash(label):
    answer = {"messages": [entry(1, "My friend Mel", [{"content": "Mel runs a shop."}]),
                           {"n": label, "says": "?", "observations": [{"content": "Invented."}]}]}
    parsed = parse_extraction(answer, numbered())
    assert parsed.accounted == {0} and [i.content for i in parsed.items] == ["Mel runs a shop."]
