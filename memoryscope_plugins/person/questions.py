"""Questions about an entity, recognised without a model: "who is Mel?", "tell me about 王磊".

A question asks about an entity when one of its known names (found by the `NameMatcher`, so the
matcher's rules hold) stands in one of these places:

- English: right after "who is/was", "who's", "what do/did you know/remember/recall about", "tell me
  (more) about", "what about", "anything about", "do you know who X is"; or before a possessive of a
  person's circle or story ("Mel's family", "Mel's job", "Mel's kids", ...).
- Chinese: right after 谁是, 介绍(一下), 说说, 讲讲, 谈谈, 聊聊, 关于; before 是谁, 是什么人, 是做什么的,
  的情况, 的家人, 的家庭, 的近况, 的事, 最近怎么样; or in 了解/知道/记得 X 吗 or 对 X 了解多少.

When the matcher finds no name there (a question typed in lower case: "who is mel?"), the words
in the slot are looked up whole, normalised ("mel" is "Mel"). The first entity asked about wins.
A question longer than `MAX_QUESTION_CHARS` is not an entity question.
"""

from __future__ import annotations

import re

from .matching import NameMatcher

#: Longer texts are not treated as entity questions.
MAX_QUESTION_CHARS = 2000

_EN_ASK = (r"who\s+(?:is|was)|who['’]s|what\s+(?:do|did|does)\s+(?:you|we|i)\s+(?:know|remember|recall)\s+about"
           r"|tell\s+me\s+(?:more\s+|everything\s+|something\s+|a\s+bit\s+)?about|what\s+about|anything\s+about"
           r"|information\s+(?:on|about)|remind\s+me\s+about")
_EN_BEFORE = re.compile(rf"\b(?:{_EN_ASK})\s+(?:the\s+|my\s+|our\s+)?$", re.IGNORECASE)
_EN_WHO = re.compile(r"\bwho\s+$", re.IGNORECASE)
_EN_WHO_AFTER = re.compile(r"^\s+(?:is|was)\b", re.IGNORECASE)
_EN_AFTER = re.compile(
    r"^['’]s?\s+(?:family|parents|kids|children|wife|husband|partner|job|work|career|pets?|dog|cat|home|house|"
    r"hobbies|friends|background|story|life|age|birthday|sister|brother|mother|father|mom|mum|dad|son|daughter|"
    r"boyfriend|girlfriend|relationship|plans)\b", re.IGNORECASE)
_EN_SLOT = re.compile(rf"\b(?:{_EN_ASK})\s+(?:the\s+|my\s+|our\s+)?(?P<slot>[^?.!,;]+?)\s*[?.!]*\s*$", re.IGNORECASE)

_ZH_ASK = "谁是|介绍一下|介绍下|介绍|说说|讲讲|谈谈|聊聊|说一下|讲一下|关于"
_ZH_BEFORE = re.compile(f"(?:{_ZH_ASK})$")
_ZH_AFTER = re.compile("^(?:是谁|是什么人|是做什么的|是干什么的|的情况|的家人|的家庭|的近况|的事|最近怎么样|最近好吗)")
_ZH_KNOW_BEFORE = re.compile("(?:了解|知道|记得|对)$")
_ZH_KNOW_AFTER = re.compile("^(?:吗|嘛|多少|什么|了解|知道)")
_ZH_SLOT = re.compile(
    f"(?:{_ZH_ASK})(?P<slot>[^？?。!！，,]+?)[？?。!！]*$|^(?P<who>[^？?。!！，,]+?)(?:是谁|是什么人)")


def _asks_about(query: str, start: int, end: int) -> bool:
    before, after = query[max(0, start - 80):start], query[end:end + 40]
    if _EN_WHO.search(before):
        return bool(_EN_WHO_AFTER.match(after))
    return bool(_EN_BEFORE.search(before) or _EN_AFTER.match(after) or _ZH_BEFORE.search(before)
                or _ZH_AFTER.match(after) or (_ZH_KNOW_BEFORE.search(before) and _ZH_KNOW_AFTER.match(after)))


def entity_question(query: str, matcher: NameMatcher) -> str | None:
    """The id of the entity `query` asks about ("who is X", "what do you know about X", "tell me about
    X", "X's family", 谁是X, X是谁, 介绍一下X, 关于X ...; the module lists the forms), or None when it
    asks about none of `matcher`'s entities. Raises TypeError on wrong types."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    if not isinstance(matcher, NameMatcher):
        raise TypeError(f"matcher must be a NameMatcher, got {type(matcher).__name__}")
    if len(query) > MAX_QUESTION_CHARS:
        return None
    for match in matcher.find(query):
        if _asks_about(query, match.start, match.end):
            return match.entity_id
    slot = _EN_SLOT.search(query) or _ZH_SLOT.search(query.strip())
    if slot is None:
        return None
    groups = slot.groupdict()
    words = (groups.get("slot") or groups.get("who") or "").strip()
    words = re.sub(r"['’]s?$", "", words)
    return matcher.entity_for(words) if words else None
