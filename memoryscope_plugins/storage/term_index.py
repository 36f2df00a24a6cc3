"""An in-memory BM25 index over one user's memories.

The embedded store keeps one of these per cached user, next to the user's vectors, so a full-text
query scores only that user's postings with numpy: the cost grows with how many of the user's
memories share the query's terms, never with the size of the file, and a common word in a user
with 100,000 memories costs a vectorised pass, not a ranking of every match in SQL.

Statistics (document frequency, average length) are per user: one user's memories never change
another user's scores.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

K1 = 1.2  # the usual BM25 constants (Lucene, FTS5)
B = 0.75


@dataclass(frozen=True)
class TermIndex:
    """Postings by term: row positions and term frequencies. Immutable: `extended` returns a new
    index that shares the untouched postings, so readers never see a half-applied update."""

    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term -> (positions int32, tf float32)
    lengths: np.ndarray  # terms per row, float32

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]]) -> "TermIndex":
        """An index of `documents` (each a sequence of analysed terms), row i = document i."""
        return cls({}, np.zeros(0, dtype=np.float32)).extended(documents)

    def __len__(self) -> int:
        return len(self.lengths)

    def extended(self, documents: Iterable[Sequence[str]]) -> "TermIndex":
        """A new index with `documents` appended as the next rows."""
        base = len(self.lengths)
        added: dict[str, tuple[list[int], list[int]]] = {}
        lengths: list[int] = []
        for offset, terms in enumerate(documents):
            lengths.append(len(terms))
            for term, tf in Counter(terms).items():
                rows, tfs = added.setdefault(term, ([], []))
                rows.append(base + offset)
                tfs.append(tf)
        postings = dict(self.postings)
        for term, (rows, tfs) in added.items():
            new_rows = np.asarray(rows, dtype=np.int32)
            new_tfs = np.asarray(tfs, dtype=np.float32)
            old = postings.get(term)
            if old is not None:
                new_rows = np.concatenate([old[0], new_rows])
                new_tfs = np.concatenate([old[1], new_tfs])
            postings[term] = (new_rows, new_tfs)
        return TermIndex(postings, np.concatenate([self.lengths, np.asarray(lengths, dtype=np.float32)]))

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """BM25 of every row for the query (each distinct term counted once); 0 where nothing matches."""
        n = len(self.lengths)
        scores = np.zeros(n, dtype=np.float32)
        if n == 0:
            return scores
        # an exact sum (whole numbers in float64): the same average whatever the rows' order or the CPU
        average = float(self.lengths.sum(dtype=np.float64)) / n or 1.0
        for term in dict.fromkeys(query_terms):
            found = self.postings.get(term)
            if found is None:
                continue
            rows, tfs = found
            df = len(rows)
            # Lucene's idf: positive even for a term in most of a small user's memories
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            norm = K1 * (1.0 - B + B * self.lengths[rows] / average)
            scores[rows] += idf * tfs * (K1 + 1.0) / (tfs + norm)
        return scores

    def replaced(self, rows: dict[int, tuple[Sequence[str], Sequence[str]]]) -> "TermIndex":
        """A new index where each row ``i`` of `rows` holds its new terms instead of its old ones
        (``rows[i] = (old, new)``); the postings of terms no row changed are shared."""
        postings = dict(self.postings)
        lengths = self.lengths.copy()
        for row, (old, new) in rows.items():
            lengths[row] = len(new)
            counts = Counter(new)
            for term in set(old) | set(counts):
                found = postings.get(term)
                positions = np.zeros(0, dtype=np.int32) if found is None else found[0]
                tfs = np.zeros(0, dtype=np.float32) if found is None else found[1]
                keep = positions != row
                positions, tfs = positions[keep], tfs[keep]
                if term in counts:
                    positions = np.append(positions, np.int32(row))
                    tfs = np.append(tfs, np.float32(counts[term]))
                if len(positions):
                    postings[term] = (positions, tfs)
                else:
                    postings.pop(term, None)
        return TermIndex(postings, lengths)
