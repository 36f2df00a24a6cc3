"""A second retrieval hop over the names the first results mention (no LLM).

"What does Melanie's daughter like?" finds "Melanie: my daughter Ava ..." first; the turns about
Ava say "Ava" but neither "Melanie" nor "daughter". The names in the best first hits (capitalised
words inside a sentence, minus the speakers and what the query already says) are searched again
in the full-text channel, and what that finds joins the ranking below the hit that named it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

from ..types import ScoredMemory

_CAPITALISED = re.compile(r"\b[A-Z][a-z][A-Za-z'’-]*")
_POSSESSIVE = re.compile(r"['’]s?$")
_SENTENCE_END = frozenset(".!?:\"“(")
_COMMON = frozenset("""
i i'm i've i'd i'll im ive the a an and but or so if it its it's this that these those there here
what when where who why how yes yeah yep no nope oh wow hey hi hello thanks thank ok okay sure well
mon tue wed thu fri sat sun monday tuesday wednesday thursday friday saturday sunday january february
march april may june july august september october november december mom dad mr mrs ms dr god lol omg
""".split())


def named_terms(hits: Iterable[ScoredMemory], query: str, *, limit: int) -> list[str]:
    """Up to `limit` names the hits mention that the query does not, most mentioned first."""
    hits = list(hits)
    said_by = {item.memory.speaker.lower() for item in hits if item.memory.speaker}
    asked = {word.lower() for word in re.findall(r"[A-Za-z][A-Za-z'’-]*", query)}
    counts: Counter[str] = Counter()
    for item in hits:
        for word in _capitalised_inside_sentences(item.memory.content):
            low = word.lower()
            if low in _COMMON or low in said_by or low in asked or low.rstrip("s'’") in asked:
                continue
            counts[word] += 1
    return [word for word, _ in counts.most_common(limit)]


def _capitalised_inside_sentences(text: str) -> list[str]:
    """Capitalised words that do not open a sentence: "went to Boston", not "Yeah, ..."."""
    out = []
    for match in _CAPITALISED.finditer(text):
        before = text[:match.start()].rstrip()
        if before and before[-1] not in _SENTENCE_END:
            out.append(_POSSESSIVE.sub("", match.group()))
    return out


def merge_second_hop(ranked: list[ScoredMemory], found: Sequence[ScoredMemory], weight: float) -> list[ScoredMemory]:
    """`ranked` with the second hop's memories added: a memory the first hop missed enters at
    `weight` x its share of the second hop's best score x the first hop's best score."""
    if not ranked or not found or weight <= 0:
        return ranked
    top = ranked[0].score
    best = max(item.score for item in found)
    if best <= 0:
        return ranked
    present = {item.memory.id for item in ranked}
    added = []
    for item in found:
        if item.memory.id in present:
            continue
        item.scores["second_hop"] = weight * item.score / best
        item.score = top * item.scores["second_hop"]
        added.append(item)
    if not added:
        return ranked
    return sorted([*ranked, *added], key=lambda s: s.score, reverse=True)


