"""A heavy user and many light ones on PostgreSQL, unpartitioned against ``partitions = N``, side by side.

Both stores live on one server and get the same synthetic memories (`scale_store.Corpus`: one heavy
user, many light users, 384-d vectors), each write and each search run on one store and then the
other (alternating which goes first), so a busy machine slows both alike. Figures per layout:

- load: memories/s of `put` batches inside `bulk_load()` (no HNSW inserts), then of batches of 50
  into the heavy user with the HNSW index live, and of 5 memories of one light user each;
- search: `store.search` p50 / p95 of the heavy user through the database (`user_index_rows=0`:
  the statistics, common terms bounded, the HNSW walk) and held in the process (the default), and
  of light users through the database; how many searches returned the same ids in both layouts,
  and the share of ids both returned (the HNSW walk is approximate, over two graphs built apart).

    PYTHONPATH=. python bench/partitions_heavy.py [--heavy 30000] [--light-users 200] [--partitions 8]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from scale_store import EMBEDDER_NAME, Corpus, _batches, _percentiles  # noqa: E402

from memoryscope_plugins.bench.report_file import print_report  # noqa: E402
from memoryscope_plugins.bench.throwaway_postgres import postgres_server  # noqa: E402
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest  # noqa: E402
from memoryscope_plugins.storage.postgres_store import PostgresStore  # noqa: E402

LAYOUTS = ("unpartitioned", "partitioned")


def renamed(memories: list, user: str | None, tag: str) -> list:
    """The memories with ids of their own (`tag`), all of `user` when given."""
    for m in memories:
        m.id = f"{tag}-{m.id}"
        if user is not None:
            m.user_id = user
    return memories


def timed_puts(stores: dict[str, PostgresStore], batches: list, totals: dict[str, float]) -> None:
    for n, (memories, vectors) in enumerate(batches):
        for name in (LAYOUTS if n % 2 == 0 else LAYOUTS[::-1]):
            start = time.perf_counter()
            stores[name].put(memories, vectors)
            totals[name] += time.perf_counter() - start


def mark(marks: dict[str, float], name: str) -> None:
    marks[name] = time.perf_counter()


def load(stores: dict[str, PostgresStore], args: argparse.Namespace, corpus: Corpus) -> dict[str, Any]:
    report: dict[str, Any] = {}
    heavy = [(renamed(m, "heavy", "h"), v) for m, v in _batches(corpus, args.heavy, 1, 500, 1)]
    light = [(renamed(m, None, "l"), v) for m, v in _batches(corpus, args.light_users * 50, args.light_users, 500, 2)]
    totals = dict.fromkeys(LAYOUTS, 0.0)
    built: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        for name, store in stores.items():
            # the HNSW indexes are rebuilt as each bulk load ends; the callback (pushed first) runs after it
            stack.callback(mark, built, name)
            stack.enter_context(store.bulk_load(maintenance_work_mem=args.maintenance_work_mem))
        timed_puts(stores, heavy + light, totals)
        built["start"] = time.perf_counter()
    n = args.heavy + args.light_users * 50
    report["bulk_load_per_s"] = {name: round(n / totals[name]) for name in LAYOUTS}
    # the stack unwinds in reverse: the partitioned store's build runs first, then the unpartitioned one's
    report["hnsw_build_s"] = {"partitioned": round(built["partitioned"] - built["start"], 1),
                              "unpartitioned": round(built["unpartitioned"] - built["partitioned"], 1)}
    light_users = [f"user-{i:06d}" for i in range(args.light_users)]
    for what, batches in (("heavy", [(renamed(m, "heavy", "hx"), v) for m, v in _batches(corpus, 1000, 1, 50, 3)]),
                          ("light", [(renamed(m, light_users[n % len(light_users)], "lx"), v)  # a user's 5
                                     for n, (m, v) in enumerate(_batches(corpus, 1000, 1, 5, 4))])):
        totals = dict.fromkeys(LAYOUTS, 0.0)
        timed_puts(stores, batches, totals)
        report[f"write_{what}_per_s"] = {name: round(1000 / totals[name]) for name in LAYOUTS}
    return report


def searches(stores: dict[str, PostgresStore], corpus: Corpus, users: list[str], queries: int,
             agreement: bool) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    times: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    same, overlap = 0, 0.0
    for n in range(queries + 10):
        request = SearchRequest(user_id=users[int(rng.integers(len(users)))], text=corpus.query(),
                                vector=corpus.vectors(1)[0], filter=MemoryFilter(), limit=60)
        found = {}
        for name in (LAYOUTS if n % 2 == 0 else LAYOUTS[::-1]):
            start = time.perf_counter()
            found[name] = [c.memory.id for c in stores[name].search(request)]
            if n >= 10:  # the first ten warm up
                times[name].append((time.perf_counter() - start) * 1000.0)
        if n >= 10:
            same += found["unpartitioned"] == found["partitioned"]
            shared = set(found["unpartitioned"]) & set(found["partitioned"])
            overlap += len(shared) / max(len(found["unpartitioned"]), 1)
    out: dict[str, Any] = {name: _percentiles(values) for name, values in times.items()}
    if agreement:
        out["same_ids"] = f"{same} of {queries}"
        out["shared_ids"] = round(overlap / queries, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heavy", type=int, default=30_000, help="memories of the heavy user")
    parser.add_argument("--light-users", type=int, default=200, help="light users, 50 memories each")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--maintenance-work-mem", default="512MB",
                        help="for the HNSW builds at the end of the bulk load (2GB for 300,000 memories and more)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"heavy": args.heavy, "light_users": args.light_users, "partitions": args.partitions}
    with postgres_server(durable=True, settings={"shared_buffers": "1GB"}) as server:
        dsn = server.create_database("heavy")
        layouts = {"unpartitioned": 0, "partitioned": args.partitions}
        stores = {name: PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix=f"hv_{name[0]}_",
                                      partitions=n, user_index_rows=0) for name, n in layouts.items()}
        held = {name: PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix=f"hv_{name[0]}_")
                for name in layouts}
        try:
            corpus = Corpus(seed=7)
            report.update(load(stores, args, corpus))
            with psycopg.connect(dsn, autocommit=True) as conn:
                for name in layouts:
                    conn.execute(f"VACUUM ANALYZE hv_{name[0]}_memories")
                report["size_mb"] = {name: round(int(conn.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "WHERE c.relname LIKE %s AND c.relkind IN ('r', 'p')",
                    (f"hv\\_{name[0]}\\_%",)).fetchone()[0]) / 2**20) for name in layouts}  # type: ignore[index]
            light = [f"user-{i:06d}" for i in range(args.light_users)]
            report["search_heavy_database_ms"] = searches(stores, corpus, ["heavy"], args.queries, True)
            report["search_heavy_held_ms"] = searches(held, corpus, ["heavy"], args.queries, True)
            report["search_light_database_ms"] = searches(stores, corpus, light, args.queries, True)
        finally:
            for store in (*stores.values(), *held.values()):
                store.close()
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
