"""How the PostgreSQL store searches: the statements of its two channels, and the terms it stores.

Full text is ranked exactly as the embedded store ranks it (`term_index`): the engine's own analyser
(`text_analysis.analyse`, the same terms SQLite keeps) writes each memory's terms into a ``terms``
tsvector (a term's positions are 1..tf, so its count is its term frequency) and their number into
``dl``; BM25 with the user's own statistics, Lucene's idf, `K1` and `B`. The statistics are kept per
user by triggers (`STATS_DDL`: the user's memory count and total length, and per term the rows
holding it), so a query reads them by primary key, whatever the user's size.

What is scored is bounded per query: the rows of a term found in at most `text_term_rows` of the
user's memories are all scored (every term, for every user with at most that many memories: the
embedded store's ranking exactly). A term in more rows is *common*: it adds to the score of every
row scored, but brings in only the newest `text_term_rows` rows that hold every common term, and the
newest rows that hold any (up to the channel's limit). So a heavy user's common words cost a bounded
number of rows, never a scoring of every match; the scores of the rows returned are exact.

The vector channel reads the user's rows exactly when the filtered set is small, or when none of the
user's rows is in the HNSW index (``ann``; only users above `exact_vector_rows` memories get their
rows indexed, see `PostgresStore`); otherwise it is the HNSW walk over the user's indexed rows plus an
exact scan of the user's rows not yet indexed, so every row is always reachable by one of the two.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from ..types import Memory
from .term_index import K1, B

# a tsvector holds at most 256 positions per lexeme: a term's frequency is counted up to that
MAX_TF = 256
# PostgreSQL's longest lexeme, in bytes: a longer "word" (a hash, a run of letters) is not indexed
MAX_LEXEME_BYTES = 2046


def indexable(terms: Sequence[str]) -> list[str]:
    """`terms` without those too long to be a lexeme."""
    return [t for t in terms if len(t) * 4 <= MAX_LEXEME_BYTES or len(t.encode()) <= MAX_LEXEME_BYTES]


def _lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_text(terms: Sequence[str]) -> str:
    """The ``terms`` column of a memory with these analysed terms: each term once, with positions
    1..tf (a tsvector literal, read by PostgreSQL without its own parser or stemmer)."""
    return " ".join(f"{_lexeme(term)}:{','.join(str(i) for i in range(1, min(tf, MAX_TF) + 1))}"
                    for term, tf in Counter(indexable(terms)).items())


def tsquery_any(terms: Sequence[str]) -> str:
    """A tsquery literal matching a row that holds any of `terms`."""
    return " | ".join(_lexeme(t) for t in terms)


def tsquery_all(terms: Sequence[str]) -> str:
    """A tsquery literal matching a row that holds every one of `terms`."""
    return " & ".join(_lexeme(t) for t in terms)


@dataclass(frozen=True)
class UserStatistics:
    """A user's figures for one query (`STATISTICS_CTES`), kept per user by the triggers of `STATS_DDL`."""

    n: int  # the user's memories
    avgdl: float  # their average number of terms
    df: dict[str, int]  # rows holding each query term (0: none)
    bound: int  # a term in more rows than this is common
    indexed: bool  # some of the user's rows are in the HNSW index

    def common(self) -> list[str]:
        return [t for t, df in self.df.items() if df > self.bound]

    def rare(self) -> list[str]:
        return [t for t, df in self.df.items() if 0 < df <= self.bound]

    def idf(self, term: str) -> float:
        """Lucene's idf of `term` in the user's memories."""
        df = float(self.df[term])
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))


def read_statistics(row: Sequence[Any], terms: Sequence[str], bound: int) -> UserStatistics:
    """`UserStatistics` from the values of `STATISTICS_CTES` (n, dl_sum, indexed, found)."""
    n, dl_sum, indexed, found = int(row[0]), int(row[1]), bool(row[2]), row[3] or []
    df = dict.fromkeys(terms, 0)
    for item in found:
        term, count = item.rsplit(" ", 1)
        df[term] = int(count)
    return UserStatistics(n=n, avgdl=dl_sum / n if n else 0.0, df=df, bound=bound, indexed=indexed)


# Per-user statistics kept by statement triggers on the memories table: the memory count and total
# length per user, and per user and term the rows holding it. Statement-level triggers with
# transition tables: one grouped upsert per statement, rows upserted in key order. A transaction
# can fire several of them (an upsert fires the insert and the update trigger), each locking its own
# rows, so two writers could lock the same rows in opposite orders: the first trigger of a
# transaction takes one advisory lock held to its commit, and the statistics of concurrent writes
# are updated one transaction at a time.
_DELTAS = {
    "ins": ("SELECT user_id, 1 AS sign, dl, terms FROM new_rows", "INSERT", "NEW TABLE AS new_rows"),
    "del": ("SELECT user_id, -1 AS sign, dl, terms FROM old_rows", "DELETE", "OLD TABLE AS old_rows"),
    "upd": ("SELECT user_id, -1 AS sign, dl, terms FROM old_rows UNION ALL "
            "SELECT user_id, 1 AS sign, dl, terms FROM new_rows", "UPDATE",
            "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
}
STATS_DDL = [
    "CREATE TABLE IF NOT EXISTS {p}user_sizes (user_id text PRIMARY KEY, n bigint NOT NULL, dl_sum bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {p}user_terms (user_id text NOT NULL, term text NOT NULL, df bigint NOT NULL, "
    "PRIMARY KEY (user_id, term))",
    "INSERT INTO {p}user_sizes (user_id, n, dl_sum) SELECT user_id, count(*), sum(dl) FROM {p}memories "
    "GROUP BY user_id ON CONFLICT (user_id) DO NOTHING",
    "INSERT INTO {p}user_terms (user_id, term, df) SELECT m.user_id, t.lexeme, count(*) FROM {p}memories m, "
    "unnest(m.terms) t GROUP BY 1, 2 ON CONFLICT (user_id, term) DO NOTHING",
]
for _name, (_rows, _event, _tables) in _DELTAS.items():
    STATS_DDL += [
        f"CREATE OR REPLACE FUNCTION {{p}}stats_{_name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"PERFORM pg_advisory_xact_lock(hashtext('{{p}}stats')); "
        f"INSERT INTO {{p}}user_sizes AS s (user_id, n, dl_sum) SELECT user_id, sum(sign), sum(sign * dl) "
        f"FROM ({_rows}) d GROUP BY user_id HAVING sum(sign) <> 0 OR sum(sign * dl) <> 0 ORDER BY user_id "
        "ON CONFLICT (user_id) DO UPDATE SET n = s.n + excluded.n, dl_sum = s.dl_sum + excluded.dl_sum; "
        f"INSERT INTO {{p}}user_terms AS s (user_id, term, df) SELECT d.user_id, t.lexeme, sum(d.sign) "
        f"FROM ({_rows}) d, unnest(d.terms) t GROUP BY 1, 2 HAVING sum(d.sign) <> 0 ORDER BY 1, 2 "
        "ON CONFLICT (user_id, term) DO UPDATE SET df = s.df + excluded.df; RETURN NULL; END $$",
        f"DROP TRIGGER IF EXISTS {{p}}stats_{_name} ON {{p}}memories",
        f"CREATE TRIGGER {{p}}stats_{_name} AFTER {_event} ON {{p}}memories REFERENCING {_tables} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {{p}}stats_{_name}()",
    ]


def text_ctes(stats: UserStatistics, where: str, params: dict[str, Any], common_rows: int) -> str:
    """The text channel as CTEs ending in `t` (rowid, score, rank), for the terms found in the user's
    rows, with the statistics read before (`STATISTICS_SQL`) sent as values."""
    terms = [t for t, df in stats.df.items() if df > 0]
    weights = []
    for i, term in enumerate(terms):
        params[f"w{i}"] = stats.idf(term)
        weights.append(f"%(w{i})s")
    params["avgdl"] = max(stats.avgdl, MIN_AVGDL)
    return _text(terms, stats.rare(), stats.common(), weights, "%(avgdl)s", where, params, common_rows)


def presumed_text_ctes(terms: Sequence[str], where: str, params: dict[str, Any]) -> str:
    """The text channel of `STATISTICS_CTES`'s one statement: every query term taken as rare, the
    weights read from ``st``, every branch gated by ``st.ok`` (when it is false, a term is common or
    the vector channel walks the index: the statement returns only the statistics)."""
    weights = [f"st.w[{i + 1}]" for i in range(len(terms))]
    return _text(list(terms), list(terms), [], weights, "st.avgdl", where, params, 0, gate=GATE, source=", st")


# the rows of a search found by rowid: in the partitioned layout also by user, so one partition is read
# (the statement's `{same_user}`); the unpartitioned layout's statements stay as they were
SAME_USER = "m.user_id = %(user_id)s AND "

# the gate of the one statement's branches: a pseudo-constant, so PostgreSQL runs a branch only when true
GATE = " AND (SELECT st.ok FROM st)"
MIN_AVGDL = 1e-9


def _text(terms: list[str], rare: list[str], common: list[str], weights: list[str], avgdl: str, where: str,
          params: dict[str, Any], common_rows: int, *, gate: str = "", source: str = "") -> str:
    newest = "ORDER BY m.created_ts DESC, m.rowid DESC"
    branches = []
    if rare:
        params["t_rare"] = tsquery_any(rare)
        branches.append(f"SELECT m.rowid FROM {{memories}} m WHERE {where} AND m.terms @@ %(t_rare)s::tsquery{gate}")
    if common:
        params.update(t_all=tsquery_all(common), t_any=tsquery_any(common), common_rows=common_rows)
        branches.append(f"(SELECT m.rowid FROM {{memories}} m WHERE {where} AND m.terms @@ %(t_all)s::tsquery "
                        f"{newest} LIMIT %(common_rows)s)")
        branches.append(f"(SELECT m.rowid FROM {{memories}} m WHERE {where} AND m.terms @@ %(t_any)s::tsquery "
                        f"{newest} LIMIT %(limit)s)")
    params.update(k1=K1, k1_plus_1=K1 + 1.0, b=B, one_minus_b=1.0 - B)
    tfs, parts = [], []
    for i, (term, weight) in enumerate(zip(terms, weights)):
        params[f"q{i}"] = _lexeme(term)
        # tf: ts_rank of one lexeme with unit weights is H(tf)/H(inf) (H: the sum of 1/k^2 up to
        # tf), which this inverts; exact after rounding for every tf up to MAX_TF. NULL: not held
        tfs.append(f"CASE WHEN m.terms @@ %(q{i})s::tsquery THEN round(1.0 / (1.6449340668 - 1.6449340668 * "
                   f"ts_rank('{{{{1,1,1,1}}}}', m.terms, %(q{i})s::tsquery, 0)) - 0.5) END AS tf{i}")
        parts.append(f"CASE WHEN s.tf{i} IS NOT NULL THEN {weight} * s.tf{i} * %(k1_plus_1)s / (s.tf{i} + "
                     f"%(k1)s * (%(one_minus_b)s + %(b)s * s.dl / {avgdl})) ELSE 0 END")
    # each row's term frequencies computed once, in a subquery kept apart ("OFFSET 0"): pulled up,
    # its expressions would be computed again for every use in the score. {same_user}: the user's
    # condition in the partitioned layout (one partition read), nothing otherwise (see `SAME_USER`)
    return (
        f"cand AS ({' UNION '.join(branches)}), "
        f"t0 AS (SELECT s.rowid, ({' + '.join(parts)})::float8 AS score FROM (SELECT m.rowid, m.dl, "
        f"{', '.join(tfs)} FROM {{memories}} m WHERE {{same_user}}m.rowid IN (SELECT rowid FROM cand) "
        f"OFFSET 0) s{source} "
        "ORDER BY score DESC, s.rowid LIMIT %(limit)s), "
        "t AS (SELECT rowid, score, row_number() OVER (ORDER BY score DESC, rowid) AS rank FROM t0)")


# The user's statistics as the first CTEs of a search (one row, ``st``): what `STATISTICS_SQL` reads,
# the query terms' document frequencies and Lucene idf weights in the order of %(terms)s (the same
# double-precision arithmetic as `UserStatistics.idf`), the average length, and ``ok``: whether the
# statement planned without knowing them (`presumed_text_ctes`, the exact vector scan) is the one
# they call for: no query term is common and the vector channel is exact.
STATISTICS_CTES = (
    "sz AS (SELECT COALESCE(s.n, 0) AS n, COALESCE(s.dl_sum, 0) AS dl_sum, "
    "EXISTS (SELECT 1 FROM {memories} a WHERE a.user_id = %(user_id)s AND a.ann) AS indexed "
    "FROM (SELECT 1) one LEFT JOIN {user_sizes} s ON s.user_id = %(user_id)s), "
    "qt AS (SELECT q.i, q.term, COALESCE(u.df, 0) AS df FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, i) "
    "LEFT JOIN {user_terms} u ON u.user_id = %(user_id)s AND u.term = q.term), "
    "st AS MATERIALIZED (SELECT sz.n, sz.dl_sum, sz.indexed, "
    "ARRAY(SELECT qt.term || ' ' || qt.df FROM qt WHERE qt.df > 0 ORDER BY qt.i) AS found, "
    "ARRAY(SELECT ln(1.0::float8 + (sz.n::float8 - qt.df::float8 + 0.5::float8) / (qt.df::float8 + 0.5::float8)) "
    "FROM qt ORDER BY qt.i) AS w, "
    "GREATEST(CASE WHEN sz.n > 0 THEN sz.dl_sum::float8 / sz.n::float8 ELSE 0::float8 END, %(min_avgdl)s) AS avgdl, "
    "COALESCE((SELECT max(qt.df) FROM qt), 0) <= %(bound)s AND (NOT sz.indexed OR sz.n <= %(exact_rows)s) AS ok "
    "FROM sz)")


EMPTY_TEXT = "t AS (SELECT NULL::bigint AS rowid, NULL::float8 AS score, NULL::bigint AS rank WHERE FALSE)"
EMPTY_VECTOR = "v AS (SELECT NULL::bigint AS rowid, NULL::float8 AS dist, NULL::bigint AS rank WHERE FALSE)"


def vector_ctes(dim: int, where: str, *, through_index: bool, gate: str = "") -> str:
    """The vector channel as CTEs ending in `v` (rowid, dist, rank): exact over the filtered rows, or
    the HNSW walk over the user's indexed rows together with an exact scan of the rest. `gate`: a
    condition of the exact scan (`GATE`)."""
    cast = f"m.embedding::vector({int(dim)})"
    qv = f"%(vec)s::vector({int(dim)})"
    # the partial HNSW index is chosen only when its predicate appears with the model as a literal
    vwhere = f"{where} AND m.embedding_model = {{model_lit}}"
    # "+ 0": an expression the index cannot serve, so this branch is a scan, not an index walk
    exact = (f"SELECT m.rowid, ({cast} <=> {qv}) AS dist FROM {{memories}} m WHERE {vwhere}{{extra}} "
             f"ORDER BY ({cast} <=> {qv}) + 0, m.rowid LIMIT %(limit)s")
    if not through_index:
        body = exact.replace("{extra}", gate)
    else:
        body = (f"(SELECT m.rowid, ({cast} <=> {qv}) AS dist FROM {{memories}} m WHERE {vwhere} AND m.ann "
                f"ORDER BY {cast} <=> {qv} LIMIT %(limit)s) UNION ALL ({exact.replace('{extra}', ' AND NOT m.ann')})")
    return (f"v0 AS MATERIALIZED ({body}), "
            "v AS (SELECT rowid, dist, row_number() OVER (ORDER BY dist, rowid) AS rank FROM v0 "
            "ORDER BY dist, rowid LIMIT %(limit)s)")


class RecordCache:
    """Memories recently returned by searches, by row and row version (`xmin`, which changes with
    every update of the row, in any process): a search returns row ids and versions, and only the
    rows not held at that version are read and parsed. Least recently used rows are dropped first.
    Callers must not mutate the records (the engine copies what it returns)."""

    def __init__(self, size: int) -> None:
        self.size = max(0, int(size))
        self._rows: OrderedDict[int, tuple[int, Memory]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, rowid: int, version: int) -> Memory | None:
        with self._lock:
            held = self._rows.get(rowid)
            if held is None or held[0] != version:
                return None
            self._rows.move_to_end(rowid)
            return held[1]

    def put(self, rowid: int, version: int, memory: Memory) -> None:
        if not self.size:
            return
        with self._lock:
            self._rows[rowid] = (version, memory)
            self._rows.move_to_end(rowid)
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)
