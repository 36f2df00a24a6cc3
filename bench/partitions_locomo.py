"""LoCoMo retrieval on a partitioned PostgreSQL store against an unpartitioned one: the same answers?

Records every conversation of a LoCoMo file turn by turn (as `bench locomo --mode turns` does; no
consolidation) through the engine into two stores on one PostgreSQL: tables without partitions, and
tables with ``store.partitions = N``. Then copies the unpartitioned store into the partitioned layout
and back with `migrate` (two more stores), asks every question of every conversation on all four,
and compares the results: memory ids, order and scores. Prints the figures (ingest ms per turn,
search p50 / p95 per layout) and exits 1 when any answer differs. Without ``--dsn`` it starts an
embedded PostgreSQL 18 + pgvector for the run.

    python bench/partitions_locomo.py /work/shared/data/locomo_dev.json [--partitions 8] [--limit-conversations 2]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import uuid
from datetime import timedelta
from typing import Any

from memoryscope_plugins.bench import locomo
from memoryscope_plugins.bench.report_file import print_report
from memoryscope_plugins.bench.throwaway_postgres import postgres_server
from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.settings import Settings
from memoryscope_plugins.storage.migrate import migrate

Answer = list[tuple[str, str, float]]


def settings_for(dsn: str, prefix: str, partitions: int | None) -> Settings:
    base = Settings()
    return base.model_copy(update={
        "store": base.store.model_copy(update={"backend": "postgres", "url": dsn, "index_prefix": prefix,
                                               "partitions": partitions}),
        "consolidation": base.consolidation.model_copy(update={"enabled": False})})


def ingest(settings: Settings, conversations: list[locomo.Conversation]) -> tuple[float, int]:
    """Record every conversation; the mean ms per turn, and the store's partitions."""
    turns, spent = 0, 0.0
    with MemoryScope(settings) as memory:
        partitions = int(memory.store.partitions)  # type: ignore[attr-defined]
        for conv in conversations:
            start = time.perf_counter()
            turns += locomo.ingest(memory, conv, "turns")
            spent += time.perf_counter() - start
    return spent * 1000.0 / max(turns, 1), partitions


def answers(settings: Settings, conversations: list[locomo.Conversation]
            ) -> tuple[list[Answer], list[float], list[list[str]]]:
    """Every question's results and each search's ms. A result is named by the LoCoMo turn it holds
    (the stores recorded separately gave their memories ids of their own), its text and its score; the
    stores copied by `migrate` keep the ids, compared on top."""
    out: list[Answer] = []
    spent: list[float] = []
    ids: list[list[str]] = []
    with MemoryScope(settings) as memory:
        memory.retrieve("warm-up", "warm up the query path")
        for conv in conversations:
            now = conv.sessions[-1].when + timedelta(days=1)
            for question in conv.questions:
                start = time.perf_counter()
                result = memory.retrieve(conv.id, question.text, top_k=max(locomo.KS), now=now)
                spent.append((time.perf_counter() - start) * 1000.0)
                out.append([(",".join(locomo.covered_turns(item.memory.metadata)), item.memory.content,
                             round(item.score, 9)) for item in result.memories])
                ids.append([item.memory.id for item in result.memories])
    return out, spent, ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="a LoCoMo file (locomo10.json format)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the partitioned stores (default 8)")
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: start an embedded server)")
    parser.add_argument("--limit-conversations", type=int)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    conversations = locomo.load_conversations(args.data)[:args.limit_conversations]
    run = uuid.uuid4().hex[:6]
    layouts = {"unpartitioned": 0, "partitioned": args.partitions}
    report: dict[str, Any] = {"data": args.data, "partitions": args.partitions, "conversations": len(conversations),
                              "questions": sum(len(c.questions) for c in conversations)}
    with contextlib.ExitStack() as stack:
        dsn = args.dsn
        if dsn is None:
            dsn = stack.enter_context(postgres_server(durable=True)).create_database("partitions")
        prefixes = {name: f"lp{run}_{short}" for name, short in
                    (("unpartitioned", "u"), ("partitioned", "p"), ("migrated", "m"), ("migrated_back", "b"))}
        for name, partitions in layouts.items():
            report[f"ingest_ms_per_turn_{name}"], report[f"partitions_{name}"] = ingest(
                settings_for(dsn, prefixes[name], partitions), conversations)
        start = time.perf_counter()
        migrate(f"{dsn}#{prefixes['unpartitioned']}", f"{dsn}#{prefixes['migrated']}", partitions=args.partitions)
        migrate(f"{dsn}#{prefixes['migrated']}", f"{dsn}#{prefixes['migrated_back']}", partitions=0)
        report["migrate_round_trip_s"] = time.perf_counter() - start
        results: dict[str, list[Answer]] = {}
        ids: dict[str, list[list[str]]] = {}
        for name, prefix in prefixes.items():
            results[name], spent, ids[name] = answers(settings_for(dsn, prefix, None), conversations)
            report[f"search_ms_{name}"] = {"p50": locomo.percentile(spent, 50), "p95": locomo.percentile(spent, 95)}
    expected = results["unpartitioned"]
    report["differing_answers"] = {name: sum(a != b for a, b in zip(expected, got))
                                   for name, got in results.items() if name != "unpartitioned"}
    report["differing_ids_after_migrate"] = {name: sum(a != b for a, b in zip(ids["unpartitioned"], ids[name]))
                                             for name in ("migrated", "migrated_back")}
    report["empty_answers"] = sum(not a for a in expected)
    print_report(report, args.json)
    differing = [*report["differing_answers"].values(), *report["differing_ids_after_migrate"].values()]
    return 1 if any(differing) else 0


if __name__ == "__main__":
    raise SystemExit(main())
