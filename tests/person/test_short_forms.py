"""Short forms a speaker is addressed by (`person.short_forms`): which words address someone, whose
short form a word is, and the aliases recording adds."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from memoryscope_plugins.person.short_forms import (
    addressed,
    addressed_aliases,
    greeted,
    short_form_candidates,
    short_form_owner,
)
from tests.person.helpers import T0, entity

LATER = T0 + timedelta(days=1)


def speaker(entity_id: str, name: str, *aliases: str, role: str = "assistant"):
    return dataclasses.replace(entity(entity_id, name, *aliases), metadata={"speaker_role": role})


@pytest.mark.parametrize(("text", "expected"), [
    ("Hey Mel!", True), ("Nice one, Mel!", True), ("Mel, look at this.", True), ("Thanks Mel", True),
    ("Hi Mel, how are you?", True), ("Great.\nMel!", True),
    ("My friend Mel runs a shop.", False), ("I saw Mel.", False), ("Melanie!", False), ("Mellow, Mel-like.", False),
])
def test_addressed_is_a_vocative_only(text, expected):
    assert addressed("Mel", text) is expected


@pytest.mark.parametrize(("word", "text", "expected"), [
    ("陈老师", "陈老师好！今天学校那边还顺利吗？", True), ("陈老师", "好的陈老师，有空常来聊。", True),
    ("陈老师", "晚安陈老师。", True), ("陈老师", "新年好陈老师！", True),
    ("陈老师", "元宵节快乐陈老师！吃的什么馅？", True),
    ("陈老师", "陈老师，发生什么了？", True), ("小王", "谢谢你小王。", True), ("老陈", "嗯，老陈！", True),
    ("陈老师", "哇！陈老师还有这个才华。", False), ("陈老师", "我和陈老师去了成都。", False),
    ("陈老师", "签约作家陈老师！", False), ("小王", "小王子很好看。", False), ("老陈", "叫我老陈就行。", False),
])
def test_addressed_in_chinese(word, text, expected):
    assert addressed(word, text) is expected


def test_short_form_candidates_are_names_written_as_names():
    found = short_form_candidates("Hey Mel! 陈老师好，小王和老陈也来了。Mel again")
    assert found == ["Hey", "Mel", "陈老师", "小王", "老陈"]
    assert short_form_candidates("老师好，小姐姐，老爷子，hello") == []  # no surname in them


@pytest.mark.parametrize(("word", "names", "owner"), [
    ("陈老师", ["陈志强", "小智"], "陈志强"), ("老陈", ["陈志强", "小智"], "陈志强"), ("小王", ["王磊"], "王磊"),
    ("王总", ["王磊"], "王磊"), ("欧阳老师", ["欧阳娜娜"], "欧阳娜娜"),
    ("陈老师", ["陈志强", "陈思语"], None),  # two it could be
    ("小林", ["小林", "林晓雯"], None),  # a speaker goes by it in full
    ("陈老师", ["小智", "Chen"], None),  # no Chinese full name of that surname
    ("李老师", ["陈志强"], None),
])
def test_short_form_owner_in_chinese(word, names, owner):
    assert short_form_owner(word, names) == owner


@pytest.mark.parametrize(("word", "names", "owner"), [
    ("Mel", ["Caroline", "Melanie"], "Melanie"),
    ("Mel", ["Caroline", "Melanie Brooks"], "Melanie Brooks"),
    ("Mel", ["Melanie", "Melissa"], None),  # two it could be
    ("Mel", ["Mel Gibson", "Melanie"], None),  # someone goes by it in full
    ("Mo", ["Monica"], None),  # too short
    ("mel", ["Melanie"], None),  # not written as a name
    ("Lanie", ["Melanie"], None),  # does not begin the name
    ("Bro", ["Caroline", "Brooks Mel"], "Brooks Mel"),  # the first name only
])
def test_short_form_owner(word, names, owner):
    assert short_form_owner(word, names) == owner


def test_addressed_aliases_gives_each_speaker_their_short_form_once():
    caroline, melanie = speaker("c", "Caroline", role="user"), speaker("m", "Melanie")
    said = [("Caroline", "Hey Mel!"), ("Caroline", "Nice one, Mel!"), ("Melanie", "Thanks, Caro!")]
    changed = addressed_aliases([caroline, melanie], said, LATER)
    assert sorted((e.name, e.aliases, e.updated_at) for e in changed) == [
        ("Caroline", ["Caro"], LATER), ("Melanie", ["Mel"], LATER)]
    assert melanie.aliases == [] and caroline.aliases == []  # inputs untouched


@pytest.mark.parametrize("said", [
    [("Melanie", "Hey Mel!")],  # a speaker calling herself so
    [("Caroline", "My friend Mel runs a shop.")],
    [("Caroline", "Hey Mel!")],  # Mel is known already (below)
])
def test_addressed_aliases_adds_nothing_without_a_clear_link(said):
    known = [speaker("m", "Melanie"), speaker("c", "Caroline", role="user")]
    if said == [("Caroline", "Hey Mel!")]:
        known.append(entity("x", "Mel"))
    assert addressed_aliases(known, said, LATER) == []


def test_addressed_aliases_in_chinese():
    chen, assistant = speaker("c", "陈志强", role="user"), speaker("z", "小智")
    said = [("陈志强", "叫我老陈就行，陈志强。"), ("小智", "陈老师好！教了二十年物理了。"), ("小智", "晚安，陈老师。")]
    assert [(e.name, e.aliases) for e in addressed_aliases([chen, assistant], said, LATER)] == [("陈志强", ["陈老师"])]
    # his own words do not alias him, nor a title said of him in passing
    passing = [("陈志强", "陈老师，你好。"), ("小智", "我和陈老师聊过。")]
    assert addressed_aliases([chen, assistant], passing, LATER) == []


def test_only_speakers_gain_short_forms():
    assert addressed_aliases([entity("m", "Melanie")], [("Caroline", "Hey Mel!")], LATER) == []


def test_addressed_aliases_checks_its_input():
    with pytest.raises(TypeError):
        addressed_aliases(["Melanie"], [], LATER)
    with pytest.raises(TypeError):
        addressed_aliases([speaker("m", "Melanie")], [("Caroline", None)], LATER)
    with pytest.raises(TypeError):
        addressed_aliases([speaker("m", "Melanie")], [(3, "Hey Mel!")], LATER)


@pytest.mark.parametrize(("word", "text", "expected"), [
    ("Mel", "Hey Mel! Good to see you", True), ("Mell", "Thanks, Mell! I", True), ("Caroline", "Wow Caroline.", True),
    ("Mel", "Mel, look at this!", True), ("Mel", "Great. Mel! Come here", True),
    ("Sweden", "my home country, Sweden. She gave it", False),  # a sentence ending on a name after a comma
    ("Jean", "this amazing woman, Jean, who", False), ("Mel", "I saw Mel yesterday.", False),
])
def test_greeted_is_the_narrow_vocative(word, text, expected):
    assert greeted(word, text) is expected
