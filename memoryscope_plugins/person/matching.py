"""Finding the known names of a user's entities in a text, without a model (English and Chinese).

The rules, which `NameMatcher.find` follows:

- Every name of an entity counts: its canonical name and its aliases. Names are compared normalised
  (`normalise_name`: case, width and punctuation folded), so a name shorter than two characters once
  normalised ("J", "C++" which is "c"), longer than `MAX_NAME_CHARS` as written, or a lower-case function word
  ("it", "will", "我们") is never matched: it would match everywhere.
- English (and any other non-CJK script) matches whole words only: "Mel" is found in "Mel's" and
  "(Mel)" but not in "Melody", "Mel2" or "Mel-Anne"; a name inside CJK text still matches
  ("我用Figma做设计"). Spaces inside a name match any run of white space.
- Case: a name written with a capital ("Will", "May", "Rose", "iPhone") is matched as written or in
  capitals, so the words "will", "may" and "rose" are not the names; a capitalised name of two or
  more words ("New York") is unambiguous and matches in any case; a lower-case name (a topic:
  "pottery") matches in any case.
- Chinese (a name holding a CJK character) matches as a substring: Chinese has no spaces.
- Overlaps: the longest match wins, then the earliest; a name is not counted inside a longer known
  name ("New York University" is not also "New York"; 王磊磊 is not also 王磊). Matches never overlap.
- A name that two entities share belongs to the entity whose canonical name it is, then to the one
  mentioned more often, then to the smaller id: deterministic.
- A person whose canonical name is a Chinese full name (a common surname and a two-character given
  name: 林晓雯, 欧阳娜娜) is also found by the given name alone (晓雯), as friends call them. Such a
  given name loses to every name an entity holds; two people of the same given name (林晓雯 and
  王晓雯) make it nobody's, and a given name that is also a common word (国庆, 明天) is never used.

The names are compiled once per entity set into three regular expressions built as character tries
(one alternation per node), so a text is scanned once per expression whatever the number of names;
the any-case ones read the lower-cased text. Compiling is the costly part (about 0.15 ms a name):
keep a matcher per entity set.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Iterator

from ..storage.text_analysis import CJK, CJK_STOP_CHARS, STOP_WORDS
from ..types import Entity, EntityKind

#: Names longer than this many characters are not names (a model wrote a sentence); never matched.
#: The same limit holds for every name, alias and profile key a caller writes (`name_rules`).
MAX_NAME_CHARS = 80

_CJK_RANGES = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
# a letter or digit of a script written with spaces (CJK characters are word characters to `re`)
_WORD_CHAR = f"[^\\W{_CJK_RANGES}]"
#: where a name of a script written with spaces may begin and end: not inside one of its words
#: ("Mel" in "Mel's", "(Mel)" and "我和Mel去了", not in "Melody" or "Mel-Anne")
WORD_START = f"(?<!{_WORD_CHAR})(?<!{_WORD_CHAR}-)"
WORD_END = f"(?!{_WORD_CHAR})(?!-{_WORD_CHAR})"
_SPACE = r"\s+"
_SEPARATORS = re.compile(r"[\W_]+")
_CJK_GAP = re.compile(f"(?<=[{_CJK_RANGES}]) (?=[{_CJK_RANGES}])")
_CJK_PRONOUNS = frozenset({"我们", "你们", "他们", "她们", "它们", "自己", "大家", "别人", "人家", "咱们"})


# the common Chinese surnames (the hundred most frequent single ones, the compound ones still in use)
_SURNAMES = frozenset("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶"
                      "程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾"
                      "毛郝龚邵万钱严覃武戴莫孔向汤温柳殷易乔")
_COMPOUND_SURNAMES = ("欧阳", "司马", "诸葛", "上官", "东方", "皇甫", "尉迟", "公孙", "慕容", "令狐", "司徒", "夏侯",
                      "长孙", "宇文", "南宫", "端木")
# given names that are also everyday words: 王国庆 is not in "国庆去大理"
_GIVEN_NAMES_THAT_ARE_WORDS = frozenset({
    "国庆", "建国", "建军", "明天", "今天", "春节", "新年", "元旦", "中秋", "端午", "文化", "学习", "工作", "生活",
    "小时", "天气", "先生", "小姐", "同学", "老师", "中国", "国家", "平安", "快乐", "幸福", "美丽", "发展", "建设",
    "和平", "光明", "世界", "东方", "春天", "夏天", "秋天", "冬天", "海洋", "天天", "一天", "晓得", "红旗",
    "胜利", "解放", "卫东", "向阳", "英雄", "朝阳", "长江", "黄河", "华山", "泰山", "东海", "南海", "北京", "上海",
    "天津", "重庆", "成都", "武汉", "西安", "南京", "杭州", "青岛", "大理", "丽江", "桂林", "三亚", "深圳", "广州"})


def _split_chinese_name(name: str) -> tuple[str, str] | None:
    """(surname, given name) of a Chinese full name: a common surname and one or two characters."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    full = "".join(unicodedata.normalize("NFKC", name).split())
    if not full or not all("\u4e00" <= char <= "\u9fff" for char in full):
        return None
    surname = next((s for s in _COMPOUND_SURNAMES if full.startswith(s)), full[0] if full[0] in _SURNAMES else "")
    given = full[len(surname):]
    return (surname, given) if surname and 1 <= len(given) <= 2 else None


def given_name(name: str) -> str | None:
    """The given name a Chinese full name is called by (林晓雯 -> 晓雯, 欧阳娜娜 -> 娜娜): for a
    common surname followed by two characters; None for any other name, or when the given name is
    also an everyday word (王国庆 -> None)."""
    parts = _split_chinese_name(name)
    if parts is None:
        return None
    given = parts[1]
    if len(given) != 2 or given in _GIVEN_NAMES_THAT_ARE_WORDS or is_function_word(given):
        return None
    return given


def surname(name: str) -> str | None:
    """The surname of a Chinese full name (王磊 -> 王, 欧阳娜娜 -> 欧阳): a common surname followed by
    one or two characters; None for any other name."""
    parts = _split_chinese_name(name)
    return parts[0] if parts else None


#: a common Chinese surname (compound ones first), as a regular expression
SURNAME_PATTERN = "(?:" + "|".join(_COMPOUND_SURNAMES) + "|[" + "".join(sorted(_SURNAMES)) + "])"


def normalise_name(name: str) -> str:
    """The form two names are compared in: NFKC, case-folded, every run of white space and
    punctuation one space, none at the ends, none between two CJK characters.

    "  St. Louis " -> "st louis"; "O'Brien" -> "o brien"; "王 磊" -> "王磊"; "ＭＥＬ" -> "mel".
    Raises TypeError for a non-str."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    folded = _SEPARATORS.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip()
    return _CJK_GAP.sub("", folded)


def said_in(name: str, text: str) -> bool:
    """Whether `text` says `name`, both normalised (`normalise_name`): as a substring for a Chinese
    name, as whole words for any other, where a CJK character beside it is a word's end ("Figma" in
    "我用Figma做设计") and so is punctuation, which normalising makes a space ("Mel" in "Mel-Anne",
    unlike `NameMatcher`). Raises TypeError for a non-str."""
    wanted, folded = normalise_name(name), normalise_name(text)
    if not wanted:
        return False
    if CJK.search(wanted):
        return wanted in folded
    return next(whole_words(re.escape(wanted), folded), None) is not None


_WORD_CHAR_AT = re.compile(_WORD_CHAR)


def _word_char_at(text: str, index: int) -> bool:
    return 0 <= index < len(text) and _WORD_CHAR_AT.match(text, index) is not None


def whole_words(pattern: str, text: str, flags: int = 0) -> Iterator[tuple[int, int]]:
    """The spans where `pattern` (a small regular expression: a name) matches `text` as whole words,
    by the boundaries of `WORD_START` and `WORD_END`, overlapping candidates included. The same
    answer as searching ``WORD_START + pattern + WORD_END``, without compiling those character
    classes for every name (milliseconds each, on the record path)."""
    for found in re.finditer(f"(?=({pattern}))", text, flags):
        start, end = found.span(1)
        if _word_char_at(text, start - 1) or (text[start - 1:start] == "-" and _word_char_at(text, start - 2)):
            continue
        if _word_char_at(text, end) or (text[end:end + 1] == "-" and _word_char_at(text, end + 1)):
            continue
        yield start, end


def is_function_word(name: str) -> bool:
    """Whether `name`, normalised, is a function word or pronoun ("it", "She", "我们", "的了")."""
    folded = normalise_name(name)
    return folded in STOP_WORDS or folded in _CJK_PRONOUNS or all(char in CJK_STOP_CHARS for char in folded)


def usable_name(name: str) -> bool:
    """Whether `name` can be matched at all: at most `MAX_NAME_CHARS` characters, at least 2 letters
    or digits (what `normalise_name` keeps), and not a lower-case function word ("it", "will",
    "我们"; the capitalised name "Will" is usable)."""
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:
        return False
    if len(normalise_name(name).replace(" ", "")) < 2:
        return False
    return not (is_function_word(name) and (CJK.search(name) or name == name.lower()))


def entity_list(entities: Iterable[Entity]) -> list[Entity]:
    """`entities` as a list, checked to hold only `Entity` records (TypeError otherwise)."""
    if isinstance(entities, (str, bytes)) or not hasattr(entities, "__iter__"):
        raise TypeError(f"entities must be an iterable of Entity, got {type(entities).__name__}")
    items = list(entities)
    for item in items:
        if not isinstance(item, Entity):
            raise TypeError(f"entities must hold Entity records, got {type(item).__name__}")
    return items


@dataclass(frozen=True, slots=True)
class NameMatch:
    """One name found in a text: the entity, the known name that matched (the canonical name or an
    alias, as the entity spells it) and where: ``text[start:end]``."""

    entity_id: str
    name: str
    start: int
    end: int


def _trie_pattern(names: Iterable[str], between_words: str) -> str:
    """One regular expression matching any of `names`, longest first at a position, built as a trie
    (each node one alternation) so that its cost does not grow with the number of names."""
    root: dict[str, dict] = {}
    for name in names:
        node = root
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = []
        for char in sorted(c for c in node if c):
            step = between_words if char == " " else re.escape(char)
            branches.append(step + pattern(node[char]))
        if "" in node:
            branches.append("")  # the name may end here: tried last, so longer names win
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return pattern(root)


def _lower(text: str) -> str:
    """`text` in lower case, as long as `text` (the one character whose lower case is two, the
    dotted capital I, is read as "I"), so that offsets in it are offsets in `text`."""
    return text.replace("\u0130", "I").lower()


def _surface_forms(name: str) -> tuple[list[str], list[str]]:
    """The exact-case forms and the any-case forms a Latin-script name is matched in."""
    spaced = " ".join(unicodedata.normalize("NFKC", name).split())
    if spaced == spaced.lower():
        return [], [spaced]
    if " " in spaced:
        return [], [spaced]
    return list(dict.fromkeys([spaced, spaced.upper()])), []


def _names(entities: list[Entity]) -> list[tuple[Entity, int, str]]:
    """Every usable name of `entities` with its rank: 0 a canonical name, 1 an alias, 2 the given
    name of a person's Chinese full name when no other person has the same one (module rules)."""
    named = [(entity, 0 if position == 0 else 1, name) for entity in entities
             for position, name in enumerate(entity.names) if usable_name(name)]
    given: dict[str, list[Entity]] = {}
    for entity in entities:
        short = given_name(entity.name) if entity.kind == EntityKind.PERSON else None
        if short is not None:
            given.setdefault(short, []).append(entity)
    named += [(people[0], 2, short) for short, people in sorted(given.items()) if len(people) == 1]
    return named


class NameMatcher:
    """The known names of a set of entities, compiled once; `find` lists them in a text.

    Build one per entity set (per user, per batch) and reuse it: compiling is the costly part.
    Raises TypeError when `entities` is not an iterable of `Entity`. The rules are the module's."""

    def __init__(self, entities: Iterable[Entity]) -> None:
        items = entity_list(entities)
        self._user_of = {entity.id: entity.user_id for entity in items}
        self._owner: dict[str, tuple[str, str]] = {}  # normalised name -> (entity id, name as spelt)
        ranked: dict[str, tuple[int, int, str]] = {}
        exact: set[str] = set()
        any_case: set[str] = set()
        cjk: set[str] = set()
        for entity, position, name in _names(items):
            key = normalise_name(name)
            claim = (position, -entity.mention_count, entity.id)
            if key not in ranked or claim < ranked[key]:
                ranked[key] = claim
                self._owner[key] = (entity.id, name)
            if CJK.search(name):
                cjk.add(unicodedata.normalize("NFKC", name).replace(" ", ""))
            else:
                case_forms, free_forms = _surface_forms(name)
                exact.update(case_forms)
                any_case.update(free_forms)
        # (pattern, whether it reads the lower-cased text): lower-casing the text is much cheaper
        # than compiling a large pattern with re.IGNORECASE
        self._patterns: list[tuple[re.Pattern[str], bool]] = []
        if exact:
            self._patterns.append((re.compile(f"(?={WORD_START}({_trie_pattern(exact, _SPACE)}){WORD_END})"), False))
        if any_case:
            lowered = {_lower(form) for form in any_case}
            self._patterns.append((re.compile(f"(?={WORD_START}({_trie_pattern(lowered, _SPACE)}){WORD_END})"), True))
        if cjk:
            self._patterns.append((re.compile(f"(?=({_trie_pattern({_lower(form) for form in cjk}, '')}))"), True))

    def __len__(self) -> int:
        """How many distinct names the matcher knows."""
        return len(self._owner)

    def user_of(self, entity_id: str) -> str | None:
        """The user of the entity with id `entity_id`, or None when the matcher does not know it."""
        return self._user_of.get(entity_id)

    def entity_for(self, name: str) -> str | None:
        """The id of the entity known by `name` (compared normalised: "mel", "MEL" and "Mel" alike),
        or None. Raises TypeError for a non-str."""
        owner = self._owner.get(normalise_name(name))
        return owner[0] if owner else None

    def find(self, text: str) -> list[NameMatch]:
        """The known names in `text`, in text order, never overlapping (longest first, then
        earliest). Raises TypeError for a non-str."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        longest: dict[int, int] = {}
        lowered = _lower(text)
        for pattern, reads_lowered in self._patterns:
            for found in pattern.finditer(lowered if reads_lowered else text):
                start, end = found.span(1)
                if end > longest.get(start, start):
                    longest[start] = end
        taken: list[tuple[int, int]] = []
        used = bytearray(len(text))
        for start, end in sorted(longest.items(), key=lambda span: (span[0] - span[1], span[0])):
            if not any(used[start:end]):
                used[start:end] = b"\x01" * (end - start)
                taken.append((start, end))
        matches = []
        for start, end in sorted(taken):
            owner = self._owner.get(normalise_name(lowered[start:end]))
            if owner is not None:
                matches.append(NameMatch(owner[0], owner[1], start, end))
        return matches

    def entities_in(self, text: str) -> set[str]:
        """The ids of the entities `text` names (`find`'s entities)."""
        return {match.entity_id for match in self.find(text)}
