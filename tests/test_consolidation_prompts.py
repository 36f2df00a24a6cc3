"""The prompt sets: they load, their examples obey their own instructions, and users can override them."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from test_consolidation_helpers import OPENAI_CHAT, Brain, FakeModelServer, at, make_engine, user_msg

from memoryscope_plugins.consolidation.event_time import resolve_event_time
from memoryscope_plugins.consolidation.extract import KINDS, REALITIES, RELATIONS, parse_extraction
from memoryscope_plugins.consolidation.prompts import LANGUAGES, clear_cache, load_prompt
from memoryscope_plugins.errors import ConfigError

NEW = re.compile(r"^\[(\d+)\] \[([^\]]+)\] ([^:]+): (.*)$")
EN_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2}) \w{3} (\d{2}):(\d{2})")
ZH_STAMP = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日 周. (\d{2}):(\d{2})")


def stamp_time(text: str) -> datetime:
    match = EN_STAMP.match(text) or ZH_STAMP.match(text)
    assert match, text
    y, m, d, hh, mm = map(int, match.groups())
    return datetime(y, m, d, hh, mm, tzinfo=timezone.utc)


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("name", ["consolidate", "reflect", "chat"])
def test_every_prompt_loads_in_both_languages(name, language):
    prompt = load_prompt(name, language)
    assert prompt.language == language and prompt.system.strip() and prompt.template.strip()
    messages = prompt.messages(user="Anna", agent="assistant", context="", messages="", memories="",
                               observations="", related="", insights="", today="")
    assert [m["role"] for m in messages] == ["system", "user"]
    if name != "chat":
        assert "json" in messages[0]["content"].lower()  # json mode needs the word


@pytest.mark.parametrize("language", LANGUAGES)
def test_consolidation_examples_follow_their_own_instructions(language):
    prompt = load_prompt("consolidate", language)
    assert len(prompt.examples) >= 2
    seen_relations, seen_realities = set(), set()
    for example in prompt.examples:
        lines = example["input"].splitlines()
        new = [NEW.match(line) for line in lines if NEW.match(line)]
        memories = [line.split(" ", 1)[0] for line in lines if re.match(r"^M\d+ ", line)]
        raw = json.loads(example["output"])
        assert set(raw) == {"observations"}
        for item in raw["observations"]:
            # every key of the schema, and only those
            assert set(item) == {"content", "about", "kind", "messages", "reality", "time", "date", "relation",
                                 "memory", "importance"}
            assert item["kind"] in KINDS and item["reality"] in REALITIES and item["relation"] in RELATIONS
            assert all(1 <= n <= len(new) for n in item["messages"])
            assert (item["memory"] is None) == (item["relation"] == "new")
            if item["memory"] is not None:
                assert item["memory"] in memories
            assert item["content"] == item["content"].strip() and item["content"][0] != item["content"][0].lower() \
                or language == "zh"
            if item["time"] is not None:  # the words are in the message, the date is right
                sources = [new[n - 1] for n in item["messages"]]
                said = next(m for m in sources if item["time"] in m.group(4))
                when = resolve_event_time(item["time"], item["date"], stamp_time(said.group(2)))
                assert when is not None and when.source == "rule+llm", item
            else:
                assert item["date"] is None
            seen_relations.add(item["relation"])
            seen_realities.add(item["reality"])
        parsed = parse_extraction(raw, len(new), len(memories))
        assert len(parsed) == len(raw["observations"])
    # the examples show every decision the instructions describe
    assert seen_relations == set(RELATIONS)
    assert {"real", "fiction"} <= seen_realities
    # small talk in the examples is not extracted
    for example in prompt.examples:
        for line in example["input"].splitlines():
            if any(word in line for word in ("thanks!", "谢谢")):
                number = int(NEW.match(line).group(1))
                assert all(number not in item["messages"] for item in json.loads(example["output"])["observations"])


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
