"""Chinese names a dictionary knows, found in a message without a model.

Consolidation's model proposes the entities a message names (`consolidation.ledger_answer`). A small
model often proposes none for a Chinese message that plainly names a city or a holiday (我住在成都,
国庆去了青海湖): on the labelled Chinese turns of `bench/data` it left out 成都, 武侯区, 上海, 青海湖 and
国庆 (see docs/entities.md). This module proposes, for the same consolidation step and with no extra
call, the names a dictionary and fixed lists know:

- **places and organisations**: the words jieba's dictionary tags as place names (``ns``: 成都, 青海湖,
  京都) or organisation names (``nt``: 南京大学), through `rjieba` (jieba's segmenter and dictionary,
  compiled; the ``multilingual`` extra), and the districts it tags as person names (武侯区, 徐汇区: a
  word of three characters or more that ends in 区 or 县). The dictionary gives one tag per word, so some everyday
  words carry a place tag (东西 "thing", 城市 "city", 入门); those are listed in `_EVERYDAY` and never
  proposed. One character is never a name here (湖, 美). A place name that begins the name of a
  hospital, school, company, park or station (华西医院, 眉山人民医院, 西湖公园) gives that whole name
  instead, as the dictionary splits it into the place and the common word, and so does an
  organisation or place followed by a venue (奥体中心游泳馆, 凤凰山球场, 江安河绿道: the dictionary's 河绿道
  is the river's greenway);
- **historical eras and languages** (topics: 北宋, 唐朝 with 唐代 as its alias, 日语, 英语 with 英文), a fixed
  list matched against the dictionary's words, as the dictionary tags them as times, common nouns or
  even places (三国);
- **named festivals** (topics): the festival names the time parser dates (`timeparse.rules_zh.FESTIVALS`:
  春节, 清明节, 国庆, 五一...) and 新年, each as one entity per festival whose other names are its
  aliases (国庆节 is 国庆). Words that say an act or a day rather than the festival (过年, 跨年, 大年三十)
  are left out, and so is a festival name inside a number (十五一).

The same dictionary tells a common noun from a name: `is_common_word` (高血压 "high blood pressure",
羽毛球 "badminton" are words the dictionary knows as plain nouns, verbs or adjectives), which
consolidation uses to drop a new *topic* the model proposes that is only such a word, as it drops an
English topic written in lower case only. Festival, era and language names are never common words
here (清明 is also an adjective to the dictionary, 普通话 a noun).

Each name is proposed only for the message that holds it as written; `person.ledger.plan_new_entities`
checks it like any proposal. Without `rjieba` installed only the festivals are proposed (a warning
says so once). Pure functions: no store, no model.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

from ..timeparse.rules_zh import FESTIVALS, NUMERALS, inside_number
from ..types import EntityKind
from .ledger import ProposedEntity

logger = logging.getLogger(__name__)

class DictionaryName(NamedTuple):
    """A name a message holds as written, the name of the entity it is another name of (国庆 for
    国庆节) or None, and its kind."""

    name: str
    alias_of: str | None
    kind: EntityKind


MAX_NAMES_PER_MESSAGE = 8
MAX_NAME_CHARS = 12
_TAG_KINDS = {"ns": EntityKind.PLACE, "nt": EntityKind.ORGANIZATION}
_HAN_CHAR = r"[\u3400-\u4dbf\u4e00-\u9fff]"
_HAN = re.compile(_HAN_CHAR)
_CJK_WORD = re.compile(_HAN_CHAR + "+")
# everyday words jieba's dictionary tags as places: what they mean in a conversation is not a place
_EVERYDAY = frozenset({
    "东西", "城市", "上山", "下山", "入门", "太多", "太大", "海鲜", "中考", "花海", "六楼", "南北", "东南", "西北",
    "中外", "山水", "山区", "海边", "湖边", "江边", "河边", "大海", "海外", "外国", "各国", "全球", "世界", "天下",
    "乡下", "城里", "市区", "郊区", "农村", "城乡", "山上", "山下", "山顶", "顿顿", "大门", "天堂", "人间", "江湖",
    "大陆", "内地", "中部", "东部", "西部", "南部", "北部", "北方", "南方", "本市", "全市", "全省", "全县", "古城",
    "古镇", "老城区", "新城区", "新区",
})
# the dictionary tags some districts as person names (武侯区, 徐汇区); a person's name does not end in 区 or 县
_DISTRICT_SUFFIXES = ("区", "县")
# a place name followed by one of these is the name of what it says (华西医院, 眉山人民医院, 西湖公园), not the place
_INSTITUTIONS = {
    **dict.fromkeys(("医院", "大学", "学院", "中学", "小学", "初中", "高中", "幼儿园", "公司", "银行", "集团",
                     "研究所", "研究院", "图书馆", "博物馆", "体育馆"), EntityKind.ORGANIZATION),
    **dict.fromkeys(("公园", "机场", "火车站", "东站", "西站", "南站", "北站", "广场", "景区", "湿地", "古城", "古镇",
                     "球场", "体育场", "游泳馆", "绿道", "步行街"), EntityKind.PLACE),
}
# what may stand between the place and the institution (杭州市第一人民医院)
_INSTITUTION_INFIX = frozenset({"人民", "中心", "第一", "第二", "第三", "第四", "第五", "第六", "第七", "第八", "第九",
                                "市", "区", "县", "省"})
# festival words that name an act or a day, not the festival (过年 "celebrate the new year")
_NOT_FESTIVAL_NAMES = frozenset({"过年", "跨年", "大年三十", "大年初一", "正月初一", "十一长假", "十一假期"})
_MORE_FESTIVALS = {"新年": "new_year"}
# the dictionary's tags of everyday words: nouns, verbs, adjectives, adverbs, idioms (not nr / ns / nt / nz, t, m)
_COMMON_TAGS = frozenset({"n", "v", "vn", "vd", "a", "an", "ad", "d", "i", "l"})


def _festival_names() -> dict[str, str]:
    """Each festival's name (its shortest form, first listed on a tie) by every form that names it."""
    forms: dict[str, list[str]] = {}
    for form, key in {**FESTIVALS, **_MORE_FESTIVALS}.items():
        if form not in _NOT_FESTIVAL_NAMES:
            forms.setdefault(key, []).append(form)
    return {form: min(names, key=len) for names in forms.values() for form in names}


_FESTIVAL_NAME = _festival_names()
_FESTIVAL_PATTERN = re.compile("|".join(re.escape(form) for form in sorted(_FESTIVAL_NAME, key=len, reverse=True)))


def _named_topics(*groups: Sequence[str]) -> dict[str, str]:
    """Each group's first form (the entity's name) by every form in the group."""
    return {form: group[0] for group in groups for form in group}


# historical eras and languages: named topics the dictionary tags as times, nouns or even places (三国, 西汉);
# matched as whole words only, so 用法语气 ("usage, tone") is not French
_TOPIC_WORD = _named_topics(
    ("先秦",), ("秦朝", "秦代"), ("汉朝", "汉代"), ("西汉",), ("东汉",), ("三国",), ("西晋",), ("东晋",), ("魏晋",),
    ("南北朝",), ("隋朝", "隋代"), ("唐朝", "唐代"), ("北宋",), ("南宋",), ("宋朝", "宋代"), ("元朝", "元代"),
    ("明朝", "明代"), ("清朝", "清代"), ("民国",),
    ("中文", "汉语"), ("普通话",), ("粤语",), ("英语", "英文"), ("日语", "日文"), ("韩语", "韩文"), ("法语", "法文"),
    ("德语", "德文"), ("俄语", "俄文"), ("西班牙语",), ("意大利语",), ("葡萄牙语",), ("阿拉伯语",), ("拉丁语",),
    ("泰语",), ("越南语",), ("希腊语",), ("荷兰语",))


@lru_cache(maxsize=1)
def _tagger() -> Callable[[str], list[tuple[str, str]]] | None:
    """`rjieba.tag` (a text's words with their part-of-speech tags), or None (with one warning) when
    rjieba is not installed."""
    try:
        import rjieba
    except ImportError:
        logger.warning("rjieba is not installed (pip install 'memoryscope-plugins[multilingual]'): Chinese place "
                       "names the model leaves out are not added to the entity ledger")
        return None
    return rjieba.tag


def tagged_words(text: str) -> list[tuple[str, str]]:
    """`text`'s words with jieba's part-of-speech tags (``("小林", "nr")``), or none without
    rjieba (a warning says so once). Raises TypeError for a text that is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    tagger = _tagger()
    return [] if tagger is None else tagger(text)


def _festivals(text: str) -> list[DictionaryName]:
    found: list[DictionaryName] = []
    for match in _FESTIVAL_PATTERN.finditer(text):
        form = match.group()
        if any(char in NUMERALS for char in form) and inside_number(text, match.start(), match.end()):
            continue  # why: 五一 in 十五一二 is a number, not Labour Day
        name = _FESTIVAL_NAME[form]
        found.append(DictionaryName(name, None, EntityKind.TOPIC) if name == form
                     else DictionaryName(form, name, EntityKind.TOPIC))
    return found


def _institution_word(word: str) -> EntityKind | None:
    """The kind of an institution or venue word (医院, 球场), also with one character before it that
    the dictionary joined to it (江安 + 河绿道: the river's greenway); None for any other word."""
    if word in _INSTITUTIONS:
        return _INSTITUTIONS[word]
    return _INSTITUTIONS.get(word[1:]) if len(word) >= 3 else None


def _institution(words: Sequence[tuple[str, str]], start: int) -> tuple[str, EntityKind, int] | None:
    """The institution or venue a place or organisation name at ``words[start]`` begins (华西 + 医院,
    奥体中心 + 游泳馆), its kind and the index after it; None when the name stands alone."""
    parts = [words[start][0]]
    for index in range(start + 1, min(start + 4, len(words))):
        word = words[index][0]
        kind = _institution_word(word)
        if kind is not None:
            return "".join(parts) + word, kind, index + 1
        if word not in _INSTITUTION_INFIX:
            return None
        parts.append(word)
    return None


def _tagged(text: str) -> list[DictionaryName]:
    words = tagged_words(text)
    found: list[DictionaryName] = []
    index = 0
    while index < len(words):
        word, tag = words[index]
        if word in _TOPIC_WORD:
            name = _TOPIC_WORD[word]
            found.append(DictionaryName(word, None if name == word else name, EntityKind.TOPIC))
            index += 1
            continue
        kind = _TAG_KINDS.get(tag)
        if tag == "nr" and len(word) >= 3 and word.endswith(_DISTRICT_SUFFIXES):
            kind = EntityKind.PLACE
        whole = _institution(words, index) if kind in (EntityKind.PLACE, EntityKind.ORGANIZATION) else None
        if whole is not None:
            name, kind, index = whole
            if len(name) <= MAX_NAME_CHARS:
                found.append(DictionaryName(name, None, kind))
            continue
        if (kind is not None and 2 <= len(word) <= MAX_NAME_CHARS and _CJK_WORD.fullmatch(word)
                and word not in _EVERYDAY):
            found.append(DictionaryName(word, None, kind))
        index += 1
    return found


def names_in(text: str) -> list[DictionaryName]:
    """The dictionary names ``text`` holds, each once (places, organisations, eras and languages in text
    order, then festivals); at most `MAX_NAMES_PER_MESSAGE`. A text without Chinese characters has none.
    Raises TypeError for a text that is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not _HAN.search(text):
        return []
    seen: set[str] = set()
    out: list[DictionaryName] = []
    for found in [*_tagged(text), *_festivals(text)]:
        if found.name not in seen:
            seen.add(found.name)
            out.append(found)
    return out[:MAX_NAMES_PER_MESSAGE]


def proposals(texts: Sequence[str]) -> list[ProposedEntity]:
    """`names_in` each of a batch's message texts, as ledger proposals (``message_index`` into
    ``texts``). Raises TypeError when ``texts`` is not a sequence of str."""
    if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
        raise TypeError("texts must be a sequence of str")
    return [ProposedEntity(name=name, kind=kind, alias_of=alias_of, message_index=index)
            for index, text in enumerate(texts) for name, alias_of, kind in names_in(text)]


def is_common_word(name: str) -> bool:
    """Whether ``name`` (Chinese characters only) is one word jieba's dictionary knows as a common
    noun, verb, adjective or idiom (高血压, 羽毛球), not as a name, a time or a number, and is no
    festival's, era's or language's name. False without rjieba, and for anything else."""
    if (not isinstance(name, str) or not _CJK_WORD.fullmatch(name) or name in _FESTIVAL_NAME
            or name in _TOPIC_WORD):
        return False
    tagger = _tagger()
    if tagger is None:
        return False
    words = tagger(name)
    return len(words) == 1 and words[0][1] in _COMMON_TAGS

