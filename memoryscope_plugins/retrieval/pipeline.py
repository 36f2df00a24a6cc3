"""Retrieval, top to bottom: one query in, ranked memories and a context block out. No LLM.

`retrieve` runs the stages in order; each is a function of its own:

1. `user_ledger`, `analyse_query` and `query_time`: the user's entity ledger (cached), what the query
   is (question, request or statement; its terms, names and parts: `query_analysis`) and the time it
   names ("last weekend", "上周三"), relative to the request's moment;
2. `embed_query`: the query's vector (a part has none of its own: it narrows the words, not the meaning);
3. `rank_query`, for the query and each part: `search_candidates` (both channels of the store for the
   query, full text only for a part; the query's time filtering only with ``retrieval.time_mode =
   "filter"``), `weigh_channels` (this
   query's weights from its lexical evidence and kind), `candidate_vectors` (every candidate scored
   by both channels, the hubs taken down), `fuse_candidates` (one score per memory, shared with the
   turns next to a match and raised for the speakers the query names), `adjust_scores` (type
   weights, the query's time, recency, for a question about the present the newest state first;
   lines that mostly ask give way for a question) and `relevance_floor` (only what shares a word with
   the query, is close enough in meaning, or falls in the time it names);
4. `merge_rankings`: the query's and its parts' rankings taken in turn;
5. `entity_first`: for a question about one of the user's entities, that entity's memories first
   and the lines only addressing it last;
6. `shortlist` and `rerank`: the best few (duplicates left out), reordered by the reranker when one is used;
7. `neighbour_turns` and `hop`: the turns around the best hits and the memories naming who or what
   they mention (through the ledger when it knows more than the speakers, else by a second
   full-text search), as extra context lines;
8. `context_notes` and `format_context` (retrieval/context.py): the profile and the entities that
   matter, when set, then the dated lines an LLM reads.

The engine (`MemoryScope.retrieve`) checks the arguments into a `RetrievalRequest` and calls `retrieve`.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Sequence

import numpy as np

from ..errors import ModelError
from ..indexing import dated_text
from ..models.base import Embedder, Reranker
from ..settings import RerankerSettings, RetrievalSettings, Settings
from ..storage.base import Candidate, MemoryFilter, MemoryStore, SearchRequest
from ..timeparse import ParsedTime, detect_language, parse_time
from ..types import Memory, MemoryStatus, MemoryType, RetrievalResult, ScoredMemory, TimeRange
from . import ledger_cache
from .channel_weights import query_evidence, weigh_channels
from .context import format_context
from .context_notes import entities_note, entities_that_matter, profile_note
from .entity_questions import about_entity
from .hubness import vector_scores
from .language_profile import ranking_settings
from .ledger_cache import UserLedger
from .ledger_hop import ledger_hop, usable
from .neighbours import turn_neighbours
from .noise_floor import noise_floor, query_floor
from .present import asks_about_present
from .query_analysis import QueryAnalysis, analyse_query, part_analysis
from .ranking import (
    adjust,
    boost_named_speakers,
    deduplicate,
    demote_asking_lines,
    fuse,
    prefer_recent,
    propagate_neighbours,
    query_cjk_terms,
    relevant,
    widen,
)
from .second_hop import second_hop

log = logging.getLogger("memoryscope_plugins")


@dataclass(frozen=True)
class RetrievalRequest:
    """The checked arguments of one retrieval (see `MemoryScope.retrieve` for their meaning)."""

    user_id: str
    query: str
    now: datetime
    top_k: int
    min_relevance: float | None  # -1: no floor; None: the settings' (`floor_for`)
    agent_id: str | None = None
    types: tuple[MemoryType, ...] | None = None
    include_expired: bool = False
    time_range: TimeRange | None = None  # the caller's explicit range, a filter
    rerank: bool | None = None  # None: when a reranker is configured
    language: str | None = None  # of the context; None: the settings' or the query's

    @property
    def statuses(self) -> tuple[MemoryStatus, ...] | None:
        """The statuses searched: active only, or every status with `include_expired`."""
        return None if self.include_expired else (MemoryStatus.ACTIVE,)


def retrieve(request: RetrievalRequest, *, settings: Settings, store: MemoryStore, embedder: Embedder,
             reranker: Reranker | None, started: float | None = None) -> RetrievalResult:
    """Run every stage for `request`. `started`: the `time.perf_counter()` the timings count from
    (the engine's, so they include checking the arguments); default now."""
    started = time.perf_counter() if started is None else started
    cfg = settings.retrieval
    timings: dict[str, float] = {}
    ledger = user_ledger(store, request.user_id, cfg)
    analysis = analyse_query(request.query, names_in(ledger, request.query))
    queries = [request.query, *(analysis.parts if cfg.query_parts else ())]
    parsed = query_time(request.query, request.now)
    language = request.language or (settings.language if settings.language != "auto" else parsed.language)
    timings["parse_ms"] = _ms(started)

    t = time.perf_counter()
    vector = embed_query(embedder, request.query)
    timings["embed_ms"] = _ms(t)
    t = time.perf_counter()
    flt = memory_filter(request, parsed, cfg)
    noise = query_noise(embedder, request, parsed, cfg, vector)
    texts = [search_text(request.query, parsed), *queries[1:]]
    # a part is searched by its own words and scored with the whole query's meaning
    rankings = [rank_query(store, embedder, request, query, text, vector, analysis, parsed, flt, cfg, noise=noise,
                           by_vector=index == 0)
                for index, (query, text) in enumerate(zip(queries, texts))]
    candidates = merge_candidates([found for _, found in rankings])
    ranked = merge_rankings([part for part, _ in rankings])
    timings["search_ms"] = _ms(t)

    t = time.perf_counter()
    reranking = reranker is not None and (request.rerank is None or request.rerank)
    depth = max(request.top_k, settings.reranker.candidates) if reranking else request.top_k
    ranked, asked = entity_first(ranked, request, ledger, store, flt, cfg)
    ranked = shortlist(ranked, depth, deduplicated=cfg.deduplicate)
    timings["rank_ms"] = _ms(t)
    if reranking and ranked:
        assert reranker is not None
        t = time.perf_counter()
        ranked = rerank(request.query, ranked, reranker, settings.reranker)
        timings["rerank_ms"] = _ms(t)
    chosen = ranked[:request.top_k]
    for item in chosen:  # stores may share records between calls: the caller gets its own
        item.memory = item.memory.copy()

    t = time.perf_counter()
    neighbours = neighbour_turns(store, request, chosen, candidates, cfg)
    extra = hop(store, request, chosen, neighbours, candidates, flt, cfg, vector=vector, ledger=ledger)
    notes = context_notes(store, request, ledger, [*chosen, *neighbours, *extra], language, cfg, asked=asked)
    context = format_context([*chosen, *neighbours, *extra], language, with_time=cfg.context_with_time,
                             now=request.now, resolve_times=cfg.context_resolve_times,
                             present=asks_about_present(request.query), notes=notes)
    timings["context_ms"] = _ms(t)
    timings["total_ms"] = _ms(started)
    return RetrievalResult(query=request.query, memories=chosen, context=context, time_range=parsed.range,
                           timings_ms=timings, neighbours=neighbours, second_hop=extra)


def rank_query(store: MemoryStore, embedder: Embedder, request: RetrievalRequest, query: str, text: str,
               vector: np.ndarray | None, analysis: QueryAnalysis, parsed: ParsedTime, flt: MemoryFilter,
               settings: RetrievalSettings, *, noise: float | Mapping[str, float] = 0.0,
               by_vector: bool = True) -> tuple[list[ScoredMemory], list[Candidate]]:
    """One query's ranking (the whole query's, or one part's), searched by `text` and, with
    `by_vector`, by `vector` too: every candidate scored by both channels (`hubness`, with `vector`),
    fused with this query's channel weights (`channel_weights`: its language, lexical evidence and
    kind; the whole query's kind decides a part's too), adjusted (type, time, recency) and kept above
    the relevance floor (cosines calibrated by `noise`, `query_noise`). Also returns the candidates."""
    cfg = ranking_settings(settings, parsed.language, multilingual=getattr(embedder, "multilingual", False))
    candidates = search_candidates(store, request, text, vector if by_vector else None, flt, cfg.candidates)
    own = analysis if query == request.query else part_analysis(analysis, query)
    speakers = {c.memory.speaker for c in candidates if c.memory.speaker}
    cfg = weigh_channels(cfg, analysis, query_evidence(own, candidates, speakers),
                         names_a_time=parsed.range is not None)
    scores = candidate_vectors(store, request.user_id, candidates, vector, cfg.hub_correction)
    ranked = fuse_candidates(candidates, query, cfg, vectors=scores)
    ranked = adjust_scores(ranked, cfg, parsed, request.now, about_present=asks_about_present(query))
    if analysis.asks:
        ranked = demote_asking_lines(ranked, cfg.asking_line_weight)
    floor = floor_for(request, cfg)
    if floor > -1:
        ranked = relevance_floor(ranked, floor, noise, text)
    return ranked, candidates


# -- 1. the query's time ----------------------------------------------------------------------------

def query_time(query: str, moment: datetime) -> ParsedTime:
    """The query's time words; a range that would leave datetime's span (a query about "next
    year" asked in year 9998) is dropped rather than failing the turn."""
    try:
        return parse_time(query, moment)
    except (OverflowError, ValueError):
        return ParsedTime(None, (), query, False, detect_language(query))


# -- 2. search ---------------------------------------------------------------------------------------

def embed_query(embedder: Embedder, query: str) -> np.ndarray | None:
    """The query's vector; None when the embedder fails (retrieval then goes by full text alone
    rather than failing the agent's turn)."""
    try:
        return np.asarray(embedder.embed([query], kind="query"))[0]
    except ModelError as exc:
        log.warning("query embedding failed (%s); retrieving by full text only", type(exc).__name__)
        return None


def query_noise(embedder: Embedder, request: RetrievalRequest, parsed: ParsedTime, settings: RetrievalSettings,
                vector: np.ndarray | None) -> float | dict[str, float]:
    """What the relevance floor calibrates this query's cosines by (`noise_floors`), measured once for
    the query and its parts; 0 without a vector or when the floor is off."""
    cfg = ranking_settings(settings, parsed.language, multilingual=getattr(embedder, "multilingual", False))
    if vector is None or floor_for(request, cfg) <= -1:
        return 0.0
    return noise_floors(embedder, parsed.language, vector)


def names_in(ledger: UserLedger | None, query: str) -> list[str]:
    """The names of the user's ledger the query holds, as it writes them, one per entity, in order."""
    if not ledger:
        return []
    seen: dict[str, str] = {}
    for match in ledger.matcher.find(query):
        seen.setdefault(match.entity_id, query[match.start:match.end])
    return list(seen.values())


def search_text(query: str, parsed: ParsedTime) -> str:
    """The words searched by full text: the query without its time words when it names a time
    and holds more than that."""
    return parsed.remainder if parsed.range is not None and parsed.remainder.strip() else query


def memory_filter(request: RetrievalRequest, parsed: ParsedTime, cfg: RetrievalSettings) -> MemoryFilter:
    """What the store may return: the request's agent, types and statuses, and a time range: the
    caller's explicit one, else with ``time_mode = "filter"`` the query's widened by
    ``time_fuzz_days`` (with "boost" the query's time only ranks, see `adjust_scores`)."""
    store_range = request.time_range
    if parsed.range is not None and cfg.time_mode == "filter" and request.time_range is None:
        store_range = widen(parsed.range, cfg.time_fuzz_days)
    return MemoryFilter(agent_id=request.agent_id, types=request.types, statuses=request.statuses,
                        time_range=store_range)


def search_candidates(store: MemoryStore, request: RetrievalRequest, text: str | None, vector: np.ndarray | None,
                      flt: MemoryFilter, candidates: int) -> list[Candidate]:
    """The store's channels the arguments give (full text for `text`, vectors for `vector`): at least
    `candidates` memories from each (more when top_k is larger)."""
    return store.search(SearchRequest(user_id=request.user_id, text=text, vector=vector, filter=flt,
                                      limit=max(candidates, request.top_k)))


def candidate_vectors(store: MemoryStore, user_id: str, candidates: Sequence[Candidate], vector: np.ndarray | None,
                      correction: float) -> tuple[dict[str, float], dict[str, float]] | None:
    """Every candidate's (cosine, ranking score) on the vector side, from its stored vector (as the
    search returned it, else read by id: `hubness.vector_scores`); None without a query vector."""
    if vector is None or not candidates:
        return None
    stored: dict[str, np.ndarray] = {}
    missing: list[str] = []
    for candidate in candidates:
        if candidate.vector is None:
            missing.append(candidate.memory.id)
        else:
            stored[candidate.memory.id] = candidate.vector
    if missing:
        stored.update(store.vectors_of(user_id, missing))
    return vector_scores(vector, candidates, stored, correction)


def merge_candidates(found: Sequence[Sequence[Candidate]]) -> list[Candidate]:
    """The candidates of every search, each memory once (as the first search found it)."""
    if len(found) == 1 and len({c.memory.id for c in found[0]}) == len(found[0]):
        return list(found[0])  # one search, each memory once already (the common case)
    seen: dict[str, Candidate] = {}
    for candidates in found:
        for candidate in candidates:
            seen.setdefault(candidate.memory.id, candidate)
    return list(seen.values())


def merge_rankings(rankings: Sequence[list[ScoredMemory]]) -> list[ScoredMemory]:
    """One ranking from the whole query's and its parts' (`query_parts`): their memories taken in
    turn (the whole query's best, the first part's best, the second's..., then each one's second),
    each memory once, so that every part has its best memories near the top."""
    if len(rankings) == 1:
        return rankings[0]
    seen: set[str] = set()
    merged: list[ScoredMemory] = []
    for row in itertools.zip_longest(*rankings):
        for part, item in enumerate(row):
            if item is not None and item.memory.id not in seen:
                seen.add(item.memory.id)
                item.scores["part"] = float(part)
                merged.append(item)
    return merged


# -- 3-5. score ---------------------------------------------------------------------------------------

def fuse_candidates(candidates: Sequence[Candidate], query: str, cfg: RetrievalSettings, *,
                    vectors: tuple[Mapping[str, float], Mapping[str, float]] | None = None) -> list[ScoredMemory]:
    """One score per memory from the two channels (`vectors`: the vector side's cosines and ranking
    scores by memory id, see `ranking.fuse`); a turn inherits part of its neighbours' score, and the
    turns of speakers the query names gain ``speaker_boost``."""
    ranked = fuse(candidates, cfg, vectors=vectors)
    ranked = propagate_neighbours(ranked, cfg.neighbour_weight)
    return boost_named_speakers(ranked, query, cfg.speaker_boost)


def adjust_scores(ranked: list[ScoredMemory], cfg: RetrievalSettings, parsed: ParsedTime, now: datetime, *,
                  about_present: bool) -> list[ScoredMemory]:
    """Type weights, the query's time (with ``time_mode = "boost"``) and recency; for a question about
    the present (`asks_about_present`), the newest state first. Sorted, best first."""
    ranked = adjust(ranked, cfg, time_range=parsed.range if cfg.time_mode == "boost" else None, now=now)
    if cfg.present_half_life_days and about_present:
        ranked = prefer_recent(ranked, cfg.present_half_life_days, cfg.present_weight)
    return ranked


def floor_for(request: RetrievalRequest, cfg: RetrievalSettings) -> float:
    """The relevance floor's cosine threshold for this query: the call's `min_relevance` when it gave
    one, else ``min_relevance``; -1: no floor."""
    return cfg.min_relevance if request.min_relevance is None else request.min_relevance


def noise_floors(embedder: Embedder, language: str,
                 query_vector: np.ndarray | None = None) -> dict[str, float] | float:
    """The cosine for unrelated texts between a query in `language` and a memory in English or
    Chinese: the embedder's (measured once, then cached), or the query's own when that is higher
    (`query_floor`: "ok" sits closer to everything than a real question; without `query_vector`,
    the embedder's alone); 0 when it cannot be measured now (the floor then reads raw cosines)."""
    try:
        floors = {other: noise_floor(embedder, language, second_language=other) for other in ("en", "zh")}
        # a model scores even a good cross-lingual match lower than a same-language one: across
        # languages, the lower of the two floors
        same = floors.get(language, floors["en"])
        floors = {other: floor if other == language else min(floor, same) for other, floor in floors.items()}
        if query_vector is None:
            return floors
        return {other: max(floor, query_floor(embedder, query_vector, other)) for other, floor in floors.items()}
    except ModelError as exc:
        log.warning("could not measure the embedder's noise floor (%s); using raw cosines", type(exc).__name__)
        return 0.0


def warm_up(embedder: Embedder) -> None:
    """Measure and cache now what `noise_floors` measures on a process's first retrieval (the floors of
    English and Chinese queries, the anchors of `query_floor`: a few batches of fixed texts, 150-300 ms
    with the local model), and load the embedder. The values are the ones the first retrieval would
    measure, so ranking is unchanged; a model error only leaves them to that retrieval."""
    try:
        vector = np.asarray(embedder.embed(["warm up"], kind="query"), dtype=np.float32)[0]
    except ModelError as exc:
        log.warning("could not warm the embedder up (%s); the first retrieval will", type(exc).__name__)
        return
    for language in ("en", "zh"):
        noise_floors(embedder, language, vector)


def relevance_floor(ranked: list[ScoredMemory], min_relevance: float, noise: float | Mapping[str, float],
                    text: str) -> list[ScoredMemory]:
    """The memories that meet `min_relevance` (see `ranking.relevant`), cosines calibrated by `noise`."""
    return relevant(ranked, min_relevance, noise_floor=noise, cjk_terms=query_cjk_terms(text))


# -- 5b. the entity ledger ---------------------------------------------------------------------------

def user_ledger(store: MemoryStore, user_id: str, cfg: RetrievalSettings) -> UserLedger | None:
    """The user's entities and name matcher (cached per store and user, `ledger_cache`), when a
    stage that reads them is on; None when none is, or the store keeps no ledger."""
    wanted = (cfg.entity_questions or cfg.context_entities > 0
              or (cfg.context_hop > 0 and cfg.context_hop_source != "search"))
    if not wanted or not hasattr(store, "entities"):
        return None
    return ledger_cache.for_store(store).ledger(store, user_id)


def entity_first(ranked: list[ScoredMemory], request: RetrievalRequest, ledger: UserLedger | None,
                 store: MemoryStore, flt: MemoryFilter,
                 cfg: RetrievalSettings) -> tuple[list[ScoredMemory], str | None]:
    """For a question about one of the user's entities (``entity_questions``), its memories and own
    words first, the lines that only address it last (`entity_questions.about_entity`), and the
    entity's id; `ranked` and None otherwise."""
    if not cfg.entity_questions or not ledger:
        return ranked, None
    return about_entity(ranked, request.query, ledger, store, user_id=request.user_id, flt=flt,
                        boost=cfg.entity_boost, address_weight=cfg.entity_address_weight,
                        gather=cfg.entity_question_memories, statuses=request.statuses)


# -- 6. the best few --------------------------------------------------------------------------------------

def shortlist(ranked: list[ScoredMemory], depth: int, *, deduplicated: bool) -> list[ScoredMemory]:
    """The best `depth` memories, with `deduplicated` only the best of those saying the same thing."""
    return deduplicate(ranked, depth) if deduplicated else ranked[:depth]


def rerank(query: str, ranked: list[ScoredMemory], reranker: Reranker,
           cfg: RerankerSettings) -> list[ScoredMemory]:
    """The best ``cfg.candidates`` reordered by the reranker (blended with the fused order by
    ``cfg.weight``), the rest after them; the fused order when the reranker fails."""
    head, tail = ranked[:cfg.candidates], ranked[cfg.candidates:]
    try:
        # the reranker judges the memory with who said it and when, as the default embedder reads it
        scores = reranker.rerank(query, [dated_text(item.memory) for item in head])
    except Exception as exc:  # a failing reranker degrades to the fused order
        log.warning("reranker failed, keeping the fused order: %s", type(exc).__name__)
        return ranked
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    n = len(head)
    for position, index in enumerate(order):
        item = head[int(index)]
        item.scores["rerank"] = float(scores[int(index)])
        fused_position = int(index)
        # blend: weight 1 -> pure rerank order; lower keeps some of the fused order
        item.scores["rerank_blend"] = cfg.weight * (n - position) + (1 - cfg.weight) * (n - fused_position)
    head.sort(key=lambda s: s.scores["rerank_blend"], reverse=True)
    return head + tail


# -- 7. extra context lines ----------------------------------------------------------------------------

def neighbour_turns(store: MemoryStore, request: RetrievalRequest, chosen: Sequence[ScoredMemory],
                    candidates: Sequence[Candidate], cfg: RetrievalSettings) -> list[Memory]:
    """The turns before (and after) the best ``context_neighbours`` hits, read from the candidates
    or the store, that the context does not show yet."""
    return turn_neighbours(chosen, (c.memory for c in candidates), lambda ids: store.get(request.user_id, ids),
                           hits=cfg.context_neighbours, after=cfg.context_next_turn, statuses=request.statuses)


def hop(store: MemoryStore, request: RetrievalRequest, chosen: Sequence[ScoredMemory], shown: Sequence[Memory],
        candidates: Sequence[Candidate], flt: MemoryFilter, cfg: RetrievalSettings, *,
        vector: np.ndarray | None = None, ledger: UserLedger | None = None) -> list[Memory]:
    """The second hop: memories naming who or what the best hits mention and the query does not,
    through the entity ledger (``context_hop_source``: "ledger", or "auto" when the user's ledger
    knows more than the speakers) or by a second full-text search."""
    if cfg.context_hop <= 0 or cfg.context_hop_hits <= 0 or not chosen:
        return []
    source = cfg.context_hop_source
    if source == "auto" and ledger:
        speakers = {c.memory.speaker for c in candidates if c.memory.speaker}
        source = "ledger" if usable(ledger, speakers) else "search"
    if source == "ledger":
        if not ledger:
            return []
        return ledger_hop(chosen, shown, request.query, vector, store, ledger, user_id=request.user_id, flt=flt,
                          hits=cfg.context_hop_hits, limit=cfg.context_hop, candidates=candidates,
                          statuses=request.statuses)
    return second_hop(chosen, shown, request.query, store.search, user_id=request.user_id, flt=flt,
                      hits=cfg.context_hop_hits, limit=cfg.context_hop, candidates=(c.memory for c in candidates),
                      statuses=request.statuses)


def context_notes(store: MemoryStore, request: RetrievalRequest, ledger: UserLedger | None,
                  shown: Sequence[ScoredMemory | Memory], language: str, cfg: RetrievalSettings, *,
                  asked: str | None = None) -> list[str]:
    """The lines before the memories (`context_notes`): the current profile (``context_profile``)
    and the entities that matter to the question (``context_entities``)."""
    notes: list[str] = []
    if cfg.context_profile and hasattr(store, "profile_values"):
        values = [v for v in store.profile_values(request.user_id, current_only=True) if v.user_id == request.user_id]
        line = profile_note(values, language)
        notes += [line] if line else []
    if cfg.context_entities > 0 and ledger:
        memories = [item.memory if isinstance(item, ScoredMemory) else item for item in shown]
        line = entities_note(entities_that_matter(ledger, request.query, memories, request.now,
                                                  cfg.context_entities, asked), language)
        notes += [line] if line else []
    return notes


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
