"""Vector scores with the hubs taken down: every candidate scored by both channels' evidence alike.

Some memories are near everything: "That's great news, Caroline! Love seeing your dedication", "Wow,
that sounds awesome!". By cosine they come close to any statement about the user's life and push
out the memory that shares the query's meaning (a known trait of embedding spaces, *hubness*). The
candidates of the vector channel are the memories nearest the query; their mean vector is what the
neighbourhood has in common. Each candidate's score is its cosine to the query minus
``hub_correction`` times its similarity to that mean, so a memory close to the whole neighbourhood
gives way to one close to the query itself (the query-local form of the centring in Mu and
Viswanath's "All-but-the-Top" and of CSLS's hub penalty).

Every candidate the store returned is scored this way, the full-text channel's too (its vector is
read with the others), so no candidate counts 0 on the vector side only because the vector
channel's first hundred did not hold it. The raw cosines stay what the relevance floor reads.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..storage.base import Candidate

#: The fewest vector candidates whose mean is taken for what a neighbourhood has in common: a user
#: with a handful of memories has no hubs to speak of, and their mean is mostly each memory itself.
MIN_NEIGHBOURHOOD = 20


def vector_scores(query: np.ndarray, candidates: Sequence[Candidate], vectors: Mapping[str, np.ndarray],
                  correction: float) -> tuple[dict[str, float], dict[str, float]]:
    """(cosines, ranking scores) by memory id, for the candidates with a vector in `vectors`: the
    cosine to `query`, and the cosine minus `correction` x the similarity to the mean of the vector
    channel's candidates (the cosine itself when `correction` is 0 or that channel found fewer than
    `MIN_NEIGHBOURHOOD`)."""
    query = np.asarray(query, dtype=np.float64).reshape(-1)
    width = len(query)
    ids: list[str] = []
    rows: list[np.ndarray] = []
    pool: list[int] = []  # the rows of the vector channel's candidates
    for candidate in candidates:
        memory_id = candidate.memory.id
        vector = vectors.get(memory_id)
        # a vector of another width (stored by another model, being re-embedded) is not comparable
        if vector is not None and len(vector) == width:
            if candidate.vector_rank is not None:
                pool.append(len(ids))
            ids.append(memory_id)
            rows.append(vector)
    if not ids:
        return {}, {}
    matrix = np.asarray(rows, dtype=np.float64)
    cosines = matrix @ query
    scores = cosines
    if correction > 0 and len(pool) >= MIN_NEIGHBOURHOOD:
        centre = matrix[pool].mean(axis=0)
        scores = cosines - correction * (matrix @ centre)
    return dict(zip(ids, cosines.tolist())), dict(zip(ids, scores.tolist()))
