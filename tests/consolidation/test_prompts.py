"""The prompt sets: they load, their examples obey their own instructions, and users can override them."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest

from memoryscope_plugins.consolidation.event_time import resolve_event_time
from memoryscope_plugins.consolidation.extract import KINDS, REALITIES, answer_schema, opening, parse_extraction
from memoryscope_plugins.consolidation.judge import ANSWER_SCHEMA, parse_still_true
from memoryscope_plugins.consolidation.ledger_answer import ENTITY_KINDS, parse_profile
from memoryscope_plugins.consolidation.prompts import LANGUAGES, clear_cache, load_prompt
from memoryscope_plugins.consolidation.wording import is_first_person
from memoryscope_plugins.errors import ConfigError
from memoryscope_plugins.storage.base import StoredMessage
from memoryscope_plugins.types import Message
from tests.support.consolidation_helpers import OPENAI_CHAT, Brain, FakeModelServer, at, make_engine, user_msg

NEW = re.compile(r"^#(\d+) \[([^\]]+)\] ([^:]+): (.*)$")
EN_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2}) \w{3} (\d{2}):(\d{2})")
ZH_STAMP = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日 周. (\d{2}):(\d{2})")


def stamp_time(text: str) -> datetime:
    match = EN_STAMP.match(text) or ZH_STAMP.match(text)
    assert match, text
    y, m, d, hh, mm = map(int, match.groups())
    return datetime(y, m, d, hh, mm, tzinfo=timezone.utc)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", ["consolidate", "judge", "reflect", "chat"])
def test_every_prompt_loads_in_both_languages(name, language):
    prompt = load_prompt(name, language)
    assert prompt.language == language and prompt.system.strip() and prompt.template.strip()
    messages = prompt.messages(user="Anna", agent="assistant", context="", messages="", memories="",
                               observations="", related="", insights="", today="", pairs="", count="1")
    assert [m["role"] for m in messages] == ["system", "user"]
    if name != "chat":
        assert "json" in messages[0]["content"].lower()  # json mode needs the word
        # the fixed part names no user: it is the same for every call, so endpoints reuse its cache
        assert "Anna" not in messages[0]["content"] and "$" not in messages[0]["content"]


def _stored(number: int, content: str, stamp: datetime) -> StoredMessage:
    return StoredMessage(id=f"m{number}", user_id="u", agent_id="assistant", session_id=None,
                         message=Message(role="user", content=content, timestamp=stamp), seq=number,
                         state="pending", attempts=0)


@pytest.mark.parametrize("language", LANGUAGES)
def test_consolidation_examples_follow_their_own_instructions(language):
    prompt = load_prompt("consolidate", language)
    assert len(prompt.examples) >= 2
    seen_realities, seen_empty, seen_profiles, seen_aliases = set(), 0, 0, 0
    for example in prompt.examples:
        lines = example["input"].splitlines()
        new = [NEW.match(line) for line in lines if NEW.match(line)]
        numbered = [_stored(int(m.group(1)), m.group(4), stamp_time(m.group(2))) for m in new]
        raw = json.loads(example["output"])
        assert set(raw) == {"messages"}
        # one entry per numbered message, in order, quoting its opening as the schema fixes it
        assert [e["n"] for e in raw["messages"]] == list(range(1, len(new) + 1))
        assert [e["says"] for e in raw["messages"]] == [opening(m.message.content, language) for m in numbered]
        for entry, message in zip(raw["messages"], new):
            seen_empty += not entry["observations"]
            # every entity is named in its message as written, with a kind the schema allows
            for named in entry["entities"]:
                assert named["name"] in message.group(4) and named["kind"] in ENTITY_KINDS
                seen_aliases += "alias_of" in named
            for item in entry["observations"]:
                assert set(item) - {"profile"} == {"content", "about", "kind", "reality", "time", "date",
                                                   "importance"}
                if "profile" in item:  # only real facts get a profile value, a short one
                    assert item["reality"] == "real" and parse_profile(item["profile"]) is not None
                    seen_profiles += 1
                assert item["kind"] in KINDS and item["reality"] in REALITIES
                assert not is_first_person(item["content"], language)
                if item["time"] is not None:  # the words are in the message, the date is right
                    assert item["time"] in message.group(4)
                    when = resolve_event_time(item["time"], item["date"], stamp_time(message.group(2)))
                    assert when is not None and when.source == "rule+llm", item
                else:
                    assert item["date"] is None
                seen_realities.add(item["reality"])
        parsed = parse_extraction(raw, numbered, language=language)
        assert parsed.accounted == set(range(len(new)))
        assert len(parsed.items) == sum(len(e["observations"]) for e in raw["messages"])
        assert len(parsed.entities) == sum(len(e["entities"]) for e in raw["messages"])
        assert parsed.dropped_entities == 0
        # the answer fits the schema the endpoint is given
        schema = answer_schema(numbered, language)
        assert len(schema["properties"]["messages"]["prefixItems"]) == len(new)
    assert {"real", "hypothetical"} <= seen_realities and seen_empty  # small talk gets an empty list
    assert seen_profiles and seen_aliases  # the optional fields are shown once, not everywhere


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_contradiction_question_has_no_example_to_copy(language):
    # a small model copies a worked example's answer instead of judging: the question has none
    prompt = load_prompt("judge", language)
    assert prompt.examples == ()
    text = prompt.user_message(user="Anna", old="Anna is vegetarian.", old_date="2026-03-02",
                               new="Anna eats fish again.", new_date="2026-05-13")
    assert "Anna is vegetarian." in text and "Anna eats fish again." in text
    assert set(ANSWER_SCHEMA["properties"]) == {"still_true"}
    assert parse_still_true({"still_true": False}) is False and parse_still_true({"still_true": "yes"}) is True
    assert parse_still_true({"verdict": "outdated"}) is None and parse_still_true([]) is None


# Words of the shipped benchmark scenarios and of the tests' own cases: the prompts' examples must
# not rehearse them (a model that copies an example would pass a check it did not earn).
SCENARIO_WORDS = ("vegetarian", "fish", "novel", "pilot", "Friday", "coffee", "espresso", "green tea", "penicillin",
                  "chemistry", "driving", "daughter", "Valencia", "castle", "millionaire", "vet", "Galway", "cycl",
                  "bus", "swim", "knee", "Biscuit", "retriever", "piano", "Tuesday", "Monday", "jazz", "Maria",
                  "Jonas", "nurse", "shellfish", "lottery", "Easter", "素", "鱼", "咖啡", "成都", "牙", "芒果", "猫",
                  "苏州", "新加坡", "地铁", "奶茶", "银行", "彩票", "冰岛", "建筑", "广州", "周会", "粤语")


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", ["consolidate", "judge", "reflect"])
def test_examples_do_not_rehearse_the_scenarios(name, language):
    prompt = load_prompt(name, language)
    text = " ".join(f"{e['input']} {e['output']}" for e in prompt.examples) + prompt.instructions
    assert [word for word in SCENARIO_WORDS if word.lower() in text.lower()] == []


@pytest.mark.parametrize("language", LANGUAGES)
def test_reflection_examples_follow_their_own_instructions(language):
    prompt = load_prompt("reflect", language)
    separator = prompt.text("subject_separator")
    assert separator
    for example in prompt.examples:
        lines = example["input"].splitlines()
        observations = {line.split(" ", 1)[0] for line in lines if re.match(r"^O\d+ ", line)}
        insights = {line.split(" ", 1)[0] for line in lines if re.match(r"^I\d+ ", line)}
        expired = {line.split(" ", 1)[0] for line in lines
                   if line.startswith("O") and prompt.text("no_longer_true") in line}
        raw = json.loads(example["output"])
        updated = set()
        for item in raw["insights"]:
            assert set(item) == {"subject", "value", "sources", "update", "merge"}
            assert item["sources"] and set(item["sources"]) <= observations
            assert item["update"] is None or item["update"] in insights
            assert set(item["merge"]) <= insights and item["update"] not in item["merge"]
            updated.add(item["update"])
        # an insight resting on an expired observation is updated, as instruction 4 says
        stale = {line.split(" ", 1)[0] for line in lines if re.match(r"^I\d+ ", line)
                 and any(label in line for label in expired)}
        assert stale <= updated | {m for item in raw["insights"] for m in item["merge"]}


def test_a_prompts_dir_overrides_single_keys(tmp_path, local_embedder):
    folder = tmp_path / "prompts" / "en"
    folder.mkdir(parents=True)
    (folder / "consolidate.yaml").write_text("system: |\n  You are the memory keeper of ACME Corp. Answer in JSON.\n",
                                             encoding="utf-8")
    clear_cache()
    prompt = load_prompt("consolidate", "en", tmp_path / "prompts")
    assert prompt.system.startswith("You are the memory keeper of ACME Corp.")
    assert prompt.instructions == load_prompt("consolidate", "en").instructions
    assert prompt.source.endswith("consolidate.yaml")
    with FakeModelServer() as server:
        brain = Brain()
        server.route(OPENAI_CHAT, brain)
        engine = make_engine(tmp_path, server, local_embedder, prompts_dir=str(tmp_path / "prompts"))
        try:
            engine.record("anna", [user_msg("I'm vegetarian.", at(1))])
            engine.consolidate("anna")
            assert brain.prompts[0].system.startswith("You are the memory keeper of ACME Corp.")
        finally:
            engine.close()


@pytest.mark.parametrize("content, match", [
    ("system: [unclosed", "not valid YAML"),
    ("template: ''\n", "required key"),
    ("- a list\n", "mapping"),
    ("examples: [1, 2]\n", "examples"),
])
def test_broken_overrides_are_reported_clearly(tmp_path, content, match):
    folder = tmp_path / "zh"
    folder.mkdir()
    (folder / "reflect.yaml").write_text(content, encoding="utf-8")
    clear_cache()
    with pytest.raises(ConfigError, match=match):
        load_prompt("reflect", "zh", tmp_path)


def test_unknown_language_or_prompt(tmp_path):
    with pytest.raises(ConfigError):
        load_prompt("consolidate", "fr")
    with pytest.raises(ConfigError):
        load_prompt("nonexistent", "en")
