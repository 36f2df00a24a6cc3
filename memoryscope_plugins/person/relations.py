"""Words for a relative or a role, alone or in front of a name, in the names a model proposes.

A small model proposes "外婆", "我妈" or "物理老师" as if they were names, and it proposes a name
together with the relation it was said with: "表妹小林" for 周末我和表妹小林去了趟扬州。, "my sister
Ruth" for "My sister Ruth lives here". The first are common nouns (what "my grandma" is in English),
not entities (`relation_or_role`); the second are the name after the relation (`without_relation`):
小林, Ruth (and a place with 老家 after it is the place: 眉山老家 is 眉山). A titled surname
(陈老师, 王医生: `short_forms.ZH_TITLED`) is a name, and so is a relation word with a capital
("Aunt May", "Uncle Bob": how people call them).
"""

from __future__ import annotations

import re

from ..types import EntityKind
from .matching import normalise_name, surname
from .short_forms import ZH_TITLED

ZH_RELATIONS = frozenset("""
    爸 妈 哥 姐 弟 妹 爸爸 妈妈 老爸 老妈 父亲 母亲 爹 娘 爸妈 父母 爷爷 奶奶 外公 外婆 姥爷 姥姥 老爷子
    老太太 哥哥 姐姐 弟弟 妹妹 儿子 女儿 闺女 孩子 孩子们 老公 老婆 丈夫 妻子 爱人 媳妇 对象 男朋友 女朋友
    男友 女友 前男友 前女友 前任 叔叔 阿姨 舅舅 舅妈 姑姑 姑父 伯伯 婶婶 表哥 表姐 表弟 表妹 堂哥 堂姐 堂弟
    堂妹 孙子 孙女 外孙 外孙女 侄子 侄女 家人 岳父 岳母 公公 婆婆 亲戚 同事 老板 领导 上司 经理 主管 室友
    同学 邻居 老师 医生 护士 客户 需求方 甲方 乙方 朋友 闺蜜 网友 队友 教练 学生 病人 房东""".split())
_ZH_OWNER = re.compile("^(?:我们|你们|他们|她们|我|你|您|他|她)的?")
# a role said with what it is of (物理老师, 主治医生, 公司的同事)
_ZH_ROLE = re.compile("(?:老师|医生|大夫|护士|教练|同事|同学|朋友|经理|老板|主任|校长|师傅|领导|邻居|室友|客户)$")
# longest first, so 表妹小林 is 表妹 + 小林 and 妈妈王芳 is not 妈 + 妈王芳
_ZH_LEADING = tuple(sorted(ZH_RELATIONS, key=len, reverse=True))
_HAN = re.compile("[\u4e00-\u9fff]+")
_ZH_HOME = "老家"  # where one is from, said after the place
_ZH_NICKNAME = re.compile("[小老阿][\u4e00-\u9fff]{1,2}")

_EN_PEOPLE = ("partner|wife|husband|girlfriend|boyfriend|fianc[eé]e?|son|daughter|brother|sister|mother|father|"
              "mom|mum|mommy|mummy|mama|dad|daddy|papa|cousin|grandmother|grandfather|grandma|grandpa|granny|"
              "grandson|granddaughter|aunt|auntie|uncle|niece|nephew|stepson|stepdaughter|stepmother|stepfather|"
              "friend|colleague|coworker|co-worker|neighbou?r|boss|roommate|flatmate|classmate|teacher|coach|"
              "therapist|doctor|mentor")
_EN_ANIMALS = "dog|cat|puppy|kitten|rabbit|bunny|parrot|hamster|turtle|horse"
_EN_RELATIONS = f"{_EN_PEOPLE}|{_EN_ANIMALS}"
# lower case only: "Aunt May" and "Uncle Bob" are what people call them
_EN_LEADING = re.compile(rf"(?:(?:my|his|her|their|our|your) )?(?:(?:best|old|little|big|baby|older|younger|"
                         rf"new|twin) )?(?:{_EN_RELATIONS})(?:-in-law)?,? "
                         rf"(?P<name>[A-Z][\w'-]*(?: [A-Z][\w'-]*){{0,3}})")


_EN_RELATION_WORD = re.compile(f"(?:{_EN_RELATIONS})s?", re.IGNORECASE)
# the words just before a name that say who or what it names: "my sister Ruth", "our cat, Miso"
_EN_BEFORE = re.compile(rf"(?:^|\b)(?:(?:my|his|her|their|our|your) )?(?:(?:best|old|little|big|baby|older|"
                        rf"younger|new|twin) )?(?:(?P<person>{_EN_PEOPLE})|(?P<pet>{_EN_ANIMALS}))(?:-in-law)?,? $")


def english_relation_word(word: str) -> bool:
    """Whether an English word, whatever its case, only says a relation or a role ("Mom", "Grandma",
    "Dad", "friends"): what "my grandma" is, not a name. Raises TypeError for a non-str."""
    if not isinstance(word, str):
        raise TypeError(f"word must be a str, got {type(word).__name__}")
    return _EN_RELATION_WORD.fullmatch(word.strip()) is not None


def kind_said_before(text: str) -> EntityKind | None:
    """The kind the relation word that `text` ends with gives the name after it, in English: a
    person after "my sister " or "coach ", a pet after "our cat " or "dog, "; None after anything
    else (relation words in lower case only: "Aunt May" is a name). Raises TypeError for a non-str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found = _EN_BEFORE.search(text[-60:])
    if found is None:
        return None
    return EntityKind.PERSON if found.group("person") else EntityKind.PET


def relation_or_role(name: str) -> bool:
    """Whether a Chinese name is only a word for a relative or a role (外婆, 我妈, 我的外婆, 同事,
    需求方, 物理老师, 主治医生), not a name; a titled surname (陈老师, 王医生) is a name."""
    word = _ZH_OWNER.sub("", normalise_name(name))
    return word in ZH_RELATIONS or (_ZH_ROLE.search(word) is not None and ZH_TITLED.fullmatch(word) is None)


def without_relation(name: str) -> str:
    """The name a relation word is written in front of: 表妹小林 -> 小林, 我妈王芳 -> 王芳, 同事李明 ->
    李明, 客户张总 -> 张总, "my sister Ruth" -> "Ruth", "cousin Xiaolin" -> "Xiaolin"; and a place said with
    老家 after it, 眉山老家 -> 眉山. What follows the
    relation must look like a name: a Chinese surname with one or two characters, 小 / 老 / 阿 with
    one or two, or a titled surname; in English, capitalised words. A one-character relation (妈, 哥)
    counts only after an owner (我妈王芳), so 哥伦比亚 stays whole. Any other name is returned as it is."""
    english = _EN_LEADING.fullmatch(name)
    if english is not None:
        return english.group("name")
    if _HAN.fullmatch(name) is None:
        return name
    if name.endswith(_ZH_HOME) and len(name) - len(_ZH_HOME) >= 2:  # 眉山老家: the place is 眉山
        return name[:-len(_ZH_HOME)]
    owned = _ZH_OWNER.sub("", name)
    for relation in _ZH_LEADING:
        if not owned.startswith(relation) or (len(relation) == 1 and owned == name):
            continue
        rest = owned[len(relation):]
        if _looks_like_a_name(rest):
            return rest
    return name


def _looks_like_a_name(word: str) -> bool:
    if not 2 <= len(word) <= 4:
        return False
    return (surname(word) is not None or _ZH_NICKNAME.fullmatch(word) is not None
            or ZH_TITLED.fullmatch(word) is not None)
