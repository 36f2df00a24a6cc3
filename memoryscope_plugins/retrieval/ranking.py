"""Rank fusion and the adjustments that follow it. Pure functions over candidates: no I/O.

Order of operations (each step documented in docs/retrieval.md):
1. fusion of the full-text and vector channels (a weighted sum of normalised scores, or
   reciprocal rank fusion);
2. conversational neighbours share their score; people the query names lift their own turns;
3. type weight (insight > observation/custom > turn);
4. time: memories whose message or event time meets the query's (widened) range get a boost;
5. recency decay (off by default), and for a question about the present ("now", "现在") a
   preference for the newer of similar memories;
6. for a question, the lines that only ask something themselves give way to those that state;
7. de-duplication of identical content.
"""

from __future__ import annotations

import math
import operator
import re
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Mapping, Sequence

from ..indexing import full_text
from ..settings import RetrievalSettings
from ..storage.base import Candidate
from ..storage.text_analysis import CJK, analyse
from ..timeparse import detect_language
from ..types import MemoryType, ScoredMemory, TimeRange, as_aware
from .noise_floor import calibrated
from .query_analysis import mostly_asks

#: the sort key of every ranking here (best first with reverse=True; a stable sort keeps ties in order)
_SCORE = operator.attrgetter("score")


def fuse(candidates: Sequence[Candidate], cfg: RetrievalSettings, *,
         vectors: tuple[Mapping[str, float], Mapping[str, float]] | None = None) -> list[ScoredMemory]:
    """Combine the two channels into one score per memory (higher is better). `vectors`: the
    (cosines, ranking scores) of the vector side by memory id (`hubness.vector_scores`); without
    it, the store's cosines for both."""
    cosines, ranking = vectors if vectors is not None else _store_cosines(candidates)
    if cfg.fusion == "linear":
        return _linear(candidates, cfg, cosines, ranking)
    # the store's ranks, or the ranks of the rescored vector side when it was rescored
    order = sorted(ranking, key=lambda i: -ranking[i]) if vectors is not None else []
    vector_rank = {memory_id: rank for rank, memory_id in enumerate(order, start=1)}
    out = []
    for cand in candidates:
        rank = vector_rank.get(cand.memory.id) if vectors is not None else cand.vector_rank
        text = cfg.text_weight / (cfg.rrf_k + cand.text_rank) if cand.text_rank else 0.0
        vector = cfg.vector_weight / (cfg.rrf_k + rank) if rank else 0.0
        out.append(ScoredMemory(memory=cand.memory, score=text + vector,
                                scores=_channel_scores(cand, cosines, text + vector)))
    return out


def _store_cosines(candidates: Sequence[Candidate]) -> tuple[dict[str, float], dict[str, float]]:
    found = {c.memory.id: c.vector_score for c in candidates if c.vector_score is not None}
    return found, found


def _channel_scores(cand: Candidate, cosines: Mapping[str, float], fused: float) -> dict[str, float]:
    scores = {"fused": fused}
    if cand.text_score is not None:
        scores["bm25"] = cand.text_score
    cosine = cosines.get(cand.memory.id)
    if cosine is not None:
        scores["cosine"] = cosine
    return scores


def _linear(candidates: Sequence[Candidate], cfg: RetrievalSettings, cosines: Mapping[str, float],
            ranking: Mapping[str, float]) -> list[ScoredMemory]:
    """Weighted sum of the channels, each scaled to [0, 1]: BM25 by its best score (a memory
    without the query's terms scores 0), the vector side by min-max over the candidates (cosine has
    no natural zero: unrelated texts still score 0.1-0.3)."""
    best_text = max((c.text_score for c in candidates if c.text_score is not None), default=0.0)
    # the scale is the vector channel's own candidates'; another candidate (found by full text) is
    # scored on it too, and one below the channel's last counts 0, as it did before it was scored
    channel = [ranking[c.memory.id] for c in candidates if c.vector_rank is not None and c.memory.id in ranking]
    bounds = channel or list(ranking.values())
    lo, hi = (min(bounds), max(bounds)) if bounds else (0.0, 0.0)
    # per-channel multipliers computed once: this loop runs for every candidate of every query
    text_scale = cfg.text_weight / best_text if best_text > 0 else 0.0
    vector_scale = cfg.vector_weight / (hi - lo) if hi > lo else 0.0
    out = []
    ranking_of, cosine_of = ranking.get, cosines.get
    for cand in candidates:  # `_channel_scores` inlined: the same scores, in the same order
        memory_id = cand.memory.id
        text_score = cand.text_score
        fused = 0.0
        if text_score is not None:
            fused += text_score * text_scale
        score = ranking_of(memory_id)
        if score is not None and score > lo:
            fused += (score - lo) * vector_scale
        scores = {"fused": fused}
        if text_score is not None:
            scores["bm25"] = text_score
        cosine = cosine_of(memory_id)
        if cosine is not None:
            scores["cosine"] = cosine
        out.append(ScoredMemory(cand.memory, fused, scores))
    return out


def propagate_neighbours(ranked: list[ScoredMemory], weight: float) -> list[ScoredMemory]:
    """A turn inherits `weight` x the better score of the turns just before and after it in the
    same conversation: the answer to a question often sits next to the turn that matches it."""
    if weight <= 0:
        return ranked
    before = {item.memory.id: item.score for item in ranked}
    after: dict[str, float] = {}
    for item in ranked:
        previous = item.memory.previous_id
        if previous is not None and previous in before:
            score = item.score
            if score > after.get(previous, 0.0):
                after[previous] = score
    for item in ranked:
        memory = item.memory
        previous = memory.previous_id
        near = after.get(memory.id, 0.0)
        if previous is not None:
            other = before.get(previous, 0.0)
            if other > near:  # max(near, other): near on a tie, as max keeps the first
                near = other
        if near > 0:
            item.score += weight * near
            item.scores["neighbour"] = weight * near
    return ranked


_WORDS = re.compile(r"\w+", re.UNICODE)


def boost_named_speakers(ranked: list[ScoredMemory], query: str, boost: float) -> list[ScoredMemory]:
    """When the query names some (not all) of the people speaking in the candidates, their turns,
    and other memories that name them, gain `boost`."""
    if boost <= 0:
        return ranked
    speakers = {item.memory.speaker for item in ranked if item.memory.speaker}
    if len(speakers) < 2:
        return ranked
    words = set(_WORDS.findall(query.casefold()))
    named = {s for s in speakers if (s.split() or [""])[0].casefold() in words}
    if not named or len(named) == len(speakers):
        return ranked
    first_names = {(s.split() or [""])[0].casefold() for s in named}
    for item in ranked:
        memory = item.memory
        if memory.speaker in named or (memory.speaker is None
                                       and first_names & set(_WORDS.findall(memory.content.casefold()))):
            item.score += boost
            item.scores["speaker"] = boost
    return ranked


def widen(time_range: TimeRange, days: float) -> TimeRange:
    """The query's range made fuzzy: `days` more on each side (open sides stay open)."""
    pad = timedelta(days=days)
    return TimeRange(None if time_range.start is None else time_range.start - pad,
                     None if time_range.end is None else time_range.end + pad)


def meets(memory_start: datetime | None, memory_end: datetime | None, created: datetime,
          time_range: TimeRange) -> bool:
    """Whether the memory's event time overlaps the range, or its message time falls inside it."""
    return _meets(memory_start, memory_end, created, _aware_range(time_range))


def _aware_range(time_range: TimeRange) -> TimeRange:
    return TimeRange(_aware(time_range.start), _aware(time_range.end))


def _meets(memory_start: datetime | None, memory_end: datetime | None, created: datetime, rng: TimeRange) -> bool:
    """`meets`, with the range's sides made timezone-aware already (once per ranking, not per memory)."""
    if memory_start is not None and rng.overlaps(as_aware(memory_start),
                                                  None if memory_end is None else as_aware(memory_end)):
        return True
    return rng.overlaps(as_aware(created), None)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else as_aware(moment)


def adjust(ranked: list[ScoredMemory], cfg: RetrievalSettings, *, time_range: TimeRange | None,
           now: datetime) -> list[ScoredMemory]:
    """Apply type weights, the time boost and recency, in place; returns the list sorted."""
    boosting = time_range is not None and cfg.time_mode == "boost" and cfg.time_boost > 0
    fuzzy = widen(time_range, cfg.time_fuzz_days) if boosting and time_range is not None else None
    now = as_aware(now)
    type_weight = {kind: cfg.type_weights.get(kind.value, 1.0) for kind in MemoryType}
    if fuzzy is None and not cfg.recency_half_life_days:  # the type weights alone (the usual case)
        for item in ranked:
            item.score *= type_weight[item.memory.type]
            item.scores["final"] = item.score
        ranked.sort(key=_SCORE, reverse=True)
        return ranked
    inside = _aware_range(time_range) if time_range is not None and fuzzy is not None else None
    near = _aware_range(fuzzy) if fuzzy is not None else None
    for item in ranked:
        memory = item.memory
        factor = type_weight[memory.type]
        if inside is not None and near is not None:  # i.e. boosting
            # the full boost inside the range, half of it in the fuzzy margin around it
            if _meets(memory.event_start, memory.event_end, memory.created_at, inside):
                factor *= 1.0 + cfg.time_boost
                item.scores["time_match"] = 1.0
            elif _meets(memory.event_start, memory.event_end, memory.created_at, near):
                factor *= 1.0 + cfg.time_boost / 2
                item.scores["time_match"] = 0.5
        if cfg.recency_half_life_days:
            age_days = max(0.0, (now - as_aware(memory.created_at)).total_seconds() / 86400.0)
            decay = math.pow(0.5, age_days / cfg.recency_half_life_days)
            factor *= (1.0 - cfg.recency_weight) + cfg.recency_weight * decay
        item.score *= factor
        item.scores["final"] = item.score
    ranked.sort(key=_SCORE, reverse=True)
    return ranked


def prefer_recent(ranked: list[ScoredMemory], half_life_days: float, weight: float) -> list[ScoredMemory]:
    """For a question about the present: score x (1 - weight + weight x 0.5^(age / half-life)),
    age counted back from the newest candidate (not from now: a user back after a year still
    gets their latest state first); returns the list sorted."""
    if not ranked or weight <= 0:
        return ranked
    newest = max(as_aware(item.memory.created_at) for item in ranked)
    for item in ranked:
        age_days = (newest - as_aware(item.memory.created_at)).total_seconds() / 86400.0
        factor = (1.0 - weight) + weight * math.pow(0.5, age_days / half_life_days)
        item.score *= factor
        item.scores["present"] = factor
        item.scores["final"] = item.score
    ranked.sort(key=_SCORE, reverse=True)
    return ranked


def demote_asking_lines(ranked: list[ScoredMemory], weight: float) -> list[ScoredMemory]:
    """For a question or a request: a memory that mostly asks something itself ("What other hobbies
    have you found?", "That's awesome! What made the difference?": `query_analysis.mostly_asks`) keeps
    `weight` of its score. It matches a question's words well and rarely holds the answer, which is
    another line, often the next turn (that one inherited its score first, see
    `propagate_neighbours`). Returns the list sorted."""
    if weight >= 1:
        return ranked
    for item in ranked:
        if _mostly_asks(item.memory.content):
            item.score *= weight
            item.scores["asking"] = weight
            item.scores["final"] = item.score
    ranked.sort(key=_SCORE, reverse=True)
    return ranked


def relevant(ranked: list[ScoredMemory], min_relevance: float, *,
             noise_floor: float | Mapping[str, float] = 0.0,
             cjk_terms: frozenset[str] | None = None) -> list[ScoredMemory]:
    """The memories that meet the relevance floor: they share a word with the query (BM25 > 0), or
    their cosine to the query, calibrated to the embedder's `noise_floor` (0 = unrelated texts,
    1 = the same text), is at least `min_relevance`, or they fall in the time the query names
    ("what happened in March?"), or they are the turn just before or after one that does (the
    answer next to the matching question). Fused scores cannot say this: they are scaled per
    query, so the best candidate of an unrelated query ("hello") scores high too.

    `noise_floor` may be one value, or one per memory language (``{"en": 0.72, "zh": 0.71}``: the
    floor between the query's language and the memory's, as `detect_language` reads it).

    `cjk_terms`, for a Chinese (Japanese, Korean) query: its analysed terms (`query_cjk_terms`).
    One shared character (好, 天, 去) is no shared word: a memory shares a word when it has one of
    the query's two-character terms, or two of its characters ("喝酒" and "喝红酒")."""
    if min_relevance <= -1:
        return ranked

    def shares_a_word(item: ScoredMemory) -> bool:
        if item.scores.get("bm25", 0.0) <= 0:
            return False
        return cjk_terms is None or _shares_cjk_word(cjk_terms, full_text(item.memory).casefold())

    floors = noise_floor if isinstance(noise_floor, Mapping) else {"en": noise_floor, "zh": noise_floor}
    lowest, highest = min(floors.values()), max(floors.values())
    # `calibrated(cosine, floor)` inlined for the two bounds (the same arithmetic): this runs for
    # every candidate of every query
    span_low, span_high = 1.0 - lowest, 1.0 - highest

    def close_enough(item: ScoredMemory, cosine: float) -> bool:
        high = (cosine - highest) / span_high
        if (high if high > 0.0 else 0.0) >= min_relevance:
            return True
        low = (cosine - lowest) / span_low
        if (low if low > 0.0 else 0.0) < min_relevance:
            return False
        # in between: the memory's language decides (the regex runs for these few only)
        return calibrated(cosine, floors[detect_language(item.memory.content)]) >= min_relevance

    passing = set()
    for item in ranked:  # what the memory itself shows: close in meaning, in the time asked, a shared word
        scores = item.scores
        cosine = scores.get("cosine")
        if ((cosine is not None and close_enough(item, cosine)) or scores.get("time_match", 0.0) >= 1.0
                or shares_a_word(item)):
            passing.add(item.memory.id)
    beside = {item.memory.previous_id for item in ranked if item.memory.id in passing and item.memory.previous_id}
    return [item for item in ranked if item.memory.id in passing or item.memory.id in beside
            or (item.memory.previous_id is not None and item.memory.previous_id in passing)]


def query_cjk_terms(text: str) -> frozenset[str] | None:
    """The query's analysed terms when it holds CJK text (see `relevant`); None otherwise: other
    languages' terms are whole words already."""
    return frozenset(analyse(text)) if CJK.search(text) else None


def _shares_cjk_word(query_terms: frozenset[str], text: str) -> bool:
    """Whether `text` holds a two-character term of the query, or two of its characters. CJK
    terms are characters and adjacent pairs, so a substring test equals analysing `text` (about
    ten times faster over a hundred candidates)."""
    chars = 0
    query_chars = 0
    for term in query_terms:
        if len(term) == 1 and CJK.match(term):
            query_chars += 1
            if term in text:
                chars += 1
                if chars >= 2:
                    return True
        elif len(term) > 1 and term in text:
            return True  # a bigram, or an English word in a mixed query: its stem may be longer
    return chars == 1 and query_chars < 2  # a one-character question ("猫？") has nothing more to share


@lru_cache(maxsize=65536)
def _mostly_asks(content: str) -> bool:
    """`mostly_asks`, once per text: the same memories come back as candidates query after query."""
    return mostly_asks(content)


_NORMALISE = re.compile(r"[\W_]+", re.UNICODE)


@lru_cache(maxsize=65536)
def _same_content_key(content: str) -> str:
    return _NORMALISE.sub(" ", content).strip().casefold()


def deduplicate(ranked: list[ScoredMemory], limit: int) -> list[ScoredMemory]:
    """The best `limit` memories, keeping only the best-ranked of those whose content is the same
    up to case and punctuation. Looks no further down the ranking than it must."""
    seen: set[str] = set()
    out = []
    for item in ranked:
        key = _same_content_key(item.memory.content)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) == limit:
            break
    return out
