"""How much each channel counts for one query: the one rule, from what the query is.

The settings' weights (`text_weight`, `vector_weight`, `neighbour_weight`, per language with
`by_language`) are what a query gets when it names what it wants. Two things lower them:

- **Lexical evidence.** The full-text channel's best match holds some share of the query's own
  terms (`query_analysis.lexical_evidence`, the speakers' names left out). A question naming a rare
  thing ("What did Caroline think of the LGBTQ support group?") has most of its terms in its best
  match; a statement about something the user never said in those words ("I ended up volunteering
  for that project and now I'm overwhelmed") has one or two common ones. The text channel keeps its
  weight from ``text_evidence_full`` (0.5: half the query's terms) up, none below half of that, and
  in proportion between. A statement, whose words are mostly about itself, needs twice as much (all
  its terms for the full weight, half of them for any): a statement whose words are common leans on
  the vectors, a question naming a rare term keeps full text.
- **What the query asks.** A question's answer often sits in the turn after the one that matches
  it, so a turn shares its neighbours' score (``neighbour_weight``). A statement asks for nothing:
  what it should bring back is what was said about the same thing, not the reply to it, so a
  statement's turns share ``statement_neighbour_weight`` of it.

- **A time and nothing else.** "What happened in March?" asks for what falls in March; its one
  word of its own ("happened") matches nothing better than anything else, so what falls in the
  range comes first, whatever the vectors say (`TIME_ONLY_BOOST`).

The rules hold for English and Chinese where they apply: Chinese has no words to count, so its
lexical evidence and the time-alone rule are left out (its full-text weight is already
``by_language``'s), the statement rule holds. Measured in docs/benchmarks.md ("Statements and
questions").
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..indexing import full_text
from ..settings import RetrievalSettings
from ..storage.base import Candidate
from ..storage.text_analysis import term_set
from .query_analysis import QueryAnalysis, lexical_evidence, query_terms

#: The time boost of a query about a time alone: x11 inside the range puts what falls in it first.
TIME_ONLY_BOOST = 10.0


def best_text_match(candidates: Sequence[Candidate]) -> Candidate | None:
    """The full-text channel's first candidate (None when it found nothing)."""
    found = [c for c in candidates if c.text_rank is not None]
    return min(found, key=lambda c: c.text_rank or 0) if found else None


def query_evidence(analysis: QueryAnalysis, candidates: Sequence[Candidate], speakers: Iterable[str]) -> float | None:
    """The share of the query's terms its best full-text match holds (see the module docstring);
    None for a query in CJK script, whose terms (characters and their pairs) say nothing of it."""
    if not analysis.words:
        return None
    best = best_text_match(candidates)
    if best is None:
        return 0.0
    ignored = {term for speaker in speakers for term in query_terms(speaker)}
    return lexical_evidence(analysis.terms, term_set(full_text(best.memory)), ignored)


def weigh_channels(cfg: RetrievalSettings, analysis: QueryAnalysis, evidence: float | None, *,
                   names_a_time: bool = False) -> RetrievalSettings:
    """`cfg` with this query's channel weights (the same object when nothing changes); `evidence`
    None leaves the text weight as it is. A query that `names_a_time` and at most one word of its
    own ("what happened in March?", "what did I do last weekend?") is about that time: what falls
    in it comes first (``time_boost`` at least `TIME_ONLY_BOOST`)."""
    update: dict[str, float] = {}
    if names_a_time and analysis.words and len(analysis.terms) <= 1 and cfg.time_boost > 0:
        update["time_boost"] = max(cfg.time_boost, TIME_ONLY_BOOST)
    # a statement's words are mostly about itself: it needs twice the evidence a question does
    full = cfg.text_evidence_full if analysis.asks else min(1.0, 2 * cfg.text_evidence_full)
    if evidence is not None and full > 0 and evidence < full:
        update["text_weight"] = cfg.text_weight * max(0.0, 2.0 * evidence / full - 1.0)
    if not analysis.asks and cfg.statement_neighbour_weight is not None:
        update["neighbour_weight"] = min(cfg.neighbour_weight, cfg.statement_neighbour_weight)
    return cfg.model_copy(update=update) if update else cfg
