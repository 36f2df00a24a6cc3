"""PostgreSQL's two search channels on tables an earlier `scale_store.py --keep` run loaded: latency and
agreement with the exact answer, for several settings.

- full text: `text_term_rows` (the per-term bound of `postgres_search`) against an unbounded run
  (a bound above the user's size ranks exactly as the embedded store): p50 / p95 of `store.search`
  with text only, and the share of the exact top `limit` that the bounded channel returns;
- vectors: `hnsw_ef_search` values (HNSW walk with iterative scans) against the exact scan: p50 /
  p95 with a vector only, and recall of the exact top `limit`.

    python bench/scale_store.py --backend postgres --single-user --pg-bulk --dsn URL --keep   # prints the prefix
    python bench/pg_channels.py --dsn URL --prefix scale_ab12cd_ [--queries 100] [--limit 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_store import EMBEDDER_NAME, Corpus, _percentiles  # noqa: E402

from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest  # noqa: E402
from memoryscope_plugins.storage.postgres_store import PostgresStore  # noqa: E402


def timed(store: PostgresStore, requests: list[SearchRequest]) -> tuple[dict[str, float], list[list[str]]]:
    for request in requests[:10]:  # warm-up
        store.search(request)
    times, results = [], []
    for request in requests:
        t0 = time.perf_counter()
        found = store.search(request)
        times.append((time.perf_counter() - t0) * 1000)
        key: Callable[[Any], Any] = ((lambda c: c.text_rank) if request.text else (lambda c: c.vector_rank))
        results.append([c.memory.id for c in sorted(found, key=key)])
    return _percentiles(times), results


def overlap(got: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(got, exact)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--user", default="user-000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--bounds", default="250,1000,4000")
    parser.add_argument("--ef", default="40,100,200")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    corpus = Corpus(seed=args.seed)
    texts = [corpus.query() for _ in range(args.queries)]
    vectors = corpus.vectors(args.queries)
    flt = MemoryFilter()
    report: dict[str, Any] = {"prefix": args.prefix, "queries": args.queries, "limit": args.limit}

    def store(**kwargs: Any) -> PostgresStore:
        return PostgresStore(args.dsn, embedding_model=EMBEDDER_NAME, table_prefix=args.prefix, **kwargs)

    def sweep(requests: list[SearchRequest], exact: dict[str, int], settings: dict[str, dict[str, int]],
              measure: str) -> None:
        """Time the exact channel, then each setting, with the share of the exact answer found."""
        with store(**exact) as exact_store:
            report[f"{measure}_exact_ms"], truth = timed(exact_store, requests)
        for name, kwargs in settings.items():
            with store(**kwargs) as other:
                ms, got = timed(other, requests)
            report[name] = {"ms": ms, f"{measure}_overlap_with_exact": round(overlap(got, truth), 3)}

    sweep([SearchRequest(user_id=args.user, text=t, vector=None, filter=flt, limit=args.limit) for t in texts],
          {"text_term_rows": 10 ** 9}, {f"text_bound_{b}": {"text_term_rows": int(b)} for b in args.bounds.split(",")},
          "text")
    sweep([SearchRequest(user_id=args.user, text=None, vector=v, filter=flt, limit=args.limit) for v in vectors],
          {"exact_vector_rows": 10 ** 9}, {f"vector_ef_{e}": {"hnsw_ef_search": int(e)} for e in args.ef.split(",")},
          "vector")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
