"""One query per part of a question with several parts. No model: a few rules per language.

- **Two or more names joined** ("Evan and Sam", "both John and James", "Tim, John and Maria",
  小王和小李, 小王跟小李): one part per name, the question with the joined names replaced by that
  name ("What do Evan and Sam do to relax?" -> "What do Evan do to relax?", "What do Sam do to
  relax?"). Only names the user's memories know are names here.
- **Two questions in one**: "When did she move and why?", "What did Caroline paint, and when?",
  "他什么时候去的成都，以及在那里做了什么？": a second question word after "and" / "以及" / "还有"
  / "另外" (or a comma) starts a second part; the first part's names and words are carried into the
  second, whose own words would rarely say who it is about.

A part is never the whole query, and a query gives at most `MAX_PARTS` parts. What the parts are
for: `retrieval.decomposition` ranks each and merges the rankings, so each part has its best
memories in the block.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..storage.text_analysis import CJK

MAX_PARTS = 4
_WH = r"(?:what|when|where|who|whom|whose|which|why|how(?:\s+(?:many|much|long|often))?)"
# "..., and when?" / "... and why did she ..." / "... and what did ...": a second question
_SECOND_QUESTION = re.compile(r"(?:,\s*|\s+)(?:and|&)\s+(?=" + _WH + r"\b)", re.IGNORECASE)
_SECOND_QUESTION_ZH = re.compile(r"[，,；;]?\s*(?:以及|还有|另外|并且|而且)|"
                                 r"[，,；;]\s*(?=(?:什么|哪|谁|为什么|怎么|多少|几))")
_QUESTION_WORD_ZH = re.compile(r"什么|哪|谁|为什么|为何|怎么|怎样|如何|多少|几|吗|呢")
_LEADING_QUESTION = re.compile(
    r"^\W*" + _WH + r"\s+(?:(?:do|does|did|is|are|was|were|has|have|had|will|would|can|could)\s+)?", re.IGNORECASE)
_JOINERS = r"(?:\s*,\s*|\s*,?\s+and\s+|\s*&\s*|\s+or\s+)"
_JOINERS_ZH = r"(?:和|跟|与|及|以及|还有|、|，)"


def query_parts(query: str, names: Sequence[str] = ()) -> list[str]:
    """The parts of `query` (see the module docstring); [] when it has one part."""
    parts = _name_parts(query, names) or _question_parts(query, names)
    parts = [p for p in dict.fromkeys(p.strip() for p in parts) if p and p != query.strip()]
    return parts[:MAX_PARTS] if len(parts) >= 2 else []


def _name_parts(query: str, names: Sequence[str]) -> list[str]:
    """One part per name where two or more of `names` stand joined (see the module docstring)."""
    if len(names) < 2:
        return []
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    joiners = _JOINERS_ZH if CJK.search(query) else _JOINERS
    boundary_l, boundary_r = (r"", r"") if CJK.search(alternatives) else (r"(?<!\w)", r"(?!\w)")
    name = f"{boundary_l}(?:{alternatives}){boundary_r}"
    # "both Evan and Sam", "Evan, Sam and Maria", "小王和小李": the joined run of names
    run = re.compile(rf"(?:\bboth\s+)?{name}(?:{joiners}{name})+(?:\s+both\b)?", re.IGNORECASE)
    match = run.search(query)
    if match is None:
        return []
    joined = list(re.findall(name, match.group(0), flags=re.IGNORECASE))
    if len({n.casefold() for n in joined}) < 2:
        return []
    head, tail = query[:match.start()], query[match.end():]
    if CJK.search(query):
        tail = re.sub(r"^\s*(?:都|分别|各自|一起)", "", tail)
    return [f"{head}{n}{tail}" for n in dict.fromkeys(joined)]


def _has_words_of_its_own(piece: str) -> bool:
    """Whether a second question says more than its question word ("when?", "why?", "为什么？")."""
    rest = _LEADING_QUESTION.sub("", piece.strip())
    if CJK.search(piece):
        rest = _QUESTION_WORD_ZH.sub("", rest)
    return len(re.findall(r"\w", rest)) > 3 and rest.strip(" ?？") != piece.strip(" ?？").split()[0]


def _question_parts(query: str, names: Sequence[str]) -> list[str]:
    """Two questions in one (see the module docstring): the first, and the second with the first's
    words before it."""
    if CJK.search(query):
        pieces = [p for p in _SECOND_QUESTION_ZH.split(query) if p and p.strip("，,；; ")]
        if len(pieces) < 2 or not all(_QUESTION_WORD_ZH.search(p) for p in pieces[1:]):
            return []
    else:
        pieces = _SECOND_QUESTION.split(query)
        if len(pieces) < 2:
            return []
    if not all(_has_words_of_its_own(p) for p in pieces[1:]):
        return []  # "... and why?": the same search again, with one word more
    first = pieces[0].strip(" ,，;；")
    carried = _LEADING_QUESTION.sub("", first)
    return [first, *(f"{carried} {p.strip()}" for p in pieces[1:])]
