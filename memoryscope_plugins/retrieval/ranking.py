"""Rank fusion and the adjustments that follow it. Pure functions over candidates: no I/O.

Order of operations (each step documented in docs/retrieval.md):
1. fusion of the full-text and vector channels (reciprocal rank fusion, or a weighted sum of
   min-max-normalised scores);
2. type weight (insight > observation/custom > turn);
3. time: memories whose message or event time meets the query's (widened) range get a boost;
4. recency decay (off by default);
5. de-duplication of identical content.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from typing import Sequence

from ..settings import RetrievalSettings
from ..storage.base import Candidate
from ..types import ScoredMemory, TimeRange, as_aware


def fuse(candidates: Sequence[Candidate], cfg: RetrievalSettings) -> list[ScoredMemory]:
    """Combine the two channels into one score per memory (higher is better)."""
    if cfg.fusion == "linear":
        return _linear(candidates, cfg)
    out = []
    for cand in candidates:
        text = cfg.text_weight / (cfg.rrf_k + cand.text_rank) if cand.text_rank else 0.0
        vector = cfg.vector_weight / (cfg.rrf_k + cand.vector_rank) if cand.vector_rank else 0.0
        scores = {"fused": text + vector}
        if cand.text_score is not None:
            scores["bm25"] = cand.text_score
        if cand.vector_score is not None:
            scores["cosine"] = cand.vector_score
        out.append(ScoredMemory(memory=cand.memory, score=text + vector, scores=scores))
    return out


def _minmax(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    lo, hi = min(present), max(present)
    span = hi - lo
    return [0.0 if v is None else (1.0 if span == 0 else (v - lo) / span) for v in values]


def _linear(candidates: Sequence[Candidate], cfg: RetrievalSettings) -> list[ScoredMemory]:
    text = _minmax([c.text_score for c in candidates])
    vector = _minmax([c.vector_score for c in candidates])
    out = []
    for cand, t, v in zip(candidates, text, vector):
        fused = cfg.text_weight * t + cfg.vector_weight * v
        out.append(ScoredMemory(memory=cand.memory, score=fused, scores={"fused": fused}))
    return out


def widen(time_range: TimeRange, days: float) -> TimeRange:
    """The query's range made fuzzy: `days` more on each side (open sides stay open)."""
    pad = timedelta(days=days)
    return TimeRange(None if time_range.start is None else time_range.start - pad,
                     None if time_range.end is None else time_range.end + pad)


def meets(memory_start: datetime | None, memory_end: datetime | None, created: datetime,
          time_range: TimeRange) -> bool:
    """Whether the memory's event time overlaps the range, or its message time falls inside it."""
    rng = TimeRange(_aware(time_range.start), _aware(time_range.end))
    if memory_start is not None and rng.overlaps(as_aware(memory_start),
                                                  None if memory_end is None else as_aware(memory_end)):
        return True
    return rng.overlaps(as_aware(created), None)


def _aware(moment: datetime | None) -> datetime | None:
    return None if moment is None else as_aware(moment)


def adjust(ranked: list[ScoredMemory], cfg: RetrievalSettings, *, time_range: TimeRange | None,
           now: datetime) -> list[ScoredMemory]:
    """Apply type weights, the time boost and recency, in place; returns the list sorted."""
    fuzzy = widen(time_range, cfg.time_fuzz_days) if time_range is not None else None
    now = as_aware(now)
    for item in ranked:
        memory = item.memory
        factor = cfg.type_weights.get(memory.type.value, 1.0)
        if fuzzy is not None and cfg.time_mode == "boost" and meets(
                memory.event_start, memory.event_end, memory.created_at, fuzzy):
            factor *= 1.0 + cfg.time_boost
            item.scores["time_match"] = 1.0
        if cfg.recency_half_life_days:
            age_days = max(0.0, (now - as_aware(memory.created_at)).total_seconds() / 86400.0)
            decay = math.pow(0.5, age_days / cfg.recency_half_life_days)
            factor *= (1.0 - cfg.recency_weight) + cfg.recency_weight * decay
        item.score *= factor
        item.scores["final"] = item.score
    ranked.sort(key=lambda s: s.score, reverse=True)
    return ranked


_NORMALISE = re.compile(r"[\W_]+", re.UNICODE)


def deduplicate(ranked: list[ScoredMemory]) -> list[ScoredMemory]:
    """Keep the best-ranked of memories whose content is the same up to case and punctuation."""
    seen: set[str] = set()
    out = []
    for item in ranked:
        key = _NORMALISE.sub(" ", item.memory.content).strip().casefold()
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
    return out
