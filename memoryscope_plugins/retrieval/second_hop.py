"""A second hop: the people, places and things named in the best hits lead to more memories.

"What does the person who moved to Boston do for a living?" finds "My friend Anna moved to
Boston"; the turn that answers ("Anna works night shifts as a nurse") shares no word with the
question. The names the best first-hop hits hold and the question does not (`hop_terms`) are
searched again, with the question's words, by full text only (no embedding, no LLM), for the same
user with the same filter; of the memories found that hold one of those names, the best few not
shown yet join the context as extra lines (`second_hop`), like the turns next to a hit. They never
enter the ranked memories: the first hop's order, and what recall measures, stay as they are.

Names, without a tagger: in English, capitalised words that are not sentence openers used as
ordinary words, stop words, weekdays or months; in Chinese (no word segmenter), the hit's
two-character terms, as the full-text index cuts them, that the question and the speakers' names do
not hold, plus any Latin-script word ("Figma", "mini"): the index's BM25 weighs the rare ones (a
name, a thing) above the common ones. The speakers' own names are left out in both languages: they
are in every turn.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Iterable, Sequence

from ..storage.base import Candidate, MemoryFilter, SearchRequest
from ..storage.text_analysis import CJK, CJK_STOP_CHARS, STOP_WORDS, analyse
from ..types import Memory, MemoryStatus, ScoredMemory
from .neighbours import ShownMemories

# a capitalised word, with the capitalised words right after it ("New York", "Mia's")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_SENTENCE_END = re.compile(r"[.!?:;\"“”(\n]\s*$")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’-]+")
_CJK_RUN = re.compile(f"(?:{CJK.pattern})+")
_NOT_NAMES = frozenset(
    """i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december mon tue wed thu fri sat sun today tomorrow
    yesterday mr mrs ms dr""".split())
MAX_TERMS = 12  # a handful of names is what a hop needs; more only dilutes the search


def _ordinary(word: str, text: str) -> bool:
    """Whether lower-case `word` stands as a word of its own in `text` (an ordinary word there)."""
    start = text.find(word)
    while start != -1:
        end = start + len(word)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "'_") and not (after.isalnum() or after in "'_"):
            return True
        start = text.find(word, start + 1)
    return False


@functools.lru_cache(maxsize=4096)
def _terms(word: str) -> frozenset[str]:
    """`word`'s analysed terms (names and speakers recur from query to query: analysed once)."""
    return frozenset(analyse(word))


@functools.lru_cache(maxsize=1024)
def _speaker_terms(speaker: str) -> frozenset[str]:
    return _terms(speaker) | frozenset(_chinese_terms(speaker))


def english_names(text: str, ordinary_text: str | Callable[[], str]) -> list[str]:
    """The capitalised names in `text`, as the second hop reads them; `ordinary_text` (or the
    function making it, called only when a capitalised word opens a sentence) tells an ordinary
    word opening a sentence from a name."""
    names: list[str] = []
    for match in _CAPITALISED.finditer(text):
        words = [w.strip("'’-") for w in match.group(0).split()]
        opener = match.start() == 0 or bool(_SENTENCE_END.search(text[:match.start()]))
        for position, word in enumerate(words):
            folded = word.casefold()
            base = folded[:-2] if folded.endswith(("'s", "’s")) else folded
            if len(base) < 2 or base in STOP_WORDS or base in _NOT_NAMES:
                continue
            if opener and position == 0 and _ordinary(
                    base, ordinary_text if isinstance(ordinary_text, str) else ordinary_text()):
                continue  # "Thanks", "Great": an ordinary word that opens a sentence
            names.append(word[:len(base)])
    return names


def _chinese_terms(text: str) -> list[str]:
    terms: list[str] = []
    for run in _CJK_RUN.findall(text):
        terms.extend(a + b for a, b in zip(run, run[1:]) if a not in CJK_STOP_CHARS and b not in CJK_STOP_CHARS)
    return terms


def hop_terms(hits: Sequence[Memory], query: str, *, speakers: Iterable[str] = (),
              ordinary_text: Iterable[str] = ()) -> list[str]:
    """The names in `hits` (best first) that `query` and `speakers` do not hold, each once, at most
    `MAX_TERMS`. `ordinary_text`: texts whose lower-case words are ordinary words, not names, when
    they open a sentence ("Thanks", "Great")."""
    excluded = set(analyse(query))
    for speaker in speakers:
        if speaker:
            excluded |= _speaker_terms(speaker)
    texts = list(ordinary_text)
    # joined only for the few words that open a sentence, and only once
    ordinary = functools.cache(lambda: "\n".join(texts))
    found: dict[str, None] = {}
    for memory in hits:
        text = memory.content
        for name in english_names(text, ordinary):
            if not _terms(name) & excluded:
                found.setdefault(name, None)
        if CJK.search(text):
            for word in _LATIN_WORD.findall(text):
                if word.casefold() not in STOP_WORDS and not _terms(word) & excluded:
                    found.setdefault(word, None)
            for term in _chinese_terms(text):
                if term not in excluded:
                    found.setdefault(term, None)
    return list(found)[:MAX_TERMS]


def second_hop(chosen: Sequence[ScoredMemory], shown: Sequence[Memory], query: str,
               search: Callable[[SearchRequest], list[Candidate]], *, user_id: str, flt: MemoryFilter,
               hits: int, limit: int, candidates: Iterable[Memory] = (),
               statuses: tuple[MemoryStatus, ...] | None = (MemoryStatus.ACTIVE,)) -> list[Memory]:
    """Up to `limit` memories found by searching the names in the best `hits` of `chosen` (see the
    module docstring), best first, leaving out what `chosen` and `shown` (the neighbour lines)
    hold or repeat. `search` is the store's, for `user_id` with the first hop's filter `flt`;
    `candidates`: the first hop's, to tell names from ordinary words and to know the speakers."""
    if hits <= 0 or limit <= 0 or not chosen:
        return []
    pool = list(candidates)
    best = [item.memory for item in chosen[:hits]]
    speakers = {m.speaker for m in [*pool, *best, *shown] if m.speaker}
    terms = hop_terms(best, query, speakers=speakers, ordinary_text=(m.content for m in pool))
    if not terms:
        return []
    # the query's words too: of the memories that hold a name, those nearer the question first
    found = search(SearchRequest(user_id=user_id, text=f"{query} {' '.join(terms)}", vector=None, filter=flt,
                                 limit=limit + hits + len(shown) + 10))
    found.sort(key=lambda c: (c.text_rank or 1_000_000))
    needles = [term.casefold() for term in terms]
    holding_a_name = (
        candidate.memory for candidate in found
        # the store searched one user; a hop never crosses users, whatever a backend returns; and a
        # memory found by the query's words alone is the first hop's business, not a hop
        if candidate.memory.user_id == user_id
        and any(needle in candidate.memory.content.casefold() for needle in needles))
    return ShownMemories([*(item.memory for item in chosen), *shown]).take_new(holding_a_name, statuses, limit)
