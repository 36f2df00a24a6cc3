"""Repeats and contradictions, found by the engine and put to the model as small questions.

A small model does not notice by itself that "Priya quit coffee" makes "Priya drinks three
espressos a day" untrue, and it points at the wrong memory when asked to cite one. So the engine
does the finding and the model only answers, per pair:

* the engine picks, for each new observation, the few existing active observations that are
  actually related (the full-text channel shares a term with it, or the vectors are close) and
  the earlier new observations of the same batch that are close;
* a pair whose texts are the same, or whose vectors are nearly identical, is a repeat without
  asking;
* every other pair becomes one numbered question: "same", "outdated" (the old one is no longer
  true) or "both" (both can be true). The answer is one verdict per question number; a missing
  or unreadable verdict means "both" (nothing is merged or expired on a guess).

A model verdict is only ever about a pair the engine built, so a reference can never point at an
unrelated memory. A "same" verdict for texts that are not close is taken as "both" (two different
facts are never merged into one); an "outdated" verdict about different people is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from ..storage.text_analysis import analyse
from ..types import Memory
from .extract import memory_date, normalise
from .prompts import PromptSet

VERDICTS = ("same", "outdated", "both")
MAX_PAIRS_PER_CALL = 24
# A repeat without asking: nearly the same words (shared terms) and meaning (cosine), same polarity.
REPEAT_MIN_OVERLAP = 0.7
REPEAT_MIN_COSINE = 0.85
# A "same" verdict is accepted only for texts this close (else both are kept).
SAME_MIN_OVERLAP = 0.5
SAME_MIN_COSINE = 0.75
SAME_MIN_OVERLAP_WITH_COSINE = 0.25
_NEGATION = re.compile(r"\b(not|no|never|none|nobody|nothing|quit|quits|stopped|stop|gave up|no longer|anymore|"
                       r"any more|without)\b|n't|不|没|别|未|戒", re.IGNORECASE)


@dataclass(slots=True)
class Pair:
    """One question: is ``new`` (an observation of this batch) the same as, or does it outdate,
    ``old`` (an existing memory, or an earlier observation of the same batch)?"""

    new: int  # index of the new observation in the step's list
    old: Memory
    cosine: float | None  # of the two observations' own words
    old_is_new: bool = False  # ``old`` is an earlier observation of this batch
    overlap: float = 0.0  # share of terms in common (the user's name aside)


def overlap(a: str, b: str, names: frozenset[str] = frozenset()) -> float:
    """Jaccard overlap of two texts' analysed terms, the user's name aside."""
    left, right = set(analyse(a)) - names, set(analyse(b)) - names
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def negated(text: str) -> bool:
    """Whether a text says no / not / stopped (in English or Chinese)."""
    return bool(_NEGATION.search(text))


def compare(new_text: str, old_text: str, cosine: float, names: frozenset[str], cfg: Any
            ) -> Literal["repeat", "ask", "unrelated"]:
    """What to do with a pair before asking anything: a sure repeat, a question, or nothing."""
    if normalise(new_text) == normalise(old_text):
        return "repeat"
    shared = overlap(new_text, old_text, names)
    if negated(new_text) == negated(old_text) and shared >= REPEAT_MIN_OVERLAP and cosine >= REPEAT_MIN_COSINE:
        return "repeat"
    if shared > 0 or cosine >= cfg.judge_min_similarity:
        return "ask"
    return "unrelated"


def plausibly_same(pair: Pair, new_text: str) -> bool:
    """Whether a "same" verdict can stand: texts this far apart are two facts, never merged."""
    if negated(pair.old.content) != negated(new_text):
        return False
    cosine = pair.cosine or 0.0
    return pair.overlap >= SAME_MIN_OVERLAP or (cosine >= SAME_MIN_COSINE
                                                and pair.overlap >= SAME_MIN_OVERLAP_WITH_COSINE)


def answer_schema(count: int) -> dict[str, Any]:
    """The JSON schema of a judge answer for ``count`` questions."""
    entry = {"type": "object",
             "properties": {"n": {"type": "integer", "minimum": 1, "maximum": count},
                            "verdict": {"type": "string", "enum": list(VERDICTS)}},
             "required": ["n", "verdict"]}
    return {"type": "object",
            "properties": {"answers": {"type": "array", "items": entry, "minItems": count, "maxItems": count}},
            "required": ["answers"]}


def render(prompt: PromptSet, *, user: str, pairs: Sequence[Pair], new_texts: Sequence[str],
           new_dates: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages of one judge call."""
    language = prompt.language
    old_label, new_label = prompt.text("old", "OLD"), prompt.text("new", "NEW")
    blocks = []
    for number, pair in enumerate(pairs, start=1):
        blocks.append(f"{number}. {old_label} [{memory_date(pair.old, language)}] {pair.old.content}\n"
                      f"   {new_label} [{new_dates[pair.new]}] {new_texts[pair.new]}")
    return prompt.messages(user=user, pairs="\n".join(blocks), count=str(len(pairs)))


def parse_verdicts(value: Any, count: int) -> list[str]:
    """One verdict per question (``"both"`` where the answer gives none or an unknown one)."""
    verdicts = ["both"] * count
    answers = value.get("answers") if isinstance(value, dict) else None
    if not isinstance(answers, list):
        return verdicts
    given: set[int] = set()
    for position, raw in enumerate(answers):
        if not isinstance(raw, dict):
            continue
        number = raw.get("n", position + 1)
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number.strip())
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= count:
            continue
        if number in given:
            continue
        verdict = str(raw.get("verdict") or "").strip().lower()
        if verdict in VERDICTS:
            verdicts[number - 1] = verdict
            given.add(number)
    return verdicts


def same_person(a: str | None, b: str | None) -> bool:
    """False only when both name someone and neither name contains the other."""
    if not a or not b:
        return True
    a, b = a.casefold().strip(), b.casefold().strip()
    return a in b or b in a
