"""Ranking settings that depend on the query's language.

A multilingual embedder finds Chinese paraphrases that share no characters with the memory, while
the character bigrams of the full-text channel match any memory that shares common characters
(用, 户, 现在...). With equal weights the bigram matches drown the vectors, so for Chinese queries
the full-text channel weighs less. English keeps equal weights: stemmed words are precise terms.
Measured on the Chinese dev set (docs/benchmarks.md); English queries are never affected.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..settings import RetrievalSettings

# Used when `retrieval.by_language` is not set and the embedder is multilingual.
MULTILINGUAL_DEFAULTS: Mapping[str, Mapping[str, float]] = {
    "zh": {"text_weight": 0.2, "neighbour_weight": 0.25, "hub_correction": 0.0, "text_evidence_full": 0.0},
}


def ranking_settings(cfg: RetrievalSettings, query_language: str, *, multilingual: bool) -> RetrievalSettings:
    """`cfg` with the overrides for `query_language` applied (the same object when there are none)."""
    table: Mapping[Any, Mapping[str, float]] = (
        cfg.by_language if cfg.by_language is not None else (MULTILINGUAL_DEFAULTS if multilingual else {}))
    overrides = table.get(query_language)
    if not overrides:
        return cfg
    return cfg.model_copy(update=dict(overrides))
