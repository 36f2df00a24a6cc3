"""Cue checks on the model's observations: small talk, made-up content, other people's doings,
and corrections, read from the words of the message (no LLM).

A 1.5B model marks a novel's plot "real", keeps "Oskar says the weather is nice", writes the
boss's habit as the user's, and leaves "Monday" and "Tuesday, not Monday" both standing. These
checks catch what the words show; the model's own verdicts still apply on top:

* `small_talk`: an observation made only of greetings, thanks, farewells and weather words;
* `framing`: the clause an observation comes from is made up ("In my new book the detective is...",
  "If I were a millionaire I'd...", 假如我中了彩票...): it is not the user's fact, unless the
  observation only says the real activity ("Lucía is writing a new book"). The other way round, an
  observation the model marked made-up, written about the user from a clause in the first person
  without such a cue ("For real though, I live in Valencia"), is the user's fact;
  and a clause whose subject is someone else ("my boss ... he rides to work") never makes the
  user its subject ("Ben rides to work");
* `correction_wins`: a message that corrects itself ("sorry, Tuesday, not Monday", 哦不对，是周四):
  of two values, the one said last is the one meant;
* `corrected`: an observation that kept the value a message corrected within itself ("周会是每周三上午"
  from "每周三上午，哦不对，是每周四上午") gets the value said after the correction instead.
"""

from __future__ import annotations

import re
from typing import Literal

from ..storage.text_analysis import analyse
from .time_scope import SENTENCE_END, clauses

_CJK = re.compile(r"[\u3400-\u9fff]")

_SMALL_TALK_WORDS_EN = (
    "hi hello hey morning evening night good great nice lovely beautiful fine well day today weather sunny sunshine "
    "warm cold rain raining says said say tells told thanks thank thanked greet greets greeted greeting wish wishes "
    "wished bye goodbye farewell later see assistant user chat chatting talk talking haha lol ok okay again how "
    "doing is not")
_SMALL_TALK_ZH = re.compile(
    r"天气|今天|真|很|好|不错|晴|热|冷|谢谢|感谢|再见|拜拜|你好|早上好|晚上好|晚安|哈哈|嗯|问候|打招呼|道别|告别|助手|用户|说|表示|了|的|啊|呀|吧")
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)

# a story, a dream, role-play: the clause it stands in is made up
_STORY_EN = re.compile(
    r"\b(?:in my (?:new |next |latest |current |own )?(?:novel|book|story|stories|script|screenplay|game|poem|comic|"
    r"fanfic|fan fiction|dream)|(?:my|the) (?:novel|book|story)'s|the (?:main )?(?:character|protagonist|hero|heroine|"
    r"villain)|role-?play|in the game|i dreamt|i dreamed)\b", re.IGNORECASE)
_STORY_ZH = re.compile(r"小说里|小说中|故事里|故事中|书里|书中|剧本|主角|主人公|角色|梦里|梦见|扮演")
# a condition: the whole sentence it opens is hypothetical ("If I were rich, I'd...", 假如我中了彩票，我就...)
_CONDITION_EN = re.compile(
    r"\b(?:if i (?:were|was|had|could|won|lived)|if i'd|i'd (?:buy|go|live|be|visit|move|quit)|"
    r"i would (?:buy|go|live|be|visit|move|quit)|imagine|suppose|pretend|let's say)\b", re.IGNORECASE)
_CONDITION_ZH = re.compile(r"假如|如果|要是|假设|想象|幻想")
_ACTIVITY = re.compile(r"\b(?:writ\w*|author\w*|working on|publish\w*)\b|写|创作|出版", re.IGNORECASE)
_ACTIVITY_WORDS = frozenset(analyse("novel novels book books story stories new next latest current own detective "
                                    "writes writing wrote write written author working publish spare time weekends "
                                    "mostly"))
_FIRST_PERSON_EN = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|us|our)\b", re.IGNORECASE)
_OTHER_SUBJECT_EN = re.compile(
    r"^(?:(?:and|but|so|also|then|though|however)\s+)?(?:(?:my|his|her|their|our)\s+\w+|he|she|they|mr\.?|mrs\.?|ms\.?|dr\.?)\b",
    re.IGNORECASE)
_OTHER_SUBJECT_ZH = re.compile(
    r"^(?:我(?:的)?(?:妹妹|姐姐|哥哥|弟弟|老公|老婆|丈夫|妻子|太太|爱人|男朋友|女朋友|儿子|女儿|爸爸|妈妈|爸|妈|父亲|母亲|老板|"
    r"领导|同事|朋友|室友|邻居|爷爷|奶奶|外公|外婆|孩子)|他|她|他们|她们)")
_CORRECTION = re.compile(
    r"\b(?:sorry|actually|i meant|i mean|correction|my mistake|not\s+\w+,?\s+but|scratch that|wait)\b|不对|说错|更正|"
    r"其实是|我是说|纠正", re.IGNORECASE)


def _terms(text: str, names: frozenset[str]) -> set[str]:
    return {t for t in analyse(text) if t not in names}


_SMALL_TALK_EN = frozenset(analyse(_SMALL_TALK_WORDS_EN))


def small_talk(content: str, names: frozenset[str]) -> bool:
    """Whether an observation holds nothing but small talk ("Oskar says the weather is nice today.")."""
    if _CJK.search(content):
        rest = content
        for name in sorted(names, key=len, reverse=True):
            if _CJK.search(name):
                rest = rest.replace(name, "")
        return not _PUNCT.sub("", _SMALL_TALK_ZH.sub("", rest))
    terms = _terms(content, names)
    return bool(terms) and terms <= _SMALL_TALK_EN


def _made_up(clause: str, sentence: str | None = None) -> bool:
    """A story cue in the clause, or a condition in its sentence."""
    sentence = clause if sentence is None else sentence
    return bool(_STORY_EN.search(clause) or _STORY_ZH.search(clause) or _CONDITION_EN.search(sentence)
                or _CONDITION_ZH.search(sentence))


def _own_clause(content: str, parts: list[str], names: frozenset[str]) -> int | None:
    """The clause sharing most of the observation's words (None: no clause shares any, or a tie)."""
    terms = _terms(content, names)
    scores = [len(terms & set(analyse(part))) for part in parts]
    best = max(scores, default=0)
    if best == 0 or scores.count(best) > 1:
        return None
    return scores.index(best)


def about_user(content: str, user_name: str) -> bool:
    """Whether the observation makes the user its subject ("Ben rides...", "王磊在...", "I ride...")."""
    text = content.strip().strip('"“”')
    if user_name:  # reported speech ('Anna said: "My brother..."'): the quoted words decide
        said = re.match(re.escape(user_name) + r"\s*(?:said|says|说|表示)\s*[:：,，]?\s*", text, re.IGNORECASE)
        if said is not None:
            return about_user(text[said.end():], "")
    if re.match(r"(?:I|I'm|I've|I'd|I'll)\b", text) or text.startswith("我") and not _OTHER_SUBJECT_ZH.match(text):
        return True
    if not user_name or not text.casefold().startswith(user_name.casefold()):
        return False
    after = text[len(user_name):]
    return not re.match(r"\s*(?:'s|’s|s'|的|和|与|跟|,|，)", after)


Framing = Literal["real", "made_up", "someone_else", "model"]


def framing(content: str, message: str, user_name: str, names: frozenset[str]) -> Framing:
    """What the message's words say about the clause an observation comes from: ``made_up`` (a
    story, a hypothetical), ``someone_else`` (another person is its subject while the observation
    makes the user the subject), ``real`` (a first-person clause without a made-up cue, in a message
    that has one elsewhere), or ``model`` (no cue either way: the model's verdict stands)."""
    parts = clauses(message)
    index = _own_clause(content, parts, names)
    if index is None:
        return "model"
    clause = parts[index]
    if _made_up(clause, _sentence_of(clause, message)):
        shared = (_terms(content, names) & set(analyse(clause))) - _ACTIVITY_WORDS
        if _ACTIVITY.search(content) and not shared:
            return "real"  # "Lucía is writing a new book": the activity, not the plot
        return "made_up"
    if about_user(content, user_name) and _other_subject(clause):
        return "someone_else"
    if _made_up(message) and _first_person(clause) and about_user(content, user_name):
        return "real"
    return "model"


def _sentence_of(clause: str, message: str) -> str:
    """The sentence of ``message`` that holds ``clause`` (a made-up cue spans its sentence)."""
    tail = clause[-8:]
    for sentence in SENTENCE_END.split(message):
        if tail in sentence:
            return sentence
    return clause


def _first_person(clause: str) -> bool:
    if _CJK.search(clause):
        return "我" in clause and not _OTHER_SUBJECT_ZH.match(clause)
    return bool(_FIRST_PERSON_EN.search(clause)) and not _OTHER_SUBJECT_EN.match(clause)


def _other_subject(clause: str) -> bool:
    """A clause whose subject is someone else, the user not in it ("he rides to work every day")."""
    text = clause.strip()
    if _CJK.search(text):
        rest = _OTHER_SUBJECT_ZH.sub("", text, count=1) if _OTHER_SUBJECT_ZH.match(text) else None
        return rest is not None and "我" not in rest
    if not _OTHER_SUBJECT_EN.match(text):
        return False
    return not re.search(r"\b(?:i|i'm|i've|me|we|us)\b", text, re.IGNORECASE)


def corrects_itself(message: str) -> bool:
    """Whether the message corrects something ("sorry, Tuesday, not Monday", 哦不对)."""
    return bool(_CORRECTION.search(message))


def last_said(values_a: set[str], values_b: set[str], message: str) -> Literal["a", "b", None]:
    """Of two sets of values, the one whose last mention comes later in the message."""
    folded = message.casefold()

    def last(values: set[str]) -> int:
        return max((folded.rfind(v.casefold()) for v in values), default=-1)

    a, b = last(values_a), last(values_b)
    if a == b or max(a, b) < 0:
        return None
    return "a" if a > b else "b"


# the kinds of value a correction swaps one for another: weekdays, months, numbers
_SWAPPABLE = (
    re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|(?:星期|礼拜|周)[一二三四五六日天]", re.IGNORECASE),
    re.compile(r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december)\b|"
               r"(?:十[一二]|[一二三四五六七八九十])月", re.IGNORECASE),
    re.compile(r"\d+(?:[.:]\d+)?"),
)


_ADDED = re.compile(r"\b(?:also|too|as well|and|plus|another)\b|也|还|另外|以及|和", re.IGNORECASE)


def corrected(observation: str, message: str) -> str:
    """`observation` with the value its message corrects within itself replaced by the value said
    instead: the message corrects itself (`corrects_itself`) after saying one value of a kind
    (weekday, month, number) and says exactly one other value of that kind after the correction,
    not the first one again ("每周三上午，哦不对，是每周四上午"; not "Tuesday, not Monday", which names
    the old value after the cue and is read as two observations, `last_said`); the observation holds
    the first value and not the second. Anything else: `observation` unchanged."""
    cue = _CORRECTION.search(message)
    if cue is None:
        return observation
    before, after = message[:cue.start()], message[cue.end():]
    for kind in _SWAPPABLE:
        held = {m.group(0).casefold() for m in kind.finditer(observation)}
        said_after = {m.group(0).casefold(): m.group(0) for m in kind.finditer(after)}
        if len(held) != 1 or len(said_after) != 1:
            continue
        (old,), ((new_key, new),) = held, said_after.items()
        if new_key == old or old not in {m.group(0).casefold() for m in kind.finditer(before)}:
            continue
        if _ADDED.search(after):
            continue  # "Mondays, actually also Fridays", 其实周三也跑: one more, not another
        at = observation.casefold().find(old)
        return observation[:at] + new + observation[at + len(old):]
    return observation
