"""The in-process index of one user's memories (`user_index`), kept current from the rows written since:
whatever sequence of new rows and rows changed in place, it answers as an index built from scratch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from memoryscope_plugins.storage import user_index
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
from memoryscope_plugins.storage.term_index import TermIndex
from memoryscope_plugins.types import MemoryStatus, MemoryType

WORDS = ["lisbon", "move", "cat", "coffee", "piano", "may", "sister", "boat"]
DIM = 4

words = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)
vectors = st.one_of(st.none(), st.lists(st.integers(-4, 4), min_size=DIM, max_size=DIM))
fields = st.fixed_dictionaries({
    "terms": words, "vector": vectors, "status": st.sampled_from(["active", "expired"]),
    "type": st.sampled_from(["turn", "observation"]), "agent": st.sampled_from(["a", "b"]),
    "time": st.integers(0, 10)})
# a step: new rows, and changes of rows written before (picked by a number, modulo their count)
steps = st.lists(st.tuples(st.lists(fields, max_size=4), st.lists(st.tuples(st.integers(0, 99), fields), max_size=3)),
                 min_size=1, max_size=6)


def row(rowid: int, seq: int, f: dict) -> tuple:
    vector = None if f["vector"] is None else np.asarray(f["vector"], dtype=np.float16).tobytes()
    return (rowid, vector, f["type"], f["status"], float(f["time"]), None, None, f["agent"], None, seq,
            "m" if vector is not None else None, f["terms"])


def answers(index: user_index.UserIndex) -> list:
    out = []
    for text in ("lisbon", "cat coffee", "piano move may", "boat"):
        for flt in (MemoryFilter(statuses=None), MemoryFilter(), MemoryFilter(types=(MemoryType.OBSERVATION,),
                                                                             agent_id="a")):
            for vector in (None, np.asarray([1, 0.5, -1, 0], dtype=np.float32)):
                request = SearchRequest(user_id="u", text=text, vector=vector, filter=flt, limit=3)
                found = user_index.search(index, request, text.split())
                # each candidate's stored vector is compared by value (an array has no plain ==)
                out.append(sorted((rowid, [*fields[:4], None if fields[4] is None else fields[4].tolist()])
                                  for rowid, fields in found.items()))
    return out


@settings(max_examples=150, deadline=None)
@given(steps)
def test_an_index_kept_current_answers_as_one_built_anew(history):
    rows: dict[int, tuple] = {}
    seq = 0
    index = None
    for new, changes in history:
        written: dict[int, tuple] = {}  # what the store returns: each row written since, as it is now
        held = sorted(rows)
        for k, f in changes if held else []:
            seq += 1
            rowid = held[k % len(held)]
            rows[rowid] = written[rowid] = row(rowid, seq, f)
        for f in new:
            seq += 1
            rowid = 1000 - seq  # rowids need not grow: a writer that reserved one earlier may commit later
            rows[rowid] = written[rowid] = row(rowid, seq, f)
        if index is None:
            index = user_index.build([rows[r] for r in sorted(rows)], "m", rev=len(rows), epoch=0)
            continue
        refreshed = user_index.refreshed(index, sorted(written.values(), key=lambda r: r[9]), "m", len(rows))
        index = refreshed or user_index.build([rows[r] for r in sorted(rows)], "m", rev=len(rows), epoch=0)
    fresh = user_index.build([rows[r] for r in sorted(rows)], "m", rev=len(rows), epoch=0)
    assert answers(index) == answers(fresh)
    assert index.max_seq == fresh.max_seq == seq and len(index) == len(fresh)


def test_a_search_on_the_old_index_is_untouched_by_a_replacement():
    """Copy on write: what a concurrent search holds keeps its vectors, codes and postings."""
    first = row(1, 1, {"terms": "lisbon move", "vector": [1, 0, 0, 0], "status": "active", "type": "turn",
                       "agent": "a", "time": 1})
    old = user_index.build([first], "m", rev=1, epoch=0)
    before = answers(old)
    changed = row(1, 2, {"terms": "cat", "vector": [0, 1, 0, 0], "status": "expired", "type": "observation",
                         "agent": "b", "time": 2})
    new = user_index.refreshed(old, [changed], "m", 1)
    assert new is not None and answers(old) == before and answers(new) != before
    assert old.status_codes[0] == user_index.STATUS_CODE[MemoryStatus.ACTIVE.value]


def test_replacing_terms_keeps_the_postings_exact():
    index = TermIndex.build([["a", "b", "b"], ["b", "c"], ["a"]])
    replaced = index.replaced({0: (["a", "b", "b"], ["c", "c", "d"]), 2: (["a"], [])})
    fresh = TermIndex.build([["c", "c", "d"], ["b", "c"], []])
    for query in (["a"], ["b"], ["c"], ["d"], ["a", "c", "d"]):
        assert replaced.scores(query).tolist() == fresh.scores(query).tolist()
    assert "a" not in replaced.postings and index.scores(["a"]).tolist()[0] > 0


def test_the_cache_keeps_users_within_its_rows_least_recently_used_dropped_first():
    def index(n: int) -> user_index.UserIndex:
        f = {"terms": "cat", "vector": [1, 0, 0, 0], "status": "active", "type": "turn", "agent": "a", "time": 1}
        return user_index.build([row(i + 1, i + 1, f) for i in range(n)], "m", rev=1, epoch=0)

    cache = user_index.IndexCache(max_rows=10)
    cache.put("a", index(4))
    cache.put("b", index(4))
    cache.put("a", index(5))  # replaced (9 rows, not 13): b is now the least recently used
    cache.put("c", index(1))
    assert cache.get("b") is not None  # 10 rows: all kept
    cache.put("a", index(5))
    cache.put("c", index(2))  # 11 rows: b (least recently used) goes
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    cache.drop("a")
    cache.put("d", index(8))  # 2 + 8 rows fit once a is dropped
    assert cache.get("c") is not None and cache.get("d") is not None
    cache.put("e", index(30))  # larger than the cache: kept alone, as the user just stored
    assert cache.get("e") is not None and cache.get("c") is None and cache.get("d") is None
    cache.clear()
    cache.put("f", index(10))
    assert cache.get("f") is not None
