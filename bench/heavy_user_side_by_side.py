"""One heavy user on SQLite and on PostgreSQL (unpartitioned and ``partitions = N``), side by side (issue 44).

The three stores get the same synthetic memories (`scale_store.Corpus`: one user with ``--memories``
memories, default 100,000; sentences from a Zipf vocabulary, random unit 384-d vectors); the two
PostgreSQL layouts live on one embedded server and are loaded inside `bulk_load()`. Then every query is
run on the three stores in turn (the order rotating from one query to the next), so a busy machine
slows them alike: first ``store.search`` (``--limit`` candidates per channel), then the full
``MemoryScope.retrieve`` with an embedder that returns precomputed vectors (no model runs). Prints p50 /
p95 per store, PostgreSQL's ratio to SQLite (p95 and p50) and, per PostgreSQL store, how many of the
queries (warm-up included) got the same answer as from SQLite (`search`: the candidates' ids and ranks
in each channel; `retrieve`: ids, order and scores), and writes them with ``--json``.

Random vectors are HNSW's worst case (an HNSW walk finds a small share of the exact neighbours); with the
defaults this user (100,000 memories, at most ``user_index_rows`` = 200,000) is searched in the process by
both stores (`user_index`, the embedded store's search), so the HNSW index plays no part in these figures.

    PYTHONPATH=. python bench/heavy_user_side_by_side.py [--memories 100000] [--partitions 4] [--queries 300]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))
from scale_store import EMBEDDER_NAME, START, Corpus, PrecomputedEmbedder, _batches, _percentiles  # noqa: E402

from memoryscope_plugins.bench.report_file import print_report  # noqa: E402
from memoryscope_plugins.bench.throwaway_postgres import postgres_server  # noqa: E402
from memoryscope_plugins.engine import MemoryScope  # noqa: E402
from memoryscope_plugins.settings import RetrievalSettings, Settings  # noqa: E402
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest  # noqa: E402
from memoryscope_plugins.storage.postgres_store import PostgresStore  # noqa: E402
from memoryscope_plugins.storage.sqlite_store import SQLiteStore  # noqa: E402

USER = "user-000000"  # scale_store's name of the only user


def load(stores: dict[str, Any], memories: int, seed: int, dim: int) -> dict[str, float]:
    """Put the same batches into every store; each store's seconds (PostgreSQL's inside `bulk_load()`)."""
    corpus = Corpus(seed=seed, dim=dim)
    batches = list(_batches(corpus, memories, 1, 1000, seed + 1))
    spent = {}
    for name, store in stores.items():
        start = time.perf_counter()
        bulk = store.bulk_load() if isinstance(store, PostgresStore) else contextlib.nullcontext()
        with bulk:
            for batch, vectors in batches:
                store.put(batch, vectors)
        spent[name] = round(time.perf_counter() - start, 1)
        print(f"loaded {name}: {memories:,} memories in {spent[name]} s", flush=True)
    return spent


def side_by_side(names: list[str], calls: dict[str, Callable[[str, Any], object]], queries: list[tuple[str, Any]],
                 warmup: int) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """Each query on every store in turn, the order rotating; p50 / p95 per store (after `warmup` rounds),
    and per PostgreSQL store the number of queries whose answer (what the call returns) equals SQLite's."""
    times: dict[str, list[float]] = {name: [] for name in names}
    same = dict.fromkeys((name for name in names if name != "sqlite"), 0)
    for i, (text, vector) in enumerate(queries):
        answers = {}
        for name in names[i % len(names):] + names[:i % len(names)]:
            start = time.perf_counter()
            answers[name] = calls[name](text, vector)
            if i >= warmup:
                times[name].append((time.perf_counter() - start) * 1000)
        for name in same:
            same[name] += answers[name] == answers["sqlite"]
    return {name: _percentiles(values) for name, values in times.items()}, same


def ratios(figures: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each PostgreSQL layout's p50 and p95 over SQLite's."""
    base = figures["sqlite"]
    return {name: {q: round(f[q] / base[q], 2) for q in ("p50", "p95")}
            for name, f in figures.items() if name != "sqlite"}


def measure(stores: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    corpus = Corpus(seed=args.seed + 2, dim=args.dim)
    queries = [(corpus.query(), corpus.vectors(1)[0]) for _ in range(args.warmup + args.queries)]
    names = list(stores)
    report: dict[str, Any] = {}

    def searcher(store: Any) -> Callable[[str, Any], object]:
        def search(text: str, vector: Any) -> object:
            found = store.search(SearchRequest(user_id=USER, text=text, vector=vector, filter=MemoryFilter(),
                                               limit=args.limit))
            return sorted((c.memory.id, c.text_rank, c.vector_rank) for c in found)
        return search

    report["search_ms"], report["search_same_as_sqlite"] = side_by_side(
        names, {n: searcher(s) for n, s in stores.items()}, queries, args.warmup)
    report["search_ratio_to_sqlite"] = ratios(report["search_ms"])
    settings = Settings()
    settings = settings.model_copy(update={
        "consolidation": settings.consolidation.model_copy(update={"enabled": False})})
    now = START + timedelta(days=2 * 365 + 1)
    engines = {name: MemoryScope(settings, store=store, embedder=PrecomputedEmbedder(args.dim), start_worker=False)
               for name, store in stores.items()}

    def retriever(engine: MemoryScope) -> Callable[[str, Any], object]:
        def retrieve(text: str, vector: Any) -> object:
            return [(m.memory.id, round(m.score, 9)) for m in engine.retrieve(USER, text, now=now).memories]
        return retrieve

    report["retrieve_ms"], report["retrieve_same_as_sqlite"] = side_by_side(
        names, {n: retriever(e) for n, e in engines.items()}, queries, args.warmup)
    report["retrieve_ratio_to_sqlite"] = ratios(report["retrieve_ms"])
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000, help="memories of the one user")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the partitioned PostgreSQL store")
    parser.add_argument("--queries", type=int, default=300, help="queries measured per store and call")
    parser.add_argument("--warmup", type=int, default=30, help="queries run first, not measured")
    parser.add_argument("--limit", type=int, default=RetrievalSettings().candidates, help="candidates per channel")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    if args.memories < 1 or args.queries < 1 or args.warmup < 0 or args.partitions < 1:
        parser.error("--memories, --queries and --partitions must be at least 1, --warmup at least 0")
    report: dict[str, Any] = {"memories": args.memories, "partitions": args.partitions, "queries": args.queries,
                              "limit": args.limit}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memoryscope-heavy-")))
        server = stack.enter_context(postgres_server(durable=True, settings={
            "shared_buffers": "1GB", "maintenance_work_mem": "1GB", "max_wal_size": "8GB"}))
        dsn = server.create_database("heavy")
        stores: dict[str, Any] = {
            "sqlite": SQLiteStore(folder / "heavy.db", embedding_model=EMBEDDER_NAME),
            "postgres": PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix="heavy_u_", partitions=0),
            "postgres_partitioned": PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix="heavy_p_",
                                                  partitions=args.partitions)}
        for store in stores.values():
            stack.callback(store.close)
        report["load_s"] = load(stores, args.memories, args.seed, args.dim)
        report.update(measure(stores, args))
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
