"""One user's memories held in this process for search: the embedded store's index, also used by
the PostgreSQL store for users small enough to hold.

A `UserIndex` keeps a user's memories as arrays aligned by row: a float32 matrix of their vectors,
an in-memory BM25 index of their analysed terms (`term_index`) and the columns filters need. A
query is one matrix-vector product and a pass over the postings of its own terms; ties are broken
by rowid, so the order of the rows never changes a result. The stores read the rows (`IndexRow`)
and keep the index current with the rows written since (`refreshed`: rows changed in place are
replaced, new ones appended); a deletion rebuilds it.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..types import Memory, MemoryStatus, MemoryType
from .base import MemoryFilter, SearchRequest
from .term_index import TermIndex
from .timecodes import epoch_seconds

# A row as the stores read it for the index, in this order:
# (rowid, vector, type, status, created_ts, event_start_ts, event_end_ts, agent_id, session_id, seq,
#  embedding_model, terms) -- vector: float16 bytes (SQLite) or a float array (PostgreSQL) or None;
# times in epoch seconds (event times may be None); terms: the analysed terms joined by spaces
IndexRow = Sequence[Any]

TYPE_CODE = {t.value: i for i, t in enumerate(MemoryType)}
STATUS_CODE = {s.value: i for i, s in enumerate(MemoryStatus)}


@dataclass
class UserIndex:
    """One user's memories as arrays aligned by row: vectors, full-text postings and the columns
    filters need. Every row of the user is here; `has_vector` marks rows with a vector of the
    store's model (the others are zero rows, searchable by full text until re-embedded)."""

    rev: int  # the store's revision of the user this index reflects
    epoch: int
    max_seq: int  # the newest write among the rows (new rows have a higher one)
    rowids: np.ndarray
    matrix: np.ndarray  # float32 (n, dim); dim 0 while the user has no vector
    has_vector: np.ndarray
    terms: TermIndex
    type_codes: np.ndarray
    status_codes: np.ndarray
    created_ts: np.ndarray
    event_start_ts: np.ndarray
    event_end_ts: np.ndarray
    agent_ids: list[str]
    session_ids: list[str | None]
    row_terms: list[str]  # each row's terms as stored (what a replacement takes out of the postings)
    position: dict[int, int]
    # records already read, by rowid: valid while the user's rows are unchanged (an update or a
    # deletion rebuilds this object; new rows only add to it)
    records: dict[int, Memory] = field(default_factory=dict)
    rowid_of: dict[str, int] = field(default_factory=dict)  # memory id -> rowid, of the records above
    # `mask`'s answers by filter: valid for these rows only (a copy made by `dataclasses.replace` or
    # built anew starts empty: the field is not an argument of __init__)
    masks: dict[tuple[Any, ...], np.ndarray | None] = field(default_factory=dict, init=False, repr=False,
                                                            compare=False)

    def __len__(self) -> int:
        return len(self.rowids)

    def remember(self, found: dict[int, Memory]) -> None:
        """Keep records read from the store (by rowid), so the next read of them costs nothing."""
        self.records.update(found)
        self.rowid_of.update((memory.id, rowid) for rowid, memory in found.items())

    def vectors_of(self, ids: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The vectors of the records among `ids` this index has read and holds a vector of the
        store's model for, and the other ids (the caller reads those from the store)."""
        out: dict[str, np.ndarray] = {}
        unread: list[str] = []
        for memory_id in ids:
            rowid = self.rowid_of.get(memory_id)
            row = None if rowid is None else self.position.get(rowid)
            if row is not None and self.has_vector[row]:
                out[memory_id] = self.matrix[row]
            else:
                unread.append(memory_id)
        return out, unread


def _vector(value: Any) -> np.ndarray:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(value, dtype=np.float16)
    return np.asarray(value, dtype=np.float32).reshape(-1)


def build(rows: Sequence[IndexRow], model: str | None, rev: int, epoch: int, dim: int | None = None,
          with_terms: bool = True) -> UserIndex:
    """An index of `rows` (row i = rows[i]). Vectors of another model than `model`, or of another
    width than the user's first (or `dim`), are left out of the matrix."""
    n = len(rows)
    vectors = [None if r[1] is None or r[10] != (model or "") else _vector(r[1]) for r in rows]
    if dim is None:
        first = next((v for v in vectors if v is not None), None)
        dim = 0 if first is None else len(first)
    has_vector = np.zeros(n, dtype=bool)
    matrix = np.zeros((n, dim), dtype=np.float32)
    for i, vector in enumerate(vectors):
        if vector is not None and len(vector) == dim:  # another width under the same name: unusable
            matrix[i] = vector
            has_vector[i] = True
    nan = float("nan")
    return UserIndex(
        rev=rev, epoch=epoch, max_seq=max((r[9] or 0 for r in rows), default=0),
        rowids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
        matrix=matrix, has_vector=has_vector,
        terms=TermIndex.build(r[11].split() for r in rows) if with_terms else TermIndex.build(()),
        type_codes=np.fromiter((TYPE_CODE[r[2]] for r in rows), dtype=np.int8, count=n),
        status_codes=np.fromiter((STATUS_CODE[r[3]] for r in rows), dtype=np.int8, count=n),
        created_ts=np.fromiter((r[4] for r in rows), dtype=np.float64, count=n),
        event_start_ts=np.fromiter((nan if r[5] is None else r[5] for r in rows), dtype=np.float64, count=n),
        event_end_ts=np.fromiter((nan if r[6] is None else r[6] for r in rows), dtype=np.float64, count=n),
        agent_ids=[r[7] for r in rows], session_ids=[r[8] for r in rows], row_terms=[r[11] for r in rows],
        position={int(r[0]): i for i, r in enumerate(rows)},
    )


def refreshed(cached: UserIndex, changed: Sequence[IndexRow], model: str | None, rev: int) -> UserIndex | None:
    """`cached` with the rows written since it was built (`changed`: every row with a higher
    ``seq``; nothing deleted meanwhile): rows it holds are replaced, the others appended. None when
    the user's first vectors arrive on rows it holds (rare: the caller rebuilds the index)."""
    if not changed:
        cached.rev = rev
        return cached
    held = [r for r in changed if int(r[0]) in cached.position]
    new = [r for r in changed if int(r[0]) not in cached.position]
    index = cached
    if held:
        replaced = _replaced(cached, held, model)
        if replaced is None:
            return None
        index = replaced
    return _appended(index, new, model, rev)


def _replaced(cached: UserIndex, rows: Sequence[IndexRow], model: str | None) -> UserIndex | None:
    """A copy of `cached` with `rows` (rows it holds) as they are now; the arrays and postings no
    row changed are shared, so a search running on `cached` meanwhile never sees half of it."""
    dim = cached.matrix.shape[1]
    matrix, has_vector = cached.matrix, cached.has_vector.copy()
    type_codes, status_codes = cached.type_codes.copy(), cached.status_codes.copy()
    created_ts, event_start_ts, event_end_ts = (cached.created_ts.copy(), cached.event_start_ts.copy(),
                                                cached.event_end_ts.copy())
    agent_ids, session_ids, row_terms = list(cached.agent_ids), list(cached.session_ids), list(cached.row_terms)
    terms: dict[int, tuple[Sequence[str], Sequence[str]]] = {}
    nan = float("nan")
    for r in rows:
        i = cached.position[int(r[0])]
        vector = None if r[1] is None or r[10] != (model or "") else _vector(r[1])
        if vector is not None and dim == 0:
            return None
        usable = vector is not None and len(vector) == dim
        if vector is not None and usable and not (has_vector[i] and np.array_equal(matrix[i], vector)):
            if matrix is cached.matrix:
                matrix = matrix.copy()
            matrix[i] = vector
        has_vector[i] = usable
        type_codes[i], status_codes[i] = TYPE_CODE[r[2]], STATUS_CODE[r[3]]
        created_ts[i] = r[4]
        event_start_ts[i] = nan if r[5] is None else r[5]
        event_end_ts[i] = nan if r[6] is None else r[6]
        agent_ids[i], session_ids[i] = r[7], r[8]
        if r[11] != row_terms[i]:
            terms[i] = (row_terms[i].split(), r[11].split())
            row_terms[i] = r[11]
    changed = {int(r[0]) for r in rows}
    return dataclasses.replace(
        cached, max_seq=max(cached.max_seq, max(r[9] or 0 for r in rows)), matrix=matrix, has_vector=has_vector,
        terms=cached.terms.replaced(terms) if terms else cached.terms, type_codes=type_codes,
        status_codes=status_codes, created_ts=created_ts, event_start_ts=event_start_ts,
        event_end_ts=event_end_ts, agent_ids=agent_ids, session_ids=session_ids, row_terms=row_terms,
        position=cached.position, records={k: v for k, v in cached.records.items() if k not in changed},
        rowid_of={k: v for k, v in cached.rowid_of.items() if v not in changed})


def _appended(cached: UserIndex, changed: Sequence[IndexRow], model: str | None, rev: int) -> UserIndex:
    """`cached` with `changed` (rows it does not hold) as its next rows."""
    if not changed:
        return dataclasses.replace(cached, rev=rev)
    dim = cached.matrix.shape[1] if cached.has_vector.any() else None
    # with `dim` given, a vector of another width is left out of the matrix (has_vector False)
    extra = build(changed, model, rev, cached.epoch, dim, with_terms=False)  # terms: appended below
    base = len(cached.rowids)
    matrix = cached.matrix
    if extra.matrix.shape[1] != matrix.shape[1]:  # the user's first vectors: widen the zero rows
        matrix = np.zeros((base, extra.matrix.shape[1]), dtype=np.float32)
    position = dict(cached.position)
    position.update({rid: base + i for rid, i in extra.position.items()})
    return UserIndex(
        rev=rev, epoch=cached.epoch, max_seq=max(cached.max_seq, extra.max_seq),
        rowids=np.concatenate([cached.rowids, extra.rowids]),
        matrix=np.concatenate([matrix, extra.matrix]),
        has_vector=np.concatenate([cached.has_vector, extra.has_vector]),
        terms=cached.terms.extended(r[11].split() for r in changed),
        type_codes=np.concatenate([cached.type_codes, extra.type_codes]),
        status_codes=np.concatenate([cached.status_codes, extra.status_codes]),
        created_ts=np.concatenate([cached.created_ts, extra.created_ts]),
        event_start_ts=np.concatenate([cached.event_start_ts, extra.event_start_ts]),
        event_end_ts=np.concatenate([cached.event_end_ts, extra.event_end_ts]),
        agent_ids=cached.agent_ids + extra.agent_ids, session_ids=cached.session_ids + extra.session_ids,
        row_terms=cached.row_terms + extra.row_terms, position=position, records=cached.records,
        rowid_of=cached.rowid_of,
    )


# -- search -------------------------------------------------------------------------------------------
def search(index: UserIndex, request: SearchRequest, query_terms: Sequence[str]) -> dict[int, builtins.list[Any]]:
    """Both channels over the index: rowid -> the rest of its `Candidate`'s fields, in their order
    (text rank, text score, vector rank, vector score, stored vector; None where a channel did not
    find it), text hits first."""
    found: dict[int, builtins.list[Any]] = {}
    if len(index.rowids) == 0:
        return found
    keep = mask(index, request.filter)
    positions: builtins.list[int] = []
    if request.text and query_terms:
        rows, scores = _text_hits(index, query_terms, keep, request.limit)
        for rank, (row, rowid, score) in enumerate(zip(rows.tolist(), index.rowids[rows].tolist(), scores), start=1):
            found[rowid] = [rank, score, None, None, None]
            positions.append(row)
    if request.vector is not None:
        rows, scores = _vector_hits(index, request, keep)
        for rank, (row, rowid, score) in enumerate(zip(rows.tolist(), index.rowids[rows].tolist(), scores), start=1):
            fields = found.get(rowid)
            if fields is None:
                found[rowid] = [None, None, rank, score, None]
                positions.append(row)
            else:
                fields[2] = rank
                fields[3] = score
    # every candidate's stored vector, read where it already is (`found` holds them in `positions`' order)
    matrix = index.matrix
    for fields, row, stored in zip(found.values(), positions, index.has_vector[positions].tolist()):
        if stored:
            fields[4] = matrix[row]
    return found


def top(scores: np.ndarray, limit: int, rowids: np.ndarray) -> np.ndarray:
    """Positions of the `limit` best finite scores, best first, ties by rowid (the same rows as
    PostgreSQL's ORDER BY score, rowid, whatever order the index holds its rows in)."""
    finite = np.flatnonzero(np.isfinite(scores))
    k = min(limit, len(finite))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < len(finite):
        # the k-th best score, then the ties at the cut with the lowest rowids (argpartition would
        # take an arbitrary subset of them)
        kth = -np.partition(-scores, k - 1)[k - 1]
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)
        ties = ties[np.argsort(rowids[ties], kind="stable")][:k - len(above)]
        chosen = np.concatenate([above, ties])
    else:  # every finite score is taken
        chosen = finite
    return chosen[np.lexsort((rowids[chosen], -scores[chosen]))]


def _text_hits(index: UserIndex, query_terms: Sequence[str], keep: np.ndarray | None,
               limit: int) -> tuple[np.ndarray, builtins.list[float]]:
    """The best rows by BM25 (positions, best first) and their scores."""
    scores = index.terms.scores(query_terms)
    matched = scores > 0
    if keep is not None:
        matched &= keep
    best = top(np.where(matched, scores, -np.inf), limit, index.rowids)
    return best, scores[best].tolist()


def _vector_hits(index: UserIndex, request: SearchRequest,
                 keep: np.ndarray | None) -> tuple[np.ndarray, builtins.list[float]]:
    """The rows nearest the query vector (positions, best first) and their cosines."""
    if not index.has_vector.any():
        return np.zeros(0, dtype=np.int64), []
    query = np.asarray(request.vector, dtype=np.float32).reshape(-1)
    if query.shape[0] != index.matrix.shape[1]:
        raise ValueError(f"query vector has {query.shape[0]} dimensions; the store's vectors have "
                         f"{index.matrix.shape[1]}")
    scores = index.matrix @ query
    usable = index.has_vector if keep is None else index.has_vector & keep
    best = top(np.where(usable, scores, -np.inf), request.limit, index.rowids)
    return best, scores[best].tolist()


#: how many filters' masks an index keeps (a query's own time range makes a filter of its own)
_MASKS_KEPT = 16


def mask(index: UserIndex, flt: MemoryFilter) -> np.ndarray | None:
    """Which rows the filter lets through (None: all of them); read-only, kept per filter with the index."""
    key = (flt.types, flt.statuses, flt.agent_id, flt.session_id, flt.time_range)
    try:
        return index.masks[key]
    except KeyError:
        pass
    keep = _mask(index, flt)
    if keep is not None:
        keep.flags.writeable = False
    if len(index.masks) >= _MASKS_KEPT:
        index.masks.clear()
    index.masks[key] = keep
    return keep


def _mask(index: UserIndex, flt: MemoryFilter) -> np.ndarray | None:
    keep = np.ones(len(index.rowids), dtype=bool)
    if flt.types:
        keep &= np.isin(index.type_codes, [TYPE_CODE[t.value] for t in flt.types])
    if flt.statuses:
        keep &= np.isin(index.status_codes, [STATUS_CODE[s.value] for s in flt.statuses])
    if flt.agent_id is not None:
        keep &= np.fromiter((a == flt.agent_id for a in index.agent_ids), dtype=bool, count=len(keep))
    if flt.session_id is not None:
        keep &= np.fromiter((s == flt.session_id for s in index.session_ids), dtype=bool, count=len(keep))
    if flt.time_range is not None:
        lo = epoch_seconds(flt.time_range.start)
        hi = epoch_seconds(flt.time_range.end)
        lo = -np.inf if lo is None else lo
        hi = np.inf if hi is None else hi
        by_message = (index.created_ts >= lo) & (index.created_ts < hi)
        ev_start = index.event_start_ts
        ev_end = np.where(np.isnan(index.event_end_ts), ev_start, index.event_end_ts)
        with np.errstate(invalid="ignore"):
            by_event = ~np.isnan(ev_start) & (ev_start < hi) & (ev_end >= lo)
        keep &= by_message | by_event
    return None if keep.all() else keep


# -- the cache of indexes -------------------------------------------------------------------------------
class IndexCache:
    """Users' indexes, least recently used dropped first once they hold more than `max_rows` rows
    together (the user just stored is always kept)."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max(0, int(max_rows))
        self._entries: OrderedDict[str, UserIndex] = OrderedDict()
        self._rows = 0  # the rows of every held index together: kept, not summed on each put
        self._lock = threading.Lock()

    def get(self, user_id: str) -> UserIndex | None:
        with self._lock:
            cached = self._entries.get(user_id)
            if cached is not None:
                self._entries.move_to_end(user_id)
            return cached

    def put(self, user_id: str, index: UserIndex) -> None:
        with self._lock:
            replaced = self._entries.get(user_id)
            self._rows += len(index) - (len(replaced) if replaced is not None else 0)
            self._entries[user_id] = index
            self._entries.move_to_end(user_id)
            while self._rows > self.max_rows and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._rows -= len(dropped)

    def drop(self, *user_ids: str) -> None:
        with self._lock:
            for user_id in user_ids:
                dropped = self._entries.pop(user_id, None)
                if dropped is not None:
                    self._rows -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._rows = 0
