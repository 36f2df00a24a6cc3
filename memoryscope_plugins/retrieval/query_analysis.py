"""What a query is, read from its words alone (no model): the first step of ranking.

Before every turn an adapter retrieves with what the human just said. That is mostly a statement
("I ended up volunteering for that project and now I'm overwhelmed"), sometimes a question or a
request. They want different things from the two search channels (`channel_weights`): a question
names what it wants, so the words it shares with a memory are evidence; a statement's words are
mostly about itself, and what it should bring back shares its meaning, rarely its words.

`analyse_query` gives:

- ``kind``: "question" (a question mark, or a sentence opening with a question word: what, when,
  does...; 什么, 吗, 哪...), "request" (an imperative opening: "tell me", "remind me", "list",
  "can you"; 请, 帮我, 告诉我...), else "statement". Any question sentence makes the query a
  question; else any request sentence a request.
- ``terms``: the full-text channel's own terms of the query (`text_analysis.analyse`: stemmed,
  stop words out; for Chinese its two-character terms), without the date words the index adds to
  every memory; for a query written in words (``words``), how many of them the best full-text match
  holds is the channel's lexical evidence (`lexical_evidence`). Chinese pairs of characters cut
  across words (什么 is one, 么名 none), so they cannot measure it.
- ``names``: the known names it contains (the speakers, the ledger's entities), as the caller gives
  them, in the order they occur.
- ``parts``: for a question or request with several parts ("What do Evan and Sam do to relax?",
  "When did she move and what did she leave behind?", "小王和小李分别住在哪里？"), one query per part
  (`query_parts`); () otherwise.

The same rules read English and Chinese; each is a short list of words per language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Literal, Sequence

from ..storage.text_analysis import CJK, analyse
from .query_parts import query_parts

QueryKind = Literal["question", "request", "statement"]

_WORD_RUN = re.compile(r"[^\W_]+")
#: A line that asks something and states at most this many words besides mostly asks (`mostly_asks`).
STATED_WORDS = 15
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
_QUESTION_OPENING = re.compile(
    r"^\W*(what|when|where|who|whom|whose|which|why|how|do|does|did|is|are|was|were|have|has|had|"
    r"will|would|should|shall|may|might|am)\b", re.IGNORECASE)
_REQUEST_OPENING = re.compile(
    r"^\W*(?:please\s+)?(tell|remind|show|list|give|find|recommend|suggest|help|describe|explain|summari[sz]e|"
    r"name|recall|let's|let\s+me\s+know|can\s+you|could\s+you|would\s+you|will\s+you)\b", re.IGNORECASE)
_QUESTION_ZH = re.compile(r"[吗呢么]\s*[。.!！]*$|什么|谁|哪|几[个次天年岁月号点]|多少|多久|多长|怎么|怎样|如何|"
                          r"为什么|为何|是否|是不是|有没有|能不能|会不会|要不要")
_REQUEST_ZH = re.compile(r"^\W*(请|麻烦|帮我|帮忙|告诉我|提醒我|给我|推荐|列出|说说|讲讲|介绍|总结|回忆)")
# the words the index adds to every memory with its date ("[8 May 2023]"): never the query's evidence
_DATE_WORDS = frozenset(analyse("january february march april may june july august september october "
                                "november december"))


@dataclass(frozen=True)
class QueryAnalysis:
    """What `analyse_query` read from a query (see the module docstring)."""

    kind: QueryKind
    terms: tuple[str, ...]
    names: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    words: bool = True  # written in words (not CJK script): its terms can measure lexical evidence

    @property
    def asks(self) -> bool:
        """A question or a request: it names what it wants."""
        return self.kind != "statement"


def analyse_query(query: str, names: Iterable[str] = ()) -> QueryAnalysis:
    """Read `query` (see the module docstring). `names`: the known names it holds (speakers and
    entities of the user's ledger, as the query writes them, one per entity, in order); they may split
    it into parts."""
    found = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))
    kind = query_kind(query)
    parts = tuple(query_parts(query, found)) if kind != "statement" else ()  # a statement asks nothing
    return QueryAnalysis(kind=kind, terms=query_terms(query), names=found, parts=parts,
                         words=not CJK.search(query))


def part_analysis(whole: QueryAnalysis, part: str) -> QueryAnalysis:
    """What a part of `whole` is: the whole query's kind (a part of a question asks too), the part's
    own terms, no parts of its own."""
    return QueryAnalysis(kind=whole.kind, terms=query_terms(part), words=not CJK.search(part))


@lru_cache(maxsize=4096)
def query_kind(query: str) -> QueryKind:
    """"question", "request" or "statement" (see the module docstring)."""
    if holds_question(query):
        return "question"
    sentences = [s.strip() for s in _SENTENCE.findall(query) if s.strip()] or [query.strip()]
    if any(_REQUEST_OPENING.search(s) or (CJK.search(s) and _REQUEST_ZH.search(s)) for s in sentences):
        return "request"
    return "statement"


@lru_cache(maxsize=65536)
def holds_question(text: str) -> bool:
    """Whether a sentence of `text` is a question (a memory line that asks something: "That's
    awesome! What made the biggest difference?"; its answer, when there is one, is another line)."""
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip()] or [text.strip()]
    return any(_is_question(s) for s in sentences)


@lru_cache(maxsize=65536)
@lru_cache(maxsize=16384)  # the same memories come back query after query
def mostly_asks(text: str, stated_words: int = STATED_WORDS) -> bool:
    """Whether `text` asks something and states little besides: its sentences that are not questions
    hold at most `stated_words` words ("What other hobbies do you have?", "That's awesome, Evan!
    What made the biggest difference?"; not "I went to the LGBTQ support group yesterday and it was
    so powerful, the stories moved me. Have you ever been?")."""
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip()] or [text.strip()]
    asked = [s for s in sentences if _is_question(s)]
    if not asked:
        return False
    stated = sum(len(_WORD_RUN.findall(s)) for s in sentences if s not in asked)
    return stated <= stated_words


def _is_question(sentence: str) -> bool:
    if sentence.endswith(("?", "？")):
        return True
    if CJK.search(sentence):
        return bool(_QUESTION_ZH.search(sentence))
    return bool(_QUESTION_OPENING.search(sentence))


@lru_cache(maxsize=4096)
def query_terms(query: str) -> tuple[str, ...]:
    """The query's distinct full-text terms that can be evidence: its analysed terms without the
    date words; for CJK text its two-character terms (a single character matches too much to count)."""
    out: dict[str, None] = {}
    for term in analyse(query):
        if term in _DATE_WORDS or term.isdigit():
            continue
        if CJK.match(term) and len(term) < 2:
            continue
        out[term] = None
    return tuple(out)


def lexical_evidence(terms: Sequence[str], best_match_terms: Iterable[str], ignored: Iterable[str] = ()) -> float:
    """The share of the query's `terms` (minus `ignored`: the speakers' names, which every turn of a
    speaker is indexed with) that the best full-text match holds, in [0, 1]; 0 when none is left."""
    skip = set(ignored)
    wanted = [t for t in terms if t not in skip]
    if not wanted:
        return 0.0
    held = set(best_match_terms)
    return sum(1 for t in wanted if t in held) / len(wanted)
