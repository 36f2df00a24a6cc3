"""`person.dictionary_names`: the Chinese place names and festivals proposed without a model."""

from __future__ import annotations

import logging
import sys

import pytest

from memoryscope_plugins.person import dictionary_names
from memoryscope_plugins.person.dictionary_names import DictionaryName, names_in, proposals
from memoryscope_plugins.person.ledger import ProposedEntity
from memoryscope_plugins.types import EntityKind

PLACE, ORG, TOPIC = EntityKind.PLACE, EntityKind.ORGANIZATION, EntityKind.TOPIC


@pytest.mark.parametrize(("text", "expected"), [
    ("我老家在眉山，现在住成都。", [("眉山", None, PLACE), ("成都", None, PLACE)]),
    ("周末去了京都和上海", [("京都", None, PLACE), ("上海", None, PLACE)]),
    ("她在南京大学读书", [("南京大学", None, ORG)]),
    ("国庆节去青海湖", [("青海湖", None, PLACE), ("国庆节", "国庆", TOPIC)]),
    ("新年好！清明回家", [("新年", None, TOPIC), ("清明", None, TOPIC)]),
    ("五一去杭州", [("杭州", None, PLACE), ("五一", None, TOPIC)]),
    ("双11囤了好多猫粮", [("双11", "双十一", TOPIC)]),
    # a place that begins an institution's name is that name (the dictionary splits 华西 | 医院)
    ("她妈妈是华西医院的护士", [("华西医院", None, ORG)]),
    ("住在杭州市第一人民医院旁边", [("杭州市第一人民医院", None, ORG)]),
    ("在成都东站等你，然后去西湖公园", [("成都东站", None, PLACE), ("西湖公园", None, PLACE)]),
    ("华西人民都知道", [("华西", None, PLACE)]),  # no institution after the infix: the place alone
    # a venue after a place or an organisation is that whole name (the dictionary's 河绿道 is the river's greenway)
    ("在奥体中心游泳馆办了卡", [("奥体中心游泳馆", None, PLACE)]),
    ("凤凰山球场的季票", [("凤凰山球场", None, PLACE)]),
    ("沿着江安河绿道走五公里", [("江安河绿道", None, PLACE)]),
    # districts the dictionary tags as person names
    ("我在武侯区一所初中教物理", [("武侯区", None, PLACE)]),
    ("搬到了上海徐汇区", [("上海", None, PLACE), ("徐汇区", None, PLACE)]),
    # eras and languages are topics, whatever the dictionary tags them (三国 is a place to it)
    ("最近在读北宋和三国的历史，唐代的诗", [("北宋", None, TOPIC), ("三国", None, TOPIC), ("唐代", "唐朝", TOPIC)]),
    ("我在学日语，英文也不错", [("日语", None, TOPIC), ("英文", "英语", TOPIC)]),
])
def test_names_a_dictionary_knows(text, expected):
    assert names_in(text) == [DictionaryName(*item) for item in expected]


@pytest.mark.parametrize("text", [
    "买了好多东西，城市太大了",  # everyday words the dictionary tags as places
    "湖边很美",  # one character is never a name here
    "逛了逛古城和古镇",
    "住在老城区，不在新区",  # "the old town", "the new district"
    "刘芳和周杰都来了",  # person names are the model's to propose, not the dictionary's
    "这个用法语气很重",  # 法语 only as letters across two words (用法 | 语气)
    "过年回家，跨年夜看烟花",  # an act, not the festival's name
    "房间号是十五一二",  # 五一 inside a number
    "考了615分，排名251",
    "I moved to Paris for May Day.",  # no Chinese: nothing to look up
    "",
])
def test_what_is_not_proposed(text):
    assert names_in(text) == []


def test_a_name_said_twice_is_proposed_once_and_a_message_gives_at_most_eight():
    assert names_in("成都成都，国庆国庆节") == [
        DictionaryName("成都", None, PLACE), DictionaryName("国庆", None, TOPIC),
        DictionaryName("国庆节", "国庆", TOPIC)]
    many = "、".join(["北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "重庆", "武汉", "西安"])
    assert len(names_in(many)) == dictionary_names.MAX_NAMES_PER_MESSAGE


def test_proposals_point_at_their_message():
    assert proposals(["你好", "我在成都", "国庆快乐"]) == [
        ProposedEntity("成都", PLACE, None, 1), ProposedEntity("国庆", TOPIC, None, 2)]
    assert proposals([]) == []


@pytest.mark.parametrize("bad", [None, 3, b"\xe6\x88\x90\xe9\x83\xbd"])
def test_wrong_types_are_refused(bad):
    with pytest.raises(TypeError):
        names_in(bad)
    with pytest.raises(TypeError):
        proposals([bad])
    with pytest.raises(TypeError):
        proposals("成都")


def test_tagged_words_are_the_dictionarys_words_and_tags():
    assert dictionary_names.tagged_words("表妹小林去了成都") == [
        ("表妹", "n"), ("小林", "nr"), ("去", "v"), ("了", "ul"), ("成都", "ns")]
    with pytest.raises(TypeError):
        dictionary_names.tagged_words(None)


def test_without_rjieba_the_festivals_are_still_found_and_a_warning_says_so_once(caplog):
    dictionary_names._tagger.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as patch, caplog.at_level(logging.WARNING, logger=dictionary_names.__name__):
            patch.setitem(sys.modules, "rjieba", None)  # import rjieba -> ImportError
            assert names_in("国庆去成都") == [DictionaryName("国庆", None, TOPIC)]
            assert names_in("清明去成都") == [DictionaryName("清明", None, TOPIC)]
            assert dictionary_names.tagged_words("清明去成都") == []
        warnings = [r for r in caplog.records if "rjieba" in r.getMessage()]
        assert len(warnings) == 1 and "multilingual" in warnings[0].getMessage()
    finally:
        dictionary_names._tagger.cache_clear()  # rjieba is found again
    assert names_in("国庆去成都")[0] == DictionaryName("成都", None, PLACE)


@pytest.mark.parametrize(("name", "common"), [
    ("高血压", True), ("羽毛球", True), ("游泳", True), ("瑜伽", True),
    ("成都", False), ("国庆", False), ("清明", False), ("北宋", False), ("日语", False), ("野狐", False),
    ("普通话", False), ("民国", False),  # nouns to the dictionary, but a language and an era
    ("苏打水", False),  # the dictionary has it as a name (nr): kept, a known miss of this rule
    ("进口猫粮", False),  # more than one word
    ("LGBTQ", False), ("", False),
])
def test_a_common_word_is_one_the_dictionary_knows_as_no_name(name, common):
    assert dictionary_names.is_common_word(name) is common
