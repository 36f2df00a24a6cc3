"""`person.cased_names`: English proper names read from the message's own casing, without a model."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from memoryscope_plugins.person.cased_names import cased_names
from memoryscope_plugins.types import EntityKind

UNKNOWN, PERSON, PET = EntityKind.UNKNOWN, EntityKind.PERSON, EntityKind.PET
ORG, PLACE = EntityKind.ORGANIZATION, EntityKind.PLACE


def names(text: str) -> list[tuple[str, EntityKind]]:
    return [(found.name, found.kind) for found in cased_names(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("I went to a LGBTQ support group yesterday.", [("LGBTQ", UNKNOWN)]),
    ("LGBTQ+ folks helped me a lot", [("LGBTQ+", UNKNOWN)]),  # a capital inside: a name even first
    ("I love Harry Potter and Game of Thrones!", [("Harry Potter", UNKNOWN), ("Game of Thrones", UNKNOWN)]),
    ("Brands like Nike and Under Armour.", [("Nike", UNKNOWN), ("Under Armour", UNKNOWN)]),
    ("The kids' Nike shoes are new.", [("Nike", UNKNOWN)]),  # an apostrophe, not an opening quote
    ("I love The Beatles.", [("Beatles", UNKNOWN)]),  # the article is not the name
    ("The Minnesota Wolves won again.", [("Minnesota Wolves", UNKNOWN)]),  # two words: a name at the start too
    ('I loved "Becoming Nicole" by Amy Ellis Nutt.', [("Becoming Nicole", UNKNOWN), ("Amy Ellis Nutt", UNKNOWN)]),
    ('Just finished "A Dance with Dragons" today.', [("A Dance with Dragons", UNKNOWN)]),  # a title in quotes
    ("J.K. Rowling and Dr. Lee met.", [("J.K. Rowling", UNKNOWN), ("Dr. Lee", UNKNOWN)]),
    ("He plays Civilization VI and Kustom K-200A.", [("Civilization VI", UNKNOWN), ("Kustom K-200A", UNKNOWN)]),
    ("Ed Sheeran's song", [("Ed Sheeran", UNKNOWN)]),  # the possessive off
    ("We saw St. Mary's Hospital and the University of Leeds.", [("St. Mary's Hospital", ORG),
                                                                 ("University of Leeds", ORG)]),
    ("Then Lake Tahoe and Pine Street.", [("Lake Tahoe", PLACE), ("Pine Street", PLACE)]),
    ("I'll bring my sister Ruth and our cat Miso.", [("Ruth", PERSON), ("Miso", PET)]),
    ("Luna and Oliver! They are sweet.", [("Luna", UNKNOWN), ("Oliver", UNKNOWN)]),  # joined to a name
    ("Anthony and I went out.", [("Anthony", PERSON)]),  # someone said with "and I"
    ("Yep John, I agree.", [("John", UNKNOWN)]),  # the opener is not the name
    ("Adding NYC to my list", [("NYC", UNKNOWN)]),
    ("Happy Thanksgiving, Sam!", [("Thanksgiving", UNKNOWN), ("Sam", UNKNOWN)]),
    ("We all call Melanie Mel.", [("Melanie", UNKNOWN), ("Mel", UNKNOWN)]),  # a name and its short form: two
    ("我在杭州当UI设计师，天天对着Figma画图。", [("Figma", UNKNOWN)]),  # a Latin name among Chinese characters
    ("最近开始在Duolingo上学日语了", [("Duolingo", UNKNOWN)]),
])
def test_names_the_casing_says_are_taken(text, expected):
    assert names(text) == expected


@pytest.mark.parametrize("text", [
    "Pottery class was fun.",  # capitalised only because it starts the sentence
    "So good! Pottery class was fun.",
    "Family is important - Even though mine is small.",  # a clause after a dash starts with a capital
    "i went to paris with mel",  # no capital: the message says nothing about case
    "OMG I LOVE THIS SO MUCH",  # capitals throughout say nothing either
    "My Trip To Paris Was Great",  # nor does title case
    "Last Friday I went out, and on Sunday too. Next May maybe.",  # days, months and their words
    "I told Mom and Grandma about it, and Dad too.",  # a relation word alone
    "Wow, Congrats on the deal!",  # an interjection
    "We watched TV on the PC, OK? Then an App, lol. AI and RPGs.",  # common abbreviations
    "Take vitamin B12 and Omega-3 daily, run a 5K.",  # a word with a digit alone
    "I went to the Hospital.",  # a head word alone
    "我刚下载这个App，对AI很好奇",  # capitals in Chinese text: abbreviations
    "看中了比亚迪秦PLUS DM-i。",  # capitals against a Chinese character: part of a Chinese name
    "Hi, I'm here and I've been busy.",  # the pronoun I
    "I study every day, even Sundays. AC is a must.",  # a weekday in the plural; air conditioning
    "I started carrying a bottle.\\nB: That's great.",  # a written-out line break: no word "nB"
    "",
])
def test_what_the_casing_does_not_say_is_no_name(text):
    assert names(text) == []


def test_a_word_of_a_longer_name_in_the_message_is_not_a_name_of_its_own():
    text = "It was like a Harry Potter movie! Have you been to the real Potter places?"
    assert names(text) == [("Harry Potter", UNKNOWN)]


def test_cased_names_refuses_a_text_that_is_not_a_str():
    with pytest.raises(TypeError):
        cased_names(None)
    with pytest.raises(TypeError):
        cased_names(b"Harry Potter")


@given(st.text(max_size=200))
def test_every_name_is_written_in_the_text(text):
    for found in cased_names(text):
        assert found.name and found.name in text and 0 <= found.start < len(text)
