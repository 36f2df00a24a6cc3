"""Profile values an observation states in so many words, read without a model.

Small models fill the extraction's optional ``profile`` field rarely (a 1.5B model: one value in
eleven messages of the profile scenarios) while their observations say it plainly: "Priya moved to
Glasgow.", "孙悦住在南京。". When the model proposes no value, consolidation reads the common keys
from the observation and its source message with these patterns: home, hometown, work, pets,
family and diet, in English and Chinese. In the user's own message a bare relative is theirs
(闺女陈思语今年高三). A cue counts only when its subject is the user (their name, or the
first person in their own message: never "my sister lives in Paris", 我妹妹在医院当护士) and its
value is written in the observation itself, so a value rests on the memory it is sourced to.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .matching import SURNAME_PATTERN

_RELATIONS_EN = ("partner|wife|husband|girlfriend|boyfriend|fianc[eé]e?|son|daughter|brother|sister|mother|father|"
                 "mom|mum|dad|cousin|grandmother|grandfather|grandma|grandpa|aunt|uncle|niece|nephew")
_PETS_EN = "cat|dog|kitten|puppy|rabbit|bunny|parrot|hamster|turtle|tortoise|guinea pig|bird|horse"
_NAME_EN = r"[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,3}"
_NOT_A_PERSON_EN = r"(?!(?:his|her|my|me|him|them|us|their|our|your|himself|herself)\b)"  # teaches her son
_FOODS_EN = "alcohol|meat|pork|beef|fish|dairy|gluten|sugar|coffee|wine|beer|eggs"
_RELATIONS_ZH = ("丈夫|妻子|老公|老婆|爱人|媳妇|男朋友|女朋友|未婚夫|未婚妻|儿子|女儿|闺女|哥哥|姐姐|弟弟|妹妹|"
                 "表妹|表姐|表哥|表弟|堂妹|堂姐|堂哥|堂弟|爸爸|妈妈|父亲|母亲|爷爷|奶奶|外公|外婆|姥爷|姥姥")
_PETS_ZH = "小?猫|小?狗|猫咪|狗狗|兔子|鹦鹉|仓鼠|乌龟"
_HAN = "\u4e00-\u9fff"
_HAN_NOT_LE = f"(?:(?!了)[{_HAN}])"  # 吃了一碗面 is a meal, not a habit
# what may follow "我" and still be the user acting (not 我妹妹, 我的朋友, 我们)
_NOT_SELF_ZH = f"(?!的|们|{_RELATIONS_ZH}|家|朋友|闺蜜|同事|同学|室友|邻居|老板|领导|客户|对象)"
_NOT_A_NAME_ZH = "(?![不没也在很都还会去来说要是喜爱想今明昨现刚已正最每常经一])"
# words after a relative that are not their name (孙悦的爸爸老家在眉山: his home town, not a 老家)
_NOT_THEIR_NAME_ZH = "(?!老家|家里|家乡|那边|这边|公司|学校|单位|医院|老师|老板|同学|同事)"
_CLAUSE_ZH = re.compile("[，,。；;！!？?\n]")
_SENTENCE_ZH = re.compile("[。！!？?\n]")
# where a habit, a home or a name ends: 吃素是为了减肥 is the habit 吃素
_ENDS_ZH = "(?=了|$|是为|为了|因为)"
# a Chinese name as a relative is called by: a surname and one or two characters, or 小 / 老 / 阿 and one
_NAME_ZH = f"(?:{SURNAME_PATTERN}[{_HAN}]{{1,2}}?|[小老阿][{_HAN}]{{1,2}}?)"
# what follows a relative's name when the clause goes on about them (女儿小满今年三岁, 弟弟林晓东也在家)
_AFTER_NAME_ZH = "(?=也|今年|现在|已经|明年|去年|还|都|刚|正在|从|在|上|读|要|会|每)"
# where one teaches (在武侯区一所初中教物理): teaching somewhere else (在家教孩子) is no job
_SCHOOLS_ZH = "学校|小学|中学|初中|高中|大学|学院|幼儿园|培训机构|培训班|补习班|机构"
# "是…人" words that say what kind of person, not where from (外地人, 好人)
_NOT_A_PLACE_ZH = frozenset({"外地", "本地", "当地", "外国", "城里", "乡下", "年轻", "老实", "自己", "普通", "文化",
                             "有钱", "聪明", "明白", "内向", "外向", "急性", "热心", "爽快"})
_WORK_WHERE = "work@where"  # a work value that names only where (在深圳工作)


@lru_cache(maxsize=512)
def _english(name: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    subject = rf"(?:{re.escape(name)}|I)" if name else "I"
    owner = rf"(?:{re.escape(name)}'s|[Mm]y)" if name else "[Mm]y"
    return (
        ("home", re.compile(rf"\b{subject} (?:now |currently |just |recently )?(?:live|lives|living|am living|is "
                            r"living|moved|have moved|has moved|am moving|is moving|relocated|settled)(?: back)? "
                            rf"(?:in|to) (?:the city of )?(?P<v>{_NAME_EN})")),
        # "I'm from Sweden", "Caroline moved from Sweden", "I grew up in Leeds": where the user is from
        ("hometown", re.compile(rf"\b{subject}(?: am|'m| is| was) (?:originally )?from (?:the )?(?P<v>{_NAME_EN})")),
        ("hometown", re.compile(rf"\b{subject} (?:grew up|was born|moved here|moved) (?:in|from) (?:the )?"
                                rf"(?P<v>{_NAME_EN})")),
        ("work", re.compile(rf"\b{subject} (?:now |currently )?(?:work|works|am working|is working) as (?:an? )?"
                            r"(?P<v>[a-z][a-z -]{1,40}?)(?= at | for | in |[.,;!]|$)")),
        ("work", re.compile(rf"\b{subject} (?:now |currently )?(?:work|works|am working|is working) (?:at|for) "
                            rf"(?:the )?(?P<v>{_NAME_EN})")),
        ("pets", re.compile(rf"\b{subject} (?:have|has|adopted|got|own|owns|have got|has got) an? (?:new )?"
                            rf"(?:{_PETS_EN}) (?:called|named) (?P<v>{_NAME_EN})")),
        ("pets", re.compile(rf"\b{owner} (?:{_PETS_EN})(?:,)? (?:is )?(?:called |named )?(?P<v>{_NAME_EN})")),
        ("family", re.compile(rf"\b{owner} (?P<rel>{_RELATIONS_EN})(?:,)? (?:is )?(?:called |named )?"
                              rf"(?P<v>{_NAME_EN})")),
        ("work", re.compile(rf"\b{subject} (?:now |currently )?(?P<v>(?:teach|teaches|is teaching|am teaching) "
                            rf"{_NOT_A_PERSON_EN}[a-z][a-z -]{{1,40}}?)(?= now\b| at | for | in |[.,;!]|$)")),
        ("diet", re.compile(rf"\b{subject} (?:am|is|'m) (?:a |now a |now )?(?P<v>vegetarian|vegan|pescatarian)\b")),
        ("diet", re.compile(rf"\b{subject} (?:now |currently )?(?P<v>(?:does not|doesn't|do not|don't|no longer) "
                            rf"(?:drinks?|eats?) (?:{_FOODS_EN}))\b")),
    )


@lru_cache(maxsize=512)
def _chinese(name: str, own_words: bool) -> tuple[tuple[str, re.Pattern[str], bool], ...]:
    """The Chinese cues: (key, pattern, owned); an owned pattern names whose the value is (我老公,
    孙悦的表妹, 我老家; in the user's own words also a bare 闺女 or 老家), so its clause is the user's."""
    subject = rf"(?:{re.escape(name)}|我{_NOT_SELF_ZH})" if name else f"我{_NOT_SELF_ZH}"
    owner = rf"(?:{re.escape(name)}的|我的?)" if name else "我的?"
    if own_words:  # the user's own message: a bare 闺女 or 老家 is theirs (闺女陈思语今年高三)
        owner = f"(?:{owner})?"
    when = "(?:现在|目前|如今|已经|刚|最近|上个月|去年|今年)*"
    return (
        ("home", re.compile(rf"^{subject}{when}(?:住在|搬到了?|搬去了?|搬家到|定居在|定居)(?P<v>[{_HAN}]{{2,8}}?)"
                            f"(?=了|的|$)"), False),
        # 陈志强是成都人, 我来自温州, 我老家在眉山: where the user is from, beside where they live now
        ("hometown", re.compile(rf"^{subject}(?:是|也是)(?P<v>(?![个一这那])[{_HAN}]{{2,6}}?)人$"), False),
        ("hometown", re.compile(rf"^{subject}{when}来自(?P<v>[{_HAN}]{{2,8}}?)(?=的|$)"), False),
        ("hometown", re.compile(rf"^{owner}老家(?:是|在)(?P<v>[{_HAN}]{{2,8}}?)(?=的|$)"), True),
        ("work", re.compile(rf"^(?:{subject})?{when}在(?:一家|一个|一所|一间)?(?P<v>[^，。]{{2,20}}?"
                            f"(?:当|做|任|担任)[{_HAN}A-Za-z]{{1,10}}?)(?=了|$)"), False),
        ("work", re.compile(rf"^(?:{subject})?{when}在(?P<v>[^，。]{{0,16}}?(?:{_SCHOOLS_ZH})教"
                            f"[{_HAN}A-Za-z]{{1,10}}?)(?=了|$)"), False),
        # "在深圳工作" names where, not what: the value keeps the whole phrase, and gives way to what
        (_WORK_WHERE, re.compile(rf"^(?:{subject})?{when}(?P<v>在(?:一家|一个|一所|一间)?[{_HAN}A-Za-z]{{2,20}}?"
                            f"(?:工作|上班))"), False),
        ("pets", re.compile(rf"(?:养了?|有)(?:一只|只|一条|条)?(?:{_PETS_ZH})(?:，)?(?:叫|名叫|名字叫)"
                            f"(?P<v>[{_HAN}A-Za-z]{{1,6}})"), False),
        # eating and drinking habits (不喝酒, 吃素, 戒了咖啡, 开始喝红酒): a plain 吃/喝 only as a habit
        ("diet", re.compile(rf"^{subject}{when}(?:平时|一般|一直)?(?P<v>吃素|是素食者|(?:不|不再|很少|从不|只)(?:吃|喝)"
                            rf"{_HAN_NOT_LE}{{0,4}}?|戒了?{_HAN_NOT_LE}{{1,3}}?){_ENDS_ZH}"), False),
        ("diet", re.compile(rf"^{subject}{when}(?:开始|平时|一般|经常|每天)(?:会)?(?P<v>(?:吃|喝){_HAN_NOT_LE}{{1,4}}?)"
                            f"{_ENDS_ZH}"), False),
        # 妹妹是小林 / 妹妹叫小林 name her; 妹妹小林 only when no verb or time follows (妹妹不喝酒, 妹妹今天)
        ("family", re.compile(rf"^{owner}(?P<rel>{_RELATIONS_ZH})(?:(?:是|叫)|{_NOT_A_NAME_ZH}){_NOT_THEIR_NAME_ZH}"
                              f"(?P<v>[{_HAN}]{{2,3}}?)(?=$|是|在|住|叫)"), True),
        # 弟弟林晓东也在家, 女儿小满今年三岁: only a name-shaped word, since more may follow it
        ("family", re.compile(rf"^{owner}(?P<rel>{_RELATIONS_ZH}){_NOT_THEIR_NAME_ZH}(?P<v>{_NAME_ZH})"
                              f"{_AFTER_NAME_ZH}"), True),
    )


def _values(text: str, name: str, language: str, own_words: bool = False) -> list[tuple[str, str, bool]]:
    """``(key, value, named)``: ``named`` when the clause says whose it is (the user's name or 我);
    a clause without a subject (在上海做后端程序员) may be about whoever the sentence was about."""
    found: list[tuple[str, str, bool]] = []
    if language == "zh":
        user = re.compile(rf"(?:{re.escape(name)}(?!的)|我{_NOT_SELF_ZH})" if name else f"我{_NOT_SELF_ZH}")
        for clause, named in _clauses(text, user):
            for key, pattern, owned in _chinese(name, own_words):
                match = pattern.search(clause)
                if match is None:
                    continue
                value = match.group("v")
                if key == "hometown" and value in _NOT_A_PLACE_ZH:
                    continue
                if key == "family":
                    value = f"{value}（{match.group('rel')}）"
                if value:
                    found.append((key, value, named or owned))
        return found
    for key, pattern in _english(name):
        for match in pattern.finditer(text):
            value = match.group("v").strip()
            if key == "family":
                value = f"{value} ({match.group('rel')})"
            found.append((key, value, True))
    return found


def _clauses(text: str, user: re.Pattern[str]) -> list[tuple[str, bool]]:
    """A Chinese text's clauses, each with whether the user is its subject: it opens with them, or
    it has no subject of its own and follows, in the same sentence, a clause that opens with them
    (我住在南京，在一家出版社当编辑). The clause after 我们都叫他阿杰 or 她是我大学室友 is not theirs."""
    out: list[tuple[str, bool]] = []
    for sentence in _SENTENCE_ZH.split(text):
        previous = False
        for clause in _CLAUSE_ZH.split(sentence):
            clause = clause.strip()
            opens = user.match(clause) is not None
            out.append((clause, opens or previous))
            previous = opens
    return out


def _about_the_user(observation: str, name: str) -> bool:
    """Whether the observation's subject is the user: it opens with their name, not their
    possession (孙悦在深圳工作。, not 孙悦的闺蜜小满在杭州做小学老师。)."""
    text = observation.strip()
    return bool(name) and text.startswith(name) and not text[len(name):].startswith(("的", "'s", "’s"))


_NEGATION = re.compile(r"\b(?:not|no longer|never)\b|n't\b|不|没|戒|很少", re.IGNORECASE)


def negated(value: str) -> bool:
    """Whether a value says the user does not do something ("doesn't drink alcohol", 不喝酒, 戒了咖啡)."""
    return _NEGATION.search(value) is not None


def core(value: str) -> str:
    """A cue's value without the relation it names ("Dev (partner)" -> "Dev")."""
    return value.split(" (", 1)[0].split("（", 1)[0]


def stated(observation: str, message: str, user_name: str | None, language: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs the observation states about the user, read from the observation
    (its subject the user's name or the first person) and from its source message (the user's
    own words, first person); each value is written in the observation. At most one per key.
    One exception: where the observation only says where the user works (孙悦在深圳工作。) and the
    message says what they do there in so many words (我在深圳做程序员), the work is the message's."""
    name = (user_name or "").strip()
    from_message = _values(message, name, language, own_words=True)
    about_the_user = _about_the_user(observation, name)
    chosen: dict[str, str] = {}
    for key, value, named in [*_values(observation, name, language), *from_message]:
        if key not in chosen and core(value) and core(value) in observation and (named or about_the_user):
            chosen[key] = value
    if _WORK_WHERE in chosen:
        where = chosen.pop(_WORK_WHERE)
        chosen.setdefault("work", _what_at(where, from_message) or where)
    return list(chosen.items())


def _what_at(where: str, from_message: list[tuple[str, str, bool]]) -> str | None:
    """The work the user's own message says they do (its cues, `from_message`) at the place a
    where-only value names ("深圳做程序员" for "在深圳工作" from "我在深圳做程序员"), or None."""
    place = where.removeprefix("在").removesuffix("工作").removesuffix("上班")
    for key, value, _named in from_message:
        if key == "work" and len(place) >= 2 and place in value:
            return value
    return None
