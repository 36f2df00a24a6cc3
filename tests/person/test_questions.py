"""entity_question: the entity a question asks about, English and Chinese."""

from __future__ import annotations

import pytest

from memoryscope_plugins.person import NameMatcher, entity_question
from memoryscope_plugins.types import EntityKind
from tests.person.helpers import entity

MATCHER = NameMatcher([entity("mel", "Melanie", "Mel"), entity("car", "Caroline"),
                       entity("wl", "王磊", "小王"), entity("cd", "成都", kind=EntityKind.PLACE),
                       entity("ny", "New York", kind=EntityKind.PLACE), entity("will", "Will"),
                       entity("lxw", "林晓雯")])


@pytest.mark.parametrize(("query", "expected"), [
    ("Who is Mel?", "mel"), ("who's Caroline", "car"), ("Who was Melanie", "mel"),
    ("What do you know about Caroline?", "car"), ("what do you remember about Mel?", "mel"),
    ("Tell me about Caroline.", "car"), ("Tell me more about Mel", "mel"), ("Can you tell me about New York?", "ny"),
    ("Tell me about Melanie's family.", "mel"), ("How is Mel's family doing?", "mel"),
    ("What is Caroline's job?", "car"), ("Do you know who Will is?", "will"), ("What about Mel?", "mel"),
    ("who is mel?", "mel"), ("tell me about caroline", "car"), ("what do you know about new york?", "ny"),
    ("谁是王磊？", "wl"), ("王磊是谁", "wl"), ("小王是谁？", "wl"), ("介绍一下小王", "wl"), ("介绍一下成都吧", "cd"),
    ("关于王磊你知道什么？", "wl"), ("说说成都", "cd"), ("王磊是做什么的？", "wl"), ("小王最近怎么样", "wl"),
    ("你了解王磊吗？", "wl"), ("你对小王了解多少", "wl"), ("王磊的家人", "wl"), ("谁是Mel？", "mel"),
    ("介绍一下Caroline", "car"), ("介绍一下晓雯", "lxw"), ("晓雯是谁？", "lxw"),
])
def test_questions_about_an_entity(query, expected):
    assert entity_question(query, MATCHER) == expected


@pytest.mark.parametrize("query", [
    "What did Mel say about the trip?", "When did Caroline go to New York?", "Who is the best painter?",
    "Tell me about the weather", "who will come to the party?", "What do you know about Bob?",
    "王磊昨天去哪了？", "成都的天气好吗", "谁是你最好的朋友", "介绍一下你自己", "", "?", "Who is", "谁是",
    "Mel", "Who is Melody?",
])
def test_other_questions_are_not_entity_questions(query):
    assert entity_question(query, MATCHER) is None


def test_the_first_entity_asked_about_wins():
    assert entity_question("Tell me about Mel and Caroline", MATCHER) == "mel"


def test_an_empty_matcher_knows_no_entity():
    assert entity_question("Who is Mel?", NameMatcher([])) is None


def test_hostile_input():
    with pytest.raises(TypeError):
        entity_question(None, MATCHER)
    with pytest.raises(TypeError):
        entity_question("Who is Mel?", [entity("mel", "Mel")])
    assert entity_question("Who is Mel? " + "x" * 5000, MATCHER) is None
    assert entity_question("who is \x00mel\udc80?", MATCHER) == "mel"  # controls fold like punctuation
    assert entity_question("Who is " + "(" * 1000 + "Mel", MATCHER) == "mel"
