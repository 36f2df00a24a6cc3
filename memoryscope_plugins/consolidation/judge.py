"""Repeats and contradictions: found by the engine, confirmed by the model one small question at a time.

Measured with a 1.5B model on this CPU: asked to classify a list of pairs ("same / outdated /
both"), it copied the order of the prompt's example answers; asked one pair at a time, it answered
"no longer true" to nearly everything. So the engine decides which pairs could be a repeat or a
contradiction, and the model is only asked to confirm a contradiction the engine has reason to
suspect:

* **the candidates** for each new observation are the few existing active observations that are
  actually related (its full-text channel shares a term with them, the user's name aside, or their
  own words are close) and the earlier observations of the same batch;
* **similarity** is the cosine of the two observations' own words, rescaled by the embedder's noise
  floor in that language (`noise_floor`, `calibrated`): an English-only model puts any two Chinese
  sentences at 0.5-0.65, multilingual-e5 any two at about 0.85 (`retrieval/noise_floor.py`);
* **a repeat**, never asked: the same text, or the same polarity, no conflicting value (a number,
  a weekday, a month, a name that only one of them has), most words in common and a high
  similarity;
* **a suspected contradiction**, asked: related, and the new one states a change ("quit", "no
  longer", "now", "actually", "不再", "辞职", "不对", ...) or says the opposite (one is negated, the
  other not) or gives another value for the same thing. The question is one pair and one yes/no
  answer, ``{"still_true": false}``; anything else, or no usable answer, keeps both memories;
* everything else: both are kept, nothing is asked.

A verdict is only ever about a pair the engine built, so no reference can point at an unrelated
memory; a contradiction about another person (``about``) is never applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ..retrieval.noise_floor import noise_floor as _noise_floor
from ..storage.text_analysis import analyse
from ..types import Memory
from .extract import memory_date, normalise
from .prompts import PromptSet

# A repeat without asking: same polarity, no conflicting value, no change, most of the shorter one's
# words in the other, and the meaning in common.
REPEAT_MIN_CONTAINMENT = 0.75
REPEAT_MIN_SIMILARITY = 0.8
# ... or, when the message says it repeats itself ("as I mentioned", 我说过), half the words and a
# fair similarity
REPEAT_CUE_MIN_CONTAINMENT = 0.5
REPEAT_CUE_MIN_SIMILARITY = 0.5
ASK_MIN_SHARED_TERMS = 2  # related enough to ask about, without close vectors
MAX_QUESTIONS_PER_STEP = 12
_NEGATION = re.compile(r"\b(not|no|never|none|nobody|nothing|quit|quits|stopped|gave up|no longer|anymore|"
                       r"any more|without)\b|n't|不|没|别|未|戒", re.IGNORECASE)
_CHANGE = re.compile(
    r"\b(quit|quits|quitting|stopped|stop|no longer|not anymore|anymore|any more|gave up|give up|started|start|"
    r"again|now|switched|switch|moved|move|changed|change|instead|actually|sorry|correction|update|used to|"
    r"replaced|cancell?ed|left|retired|sold|divorced|broke up|not .{1,30} but|these days|nowadays)\b|"
    r"不再|已经|辞职|现在|开始|改|换|不对|其实|搬|戒|退|卖了|取消|以后|最近|更正|说错|不是",
    re.IGNORECASE)
_VALUE = re.compile(
    r"[A-Za-z]*\d+(?:[.,]\d+)?[A-Za-z]*|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|mondays|tuesdays|wednesdays|thursdays|"
    r"fridays|saturdays|sundays|january|february|march|april|may|june|july|august|september|october|november|"
    r"december)\b|[周星期礼拜][一二三四五六日天]|[一二三四五六七八九十两]+[个只岁月年号点次天位本件条]",
    re.IGNORECASE)
_AGAIN = re.compile(
    r"\b(?:as i (?:mentioned|said|told you)|like i (?:said|mentioned|told you)|i (?:already )?told you|"
    r"as you know|remember (?:that )?i)\b|"
    r"我(?:之前|以前|上次)?(?:说过|提过|告诉过你)|之前(?:说过|提过|提到)|上次(?:说|提)",
    re.IGNORECASE)
_PROPER = re.compile(r"\b[A-Z][a-z]+")
_NOT_NAMES = frozenset({"the", "a", "an", "she", "he", "it", "they", "we", "i", "his", "her", "their", "mr", "mrs",
                        "ms", "dr", "and", "but", "also", "yes", "no"})

# Pairs of unrelated sentences: their cosine is the embedder's noise floor in that language.
_UNRELATED = {
    "en": [("The weather is nice today.", "My computer broke down."),
           ("She plays the violin.", "The train leaves at noon."),
           ("I bought new shoes.", "Our dog is afraid of thunder.")],
    "zh": [("今天天气很好。", "我的电脑坏了。"), ("她会拉小提琴。", "火车中午出发。"),
           ("我买了新鞋。", "我们的狗怕打雷。")],
}
ANSWER_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"still_true": {"type": "boolean"}},
                                 "required": ["still_true"]}


@dataclass(slots=True)
class Pair:
    """One question: does ``new`` (an observation of this batch) make ``old`` (an existing memory,
    or an earlier observation of the same batch) no longer true?"""

    new: int  # index of the new observation in the step's list
    old: Memory
    similarity: float  # of the two observations' own words, calibrated
    old_is_new: bool = False  # ``old`` is an earlier observation of this batch
    decided: bool | None = None  # the engine's own "still true" (a correction it read): not asked


def noise_floor(embedder: Any, language: str) -> float:
    """The mean cosine of two unrelated statements for this embedder and language (cached)."""
    return _noise_floor(embedder, language, pairs=_UNRELATED, second="query")


def shared_terms(a: str, b: str, names: frozenset[str] = frozenset()) -> tuple[int, float]:
    """How many analysed terms two texts share (the user's name aside), and which share of the
    shorter text's terms that is."""
    left, right = set(analyse(a)) - names, set(analyse(b)) - names
    if not left or not right:
        return 0, 0.0
    common = len(left & right)
    return common, common / min(len(left), len(right))


def negated(text: str) -> bool:
    """Whether a text says no / not / stopped (in English or Chinese)."""
    return bool(_NEGATION.search(text))


def says_again(message: str) -> bool:
    """Whether a message says it repeats something ("as I mentioned", "like I said", 我说过, 之前提过)."""
    return bool(_AGAIN.search(message))


def states_change(text: str) -> bool:
    """Whether a text says something changed, stopped, started or was corrected."""
    return bool(_CHANGE.search(text))


def _values(text: str) -> set[str]:
    found = {m.group(0).casefold() for m in _VALUE.finditer(text)}
    found |= {m.group(0).casefold() for m in _PROPER.finditer(text)} - _NOT_NAMES
    return found


def distinct_values(a: str, b: str, names: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """The numbers, weekdays, months and names only ``a`` has, and those only ``b`` has."""
    left = {v for v in _values(a) if not set(analyse(v)) <= names}
    right = {v for v in _values(b) if not set(analyse(v)) <= names}
    return left - right, right - left


def conflicting_values(a: str, b: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether each text has a number, weekday, month or name the other lacks ("Mondays" against
    "Tuesdays", "3 cats" against "2 cats")."""
    only_a, only_b = distinct_values(a, b, names)
    return bool(only_a) and bool(only_b)


def compare(new_text: str, old_text: str, similarity: float, names: frozenset[str], cfg: Any,
            new_message: str = "") -> Literal["repeat", "ask", "unrelated"]:
    """What to do with a pair: a sure repeat, a suspected contradiction to ask about, or nothing."""
    if normalise(new_text) == normalise(old_text):
        return "repeat"
    common, containment = shared_terms(new_text, old_text, names)
    if common < ASK_MIN_SHARED_TERMS and similarity < cfg.judge_min_similarity:
        return "unrelated"
    opposite = negated(new_text) != negated(old_text)
    other_value = conflicting_values(new_text, old_text, names)
    change = states_change(new_text)
    if not (opposite or other_value or change) and containment >= REPEAT_MIN_CONTAINMENT \
            and similarity >= REPEAT_MIN_SIMILARITY:
        return "repeat"
    if not (opposite or other_value or change) and says_again(new_message) and \
            containment >= REPEAT_CUE_MIN_CONTAINMENT and similarity >= REPEAT_CUE_MIN_SIMILARITY:
        return "repeat"  # "As I mentioned, my dog Biscuit is a golden retriever."
    # a change said in the message but not in the observation counts only with shared terms
    if opposite or change or (common > 0 and (other_value or states_change(new_message))):
        return "ask"
    return "unrelated"


def render(prompt: PromptSet, *, user: str, pair: Pair, new_text: str, new_date: str) -> list[dict[str, str]]:
    """The chat messages of one question."""
    language = prompt.language
    return prompt.messages(user=user, old=pair.old.content, old_date=memory_date(pair.old, language),
                           new=new_text, new_date=new_date)


def parse_still_true(value: Any) -> bool | None:
    """The answer's ``still_true`` (True / False), or None when it gives no clear one."""
    if not isinstance(value, dict):
        return None
    answer = value.get("still_true")
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str) and answer.strip().lower() in ("true", "false", "yes", "no"):
        return answer.strip().lower() in ("true", "yes")
    return None


def same_person(a: str | None, b: str | None) -> bool:
    """False only when both name someone and neither name contains the other."""
    if not a or not b:
        return True
    a, b = a.casefold().strip(), b.casefold().strip()
    return a in b or b in a
