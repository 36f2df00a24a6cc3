"""The procedural part of `retrieve` (only with ``procedures.enabled``; no LLM): the agent's
procedures relevant to the current task, "What worked before", and the figures of the tools the
agent is about to use that failed before, within ``procedures.context_tokens`` (docs/procedural.md).

Procedures are found by the same pipeline as memories, in the agent's scope (`procedures.scope`),
with the query and the names of the given tools (`procedure_query`),
then ranked by relevance and their outcome weight (`rank_key`, `procedures.step.weight`).
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from typing import Any, Sequence

import numpy as np

from ..procedures.scope import procedure_scope, team_of
from ..procedures.step import weight
from ..types import MemoryType, RetrievalResult, ScoredMemory, ToolStats
from . import pipeline

HEADINGS = {"en": ("What worked before:", "Tools that failed before:"),
            "zh": ("以前管用的做法：", "以前出过错的工具：")}
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


class QueryMemo:
    """An embedder that embeds each query text once per `retrieve` (the user's search and the
    procedures' search share the query's vector); everything else goes to the embedder."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, texts: Sequence[str], *, kind: str = "document") -> np.ndarray:
        if kind != "query":
            return self._embedder.embed(texts, kind=kind)
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed(missing, kind="query")))
        return np.asarray([self._vectors[t] for t in texts])


def estimate_tokens(text: str) -> int:
    """A rough token count: one per CJK character, one per four other characters."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def add_procedures(result: RetrievalResult, engine: Any, *, user_id: str, agent_id: str, query: str,
                   tools: Sequence[str], now: datetime, language: str | None, embedder: Any) -> None:
    """Fill ``result.procedures`` and ``result.tool_notes`` and append their part to its context."""
    cfg = engine.settings.procedures
    scope = procedure_scope(user_id, agent_id)
    request = pipeline.RetrievalRequest(user_id=scope, query=procedure_query(query, tools), now=now,
                                        top_k=cfg.top_k * 2, min_relevance=None, types=(MemoryType.PROCEDURE,),
                                        rerank=False, language=language)
    started = time.perf_counter()
    found = pipeline.retrieve(request, settings=engine.settings, store=engine.store, embedder=embedder,
                              reranker=None, started=started)
    ranked = sorted(found.memories, key=rank_key, reverse=True)
    notes = _tool_notes(engine, user_id, agent_id, tools)
    lang = "zh" if (language or "") == "zh" or (language is None and _CJK.search(query)) else "en"
    budget = cfg.context_tokens
    lines: list[str] = []
    kept: list[ScoredMemory] = []
    for scored in ranked[:cfg.top_k]:
        line = f"- {scored.memory.content}"
        cost = estimate_tokens(line) + (0 if kept else estimate_tokens(HEADINGS[lang][0]))
        if cost > budget:
            break
        budget -= cost
        kept.append(scored)
        lines.append(line)
    note_lines: list[str] = []
    shown_notes: list[ToolStats] = []
    for stats in notes:
        line = _note_line(stats, lang)
        cost = estimate_tokens(line) + (0 if shown_notes else estimate_tokens(HEADINGS[lang][1]))
        if cost > budget:
            break
        budget -= cost
        shown_notes.append(stats)
        note_lines.append(line)
    result.procedures, result.tool_notes = kept, shown_notes
    parts = [result.context] if result.context else []
    if lines:
        parts.append("\n".join([HEADINGS[lang][0], *lines]))
    if note_lines:
        parts.append("\n".join([HEADINGS[lang][1], *note_lines]))
    result.context = "\n\n".join(parts)
    result.timings_ms["procedures"] = round((time.perf_counter() - started) * 1000, 3)


def procedure_query(query: str, tools: Sequence[str]) -> str:
    """What the agent's procedures are searched with: the task and the names of the tools the agent is
    about to use (a procedure names its tools, so a task worded unlike it is still found by them;
    `bench procedural` measures it). Without tools, the query alone (embedded once for both searches)."""
    return " ".join([query, *tools]) if tools else query


def rank_key(scored: ScoredMemory) -> float:
    """(0.5 + relevance) x weight: relevance (0-1 among the candidates) orders procedures of equal
    weight, and a procedure that kept working (weight up to 4) comes before one that kept failing
    (down to 0.25), even the least relevant of those found."""
    return (0.5 + max(0.0, scored.score)) * weight(scored.memory.metadata)


def _tool_notes(engine: Any, user_id: str, agent_id: str, tools: Sequence[str]) -> list[ToolStats]:
    """The figures of the given tools that failed before, summed over the agent's calls for the users
    of the user's team (tenant: the ids starting ``<team>:``, or for a user without one the ids
    without ``:``), never another team's; one indexed read per tool (docs/procedural.md)."""
    team = team_of(user_id)
    notes = []
    for tool in dict.fromkeys(tools):
        notes += [stats for stats in engine.tool_stats(agent_id, tool, team=team, top=1) if stats.failures]
    return notes


def _note_line(stats: ToolStats, language: str) -> str:
    common = stats.errors[0][0] if stats.errors else None
    if language == "zh":
        tail = f"，最常见：{common}" if common else ""
        return f"- {stats.tool}：{stats.calls} 次调用中 {stats.failures} 次失败{tail}"
    tail = f"; most often: {common}" if common else ""
    return f"- {stats.tool}: {stats.failures} of {stats.calls} calls failed{tail}"
