"""`person.record_names`: the names `record` finds in a message without a model (English casing,
Chinese dictionary, relation words and naming phrases), and which of them become new entities."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from memoryscope_plugins.person import record_names
from memoryscope_plugins.person.ledger import ProposedEntity
from memoryscope_plugins.person.matching import NameMatcher
from memoryscope_plugins.person.record_names import FoundName, names_in, new_entities, proposals
from memoryscope_plugins.types import EntityKind
from tests.person.helpers import entity

PERSON, PLACE, ORG = EntityKind.PERSON, EntityKind.PLACE, EntityKind.ORGANIZATION
TOPIC, UNKNOWN, PET = EntityKind.TOPIC, EntityKind.UNKNOWN, EntityKind.PET


@pytest.mark.parametrize(("text", "expected"), [
    # a name right after a relation word: a person, as relations.without_relation reads a model's names
    ("表妹小林去了成都", [("成都", PLACE, None), ("小林", PERSON, None)]),
    ("弟弟林晓东也在家", [("林晓东", PERSON, None)]),
    ("我妈王芳说你好", [("王芳", PERSON, None)]),
    ("同事小张请假了", [("小张", PERSON, None)]),
    # a name given in a naming phrase
    ("他叫周杰，我们都叫他阿杰，在上海", [("上海", PLACE, None), ("周杰", PERSON, None), ("阿杰", PERSON, "周杰")]),
    ("我家那只橘猫，叫橘子，三岁了", [("橘子", UNKNOWN, None)]),
    ("我家狗叫旺财。", [("旺财", PET, None)]),
    ("我女儿叫朵朵。", [("朵朵", PERSON, None)]),
    ("笔名叫“牛顿的苹果”，写了两万字", [("牛顿的苹果", UNKNOWN, None)]),
    # the dictionary's names, with their kinds, and a venue after an organisation
    ("国庆去了华西医院", [("华西医院", ORG, None), ("国庆", TOPIC, None)]),
    ("在奥体中心游泳馆办了卡", [("奥体中心游泳馆", PLACE, None)]),
    # Latin names among Chinese characters, by their casing
    ("天天对着Figma画图", [("Figma", UNKNOWN, None)]),
    ("I met my friend Sara in Lisbon.", [("Sara", PERSON, None), ("Lisbon", UNKNOWN, None)]),
])
def test_names_a_message_writes(text, expected):
    assert [(n.name, n.kind, n.alias_of) for n in names_in(text)] == expected


@pytest.mark.parametrize("text", [
    "我弟小时候很皮",  # 小时候 after a relation word is no name
    "闺女高三能放几天假",  # a school year, not a name
    "我们叫外卖。",  # 叫 here orders food
    "他叫醒我。", "她叫我们过去。", "它叫得很响。",  # pronouns and particles are not in a name
    "叫我晓雯就行",  # the speaker's own name: given, never read
    "我妈说话很快",
    "今天天气不错，我去跑步了。",
    "my friend went to paris",
])
def test_what_is_no_name(text):
    assert names_in(text) == []


def test_names_are_kept_once_and_at_most_a_bounded_number():
    assert [n.name for n in names_in("Boston, then Boston again and BOSTON")] == ["Boston"]
    many = ", ".join(f"Name{chr(65 + i)}x Person{chr(65 + i)}y" for i in range(20))
    assert len(names_in("We met " + many + ".")) == record_names.MAX_NAMES_PER_MESSAGE


def test_proposals_point_at_their_message():
    assert proposals(["Hi!", "我在杭州"]) == [ProposedEntity("杭州", PLACE, None, 1)]


@pytest.mark.parametrize("bad", [None, b"text", 5])
def test_wrong_types_are_refused(bad):
    with pytest.raises(TypeError):
        names_in(bad)
    with pytest.raises(TypeError):
        proposals([bad])
    with pytest.raises(TypeError):
        proposals("a text, not a list")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Ab zZ,.!?-'\"我叫他小林表妹成都医院。，Figma")), max_size=80))
def test_every_name_found_is_written_in_the_message(text):
    for found in names_in(text):
        assert isinstance(found, FoundName) and found.name in text


# -- new_entities: which names become entities ------------------------------------------------------

def _new(texts, known=(), **kwargs):
    return [(e.name, e.kind) for e in new_entities("u", list(known), NameMatcher(known), texts, **kwargs)]


def test_new_names_become_entities_of_their_kind_and_known_ones_stay_as_they_are():
    known = [entity("mel", "Melanie", "Mel"), entity("lxw", "林晓雯")]
    texts = ["Mel and Melanie went to Seattle with Ruth.", "晓雯下周去杭州。"]
    assert _new(texts, known) == [("Seattle", UNKNOWN), ("Ruth", UNKNOWN), ("杭州", PLACE)]
    assert new_entities("u", known, NameMatcher(known), ["Melanie again"]) == []  # nothing new: no entity


def test_a_speakers_short_form_a_greeting_and_a_word_of_a_longer_name_make_no_entity():
    speaker = entity("mel", "Melanie")
    speaker.metadata["speaker_role"] = "assistant"
    potter = entity("hp", "Harry Potter", kind=EntityKind.OBJECT)
    texts = ["My friend Mel is here.", "Hey John! Good to see you.", "Thanks, Sam!", "Potter is great, says Ron."]
    assert _new(texts, [speaker, potter]) == [("Ron", UNKNOWN)]


def test_an_entity_the_user_has_is_never_changed_by_record():
    known = [entity("gq", "国庆", kind=TOPIC)]
    assert _new(["国庆节去青海湖"], known) == [("青海湖", PLACE)]  # 国庆节 would be 国庆's alias: not at record


def test_new_entities_refuses_wrong_types():
    with pytest.raises(TypeError):
        new_entities("u", [], NameMatcher([]), "a text, not a list")
    with pytest.raises(TypeError):
        new_entities("u", ["Melanie"], NameMatcher([]), ["Hi"])
