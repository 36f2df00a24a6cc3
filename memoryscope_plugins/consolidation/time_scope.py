"""Which of a message's time words belong to one of its observations.

A message often holds an event and a state side by side: "I moved to Hangzhou last month and I
work as a nurse". "last month" dates the move, not the job. Two rules, no LLM:

* **the clause rule**: a message is cut into clauses (sentence ends; in English also a new subject
  after "and"/"but"/a comma, "and I", ", we"; in Chinese the comma). An observation's clause is the
  one sharing most of its words; time words count for it only when they stand in that clause;
* **the state rule**: a state (a job, a home, a preference, a relation: "works as", "lives in",
  "likes", 在…工作, 住在, 喜欢) is not an event: it gets no event range, unless the time words date
  its start ("since May", 从五月开始), and then the start only (the parser leaves such a range open).
  An observation that says a change ("moved", "started", "will", 开始, 搬) is an event, whatever
  kind the model gave it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from ..storage.text_analysis import analyse
from ..timeparse import parse_time
from ..types import TimeRange

MAX_TIME_PHRASE_WORDS = 4
MAX_TIME_PHRASE_CJK_CHARS = 5
_CJK = re.compile(r"[\u3400-\u9fff]")
_REFERENCE = datetime(2000, 1, 1, tzinfo=timezone.utc)  # only whether the words are a time is asked
SENTENCE_END = re.compile(r"[.!?;\n。！？；]+")
# a new subject starts a new clause: "..., and I work as", "...; but my sister", "..., we had"
_EN_NEW_SUBJECT = re.compile(
    r"(?:,\s*|\s+)(?:and|but|while|whereas)\s+(?=(?:I|I'm|I've|my|we|he|she|they|our)\b)"
    r"|,\s*(?=(?:I|I'm|I've|my|we|he|she|they|our)\b)", re.IGNORECASE)
_ZH_CLAUSE = re.compile(r"[，,、：:]+")
_STATE_KINDS = ("fact", "preference", "relation")
_EN_STATE = re.compile(
    r"\b(?:works?|worked|working|employed)\s+(?:as|at|for|in)\b|\b(?:lives?|lived|living)\s+(?:in|at|with|near)\b|\b(?:is|are)\s+(?:a|an|the)\b"
    r"|\b(?:likes?|loves?|prefers?|hates?|enjoys?|dislikes?)\b|\b(?:has|have|owns?)\s+(?:a|an|two|three|\d+)\b"
    r"|\bteach(?:es)?\b|\bis\s+allergic\b|\bis\s+married\b", re.IGNORECASE)
_EN_CHANGE = re.compile(
    r"\b(?:will|going\s+to|plans?|planning|start(?:s|ed|ing)?|begins?|began|beginning|moved?|moving|joined|"
    r"became|becomes|new|quit|left|got|getting|bought|sold|visited|went|passed|turned|signed|married\s+\w+\s+(?:on|in))\b",
    re.IGNORECASE)
_ZH_STATE = re.compile(r"在.{1,12}(?:工作|上班|当|做)|住在|是|喜欢|讨厌|爱|养|有|当|做")
_ZH_CHANGE = re.compile(r"开始|要|将|会|打算|准备|计划|搬|换|辞职|卖|买|成为|去|回|结婚|出生|毕业|考|参加|刚|新")


@dataclass(frozen=True, slots=True)
class TimeScope:
    """The time words an observation may be dated by (None: none of them) and whether it is a state."""

    expression: str | None
    state: bool


def clauses(message: str) -> list[str]:
    """The clauses of a message, in order (never empty for a non-blank message). A fronted time
    phrase ("Last week, on Wednesday, I went...", 上周六，我...) stays with the clause it dates."""
    out: list[str] = []
    for sentence in SENTENCE_END.split(message):
        pieces: list[str] = []
        for part in _EN_NEW_SUBJECT.split(sentence):
            pieces.extend(_ZH_CLAUSE.split(part) if _CJK.search(part) else [part])
        carried = ""
        for piece in (p.strip() for p in pieces):
            if not piece:
                continue
            if _only_time_words(piece):
                carried = f"{carried} {piece}".strip()
                continue
            out.append(f"{carried} {piece}".strip() if carried else piece)
            carried = ""
        if carried:
            if out:
                out[-1] = f"{out[-1]} {carried}"
            else:
                out.append(carried)
    return out or [message]


def _only_time_words(piece: str) -> bool:
    """A short phrase that is just a time ("Last week", "on Wednesday", 上周六)."""
    short = len(piece) <= MAX_TIME_PHRASE_CJK_CHARS if _CJK.search(piece) else \
        len(piece.split()) <= MAX_TIME_PHRASE_WORDS
    return short and parse_time(piece, _REFERENCE).range is not None


def is_state(content: str, kind: str) -> bool:
    """Whether an observation states something that holds (a job, a home, a preference) rather
    than something that happened or will happen."""
    if kind not in _STATE_KINDS:
        return False
    if _CJK.search(content):
        return bool(_ZH_STATE.search(content)) and not _ZH_CHANGE.search(content)
    return bool(_EN_STATE.search(content)) and not _EN_CHANGE.search(content)


def dates_a_start(expression: str, when: object) -> bool:
    """Whether the words date a beginning ("since May", 从五月开始): the parser leaves the range open."""
    parsed: TimeRange | None = parse_time(expression, when).range  # type: ignore[arg-type]
    return parsed is not None and parsed.start is not None and parsed.end is None


def _own_clauses(content: str, parts: list[str], names: frozenset[str]) -> set[int]:
    """The clauses the observation tells (names aside): those sharing at least a third as many of its
    words as the best one ("陈浩把车卖了，以后坐地铁上班" tells both clauses); all when none shares any."""
    terms = {t for t in analyse(content) if t not in names}
    scores = []
    for part in parts:
        available = set(analyse(part))
        scores.append(sum(term in available for term in terms))
    best = max(scores, default=0)
    if best == 0:
        return set(range(len(parts)))
    return {i for i, score in enumerate(scores) if score > 0 and score * 3 >= best}


def time_scope(content: str, kind: str, message: str, quoted: str | None, names: frozenset[str]) -> TimeScope:
    """The time words of ``message`` that belong to the observation ``content`` (see the module
    docstring). ``quoted`` is what the model gave as its time words, already checked to be in the
    message; without them, the observation's own clause is read for time words."""
    state = is_state(content, kind)
    parts = clauses(message)
    own = _own_clauses(content, parts, names)
    if quoted:
        folded = quoted.casefold()
        holders = {i for i, part in enumerate(parts) if folded in part.casefold()}
        if not holders or holders & own or len(parts) == 1:
            return TimeScope(quoted, state)
        return TimeScope(None, state)  # the words date another clause of the message
    if len(parts) == 1:
        return TimeScope(message, state)
    return TimeScope(" ".join(parts[i] for i in sorted(own)), state)
