"""A relation word alone (外婆, 物理老师) is no name; before a name (表妹小林, "my sister Ruth") it is taken off."""

from __future__ import annotations

import pytest

from memoryscope_plugins.person.relations import (
    english_relation_word,
    kind_said_before,
    relation_or_role,
    without_relation,
)
from memoryscope_plugins.types import EntityKind


@pytest.mark.parametrize(("proposed", "name"), [
    ("表妹小林", "小林"),  # what the shared model proposed for 周末我和表妹小林去了趟扬州。
    ("我的表妹小林", "小林"),
    ("妈妈王芳", "王芳"),  # 妈妈 as a whole, not 妈 + 妈王芳
    ("我妈王芳", "王芳"),
    ("我哥李强", "李强"),
    ("同事李明", "李明"),
    ("女儿陈思语", "陈思语"),
    ("朋友阿杰", "阿杰"),
    ("客户张总", "张总"),  # a titled surname after the relation
    ("老婆欧阳娜娜", "欧阳娜娜"),
    ("my sister Ruth", "Ruth"),
    ("cousin Xiaolin", "Xiaolin"),
    ("my best friend Jake", "Jake"),
    ("our cat Miso", "Miso"),
    ("sister-in-law Ana Lima", "Ana Lima"),
    ("眉山老家", "眉山"),  # the shared model's proposal for 他住在眉山老家
])
def test_a_relation_in_front_of_a_name_is_taken_off(proposed, name):
    assert without_relation(proposed) == name


@pytest.mark.parametrize("proposed", [
    "哥伦比亚",  # a one-character relation counts only after an owner (我哥)
    "孙子兵法",  # 兵法 does not look like a name
    "学生会主席", "老师傅", "外婆家", "表妹", "妹妹", "我的外婆",  # nothing that looks like a name follows
    "王芳", "陈老师", "小林",
    "Aunt May", "Uncle Bob",  # capitalised: what people call them
    "my sister", "my friend jake",  # no name, or one in lower case (dropped later as a common noun)
    "London", "Sister Act", "", "   ", "老家", "回老家",
])
def test_anything_else_stays_as_it_is(proposed):
    assert without_relation(proposed) == proposed


@pytest.mark.parametrize(("word", "expected"), [
    ("外婆", True), ("我妈", True), ("我的外婆", True), ("同事", True), ("需求方", True),
    ("物理老师", True), ("主治医生", True),
    ("陈老师", False), ("王医生", False), ("小林", False), ("外婆家", False), ("成都", False),
])
def test_a_relative_or_role_is_no_name_but_a_titled_surname_is(word, expected):
    assert relation_or_role(word) is expected


@pytest.mark.parametrize(("word", "expected"), [
    ("Mom", True), ("Grandma", True), ("dad", True), ("Friends", True), ("COUSIN", True),
    ("Momo", False), ("Ruth", False), ("Aunt May", False), ("", False),
])
def test_an_english_relation_word_alone_is_no_name(word, expected):
    assert english_relation_word(word) is expected


@pytest.mark.parametrize(("before", "kind"), [
    ("I met my sister ", EntityKind.PERSON), ("coach ", EntityKind.PERSON), ("our cat, ", EntityKind.PET),
    ("my best friend ", EntityKind.PERSON), ("the ", None), ("My Sister ", None), ("a sister act ", None), ("", None),
])
def test_the_relation_word_before_a_name_says_its_kind(before, kind):
    assert kind_said_before(before) is kind


def test_the_english_relation_rules_refuse_wrong_types():
    with pytest.raises(TypeError):
        english_relation_word(None)
    with pytest.raises(TypeError):
        kind_said_before(3)
