"""What retrieval costs the primary when a read standby serves it (issue 44): a throw-away PostgreSQL primary
and a streaming standby made from it (`throwaway_postgres.standby_server`), a conversation recorded through
the engine on the primary, then its questions retrieved with ``consistency="replica"`` and as many with
``"primary"``. For each, the change of both servers' own counters (``pg_stat_database`` of the store's
database: transactions, tuples returned and fetched, blocks read or hit; and the scans of the store's own
tables, ``pg_stat_user_tables``, which no catalogue read or autovacuum moves; read after PostgreSQL's idle
flush of backend statistics, 10 s), the p50 and p95 of ``retrieve``, and whether both answered the same (ids,
order, scores).

    python bench/replica_reads.py [--rounds 20] [--json]
    python bench/replica_reads.py --data /work/shared/data/locomo_dev.json [--limit-conversations 2] [--json]

Without ``--data``: the demo conversation, ``--rounds`` rounds of its questions (default 20). With
``--data``: every conversation of a LoCoMo file (locomo10.json format; never packaged), recorded turn by turn
as `bench locomo --mode turns` does (no consolidation), and every question asked once per round (default 1),
top 20, the day after the conversation's last session.

The measuring connection itself adds a few transactions and catalogue tuples to each server's counters:
they are measured first, with no retrieval between the two readings (``measuring_connection``), and taken
off each pass's change (``beyond_measuring``); the raw change is shown too. Before measuring, the primary's
tables are vacuumed and analysed, so autovacuum has nothing left to do on them during the passes."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

import psycopg

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.bench import locomo
from memoryscope_plugins.bench.throwaway_postgres import postgres_server, standby_server
from memoryscope_plugins.settings import Settings

DATABASE = "replica_reads"
STATS_FLUSH_S = 11.0  # a backend's statistics reach pg_stat_database within 10 s of it going idle
COUNTERS = ("xact_commit", "tup_returned", "tup_fetched", "blks_hit + blks_read")
# scans of the store's own tables (pg_stat_user_tables: no catalogue, no autovacuum)
TABLE_SCANS = "(SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables)"
NAMES = (*COUNTERS, "store_table_scans")


@dataclass(frozen=True)
class Ask:
    """One retrieval of a pass."""
    user: str
    query: str
    now: datetime | str
    top_k: int | None = None


def counters(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT {', '.join(COUNTERS)}, {TABLE_SCANS} FROM pg_stat_database WHERE datname = %s",
                           (DATABASE,)).fetchone()
    assert row is not None
    return [int(v) for v in row]


def record_demo(engine: MemoryScope) -> list[Ask]:
    """Record the packaged demo conversation; its questions."""
    demo = json.loads((resources.files("memoryscope_plugins") / "data" / "demo_conversation.json")
                      .read_text(encoding="utf-8"))
    for number, session in enumerate(demo["sessions"], start=1):
        when = datetime.fromisoformat(session["time"])
        engine.record(demo["user"], [{"role": role, "content": text, "timestamp": when + timedelta(seconds=i)}
                                     for i, (role, text) in enumerate(session["messages"])],
                      agent_id=demo["agent"], session_id=f"session-{number}")
    return [Ask(demo["user"], q["query"], q["now"]) for q in demo["questions"]]


def record_locomo(engine: MemoryScope, path: str, limit: int | None) -> tuple[list[Ask], int]:
    """Record every conversation of a LoCoMo file turn by turn; its questions, and the turns recorded."""
    asks: list[Ask] = []
    turns = 0
    for conv in locomo.load_conversations(path)[:limit]:
        turns += locomo.ingest(engine, conv, "turns")
        now = conv.sessions[-1].when + timedelta(days=1)
        asks += [Ask(conv.id, q.text, now, max(locomo.KS)) for q in conv.questions]
    return asks, turns


def vacuum(dsn: str) -> None:
    """VACUUM ANALYZE the primary's database, so autovacuum does not run during the passes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def idle(dsns: dict[str, str]) -> dict[str, dict[str, int]]:
    """What the measuring connections alone add to each server's counters (no retrieval between them)."""
    time.sleep(STATS_FLUSH_S)
    before = {name: counters(dsn) for name, dsn in dsns.items()}
    time.sleep(STATS_FLUSH_S)
    return {name: dict(zip(NAMES, (a - b for a, b in zip(counters(dsn), before[name]))))
            for name, dsn in dsns.items()}


def measure(engine: MemoryScope, asks: list[Ask], rounds: int, mode: str, dsns: dict[str, str],
            own: dict[str, dict[str, int]]) -> tuple[dict[str, Any], list[list[tuple[str, float]]]]:
    time.sleep(STATS_FLUSH_S)
    before = {name: counters(dsn) for name, dsn in dsns.items()}
    times, answers = [], []
    for _ in range(rounds):
        for ask in asks:
            start = time.perf_counter()
            result = engine.retrieve(ask.user, ask.query, now=ask.now, top_k=ask.top_k,
                                     consistency=mode)  # type: ignore[arg-type]
            times.append((time.perf_counter() - start) * 1000)
            answers.append([(m.memory.id, m.score) for m in result.memories])
    time.sleep(STATS_FLUSH_S)
    figures: dict[str, Any] = {"retrievals": len(times), "p50_ms": round(statistics.median(times), 2),
                               "p95_ms": round(locomo.percentile(times, 95), 2)}
    for name, dsn in dsns.items():
        after = counters(dsn)
        raw = dict(zip(NAMES, (a - b for a, b in zip(after, before[name]))))
        figures[name] = {"raw": raw, "beyond_measuring": {k: v - own[name][k] for k, v in raw.items()}}
    return figures, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, help="rounds of the questions per mode (default 20; 1 with --data)")
    parser.add_argument("--data", help="a LoCoMo file (locomo10.json format) instead of the demo conversation")
    parser.add_argument("--limit-conversations", type=int, help="with --data: only the first N conversations")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (1 if args.data else 20)
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    with postgres_server() as primary:
        dsn = primary.create_database(DATABASE)
        with standby_server(primary) as standby:
            dsns = {"primary": dsn, "standby": standby.dsn.rsplit("/", 1)[0] + "/" + DATABASE}
            settings = Settings(store={"backend": "postgres", "url": dsn, "read_urls": [dsns["standby"]]},
                                consolidation={"worker": "none"})
            result: dict[str, Any] = {"data": args.data or "demo conversation", "rounds": rounds}
            with MemoryScope(settings) as engine:
                start = time.perf_counter()
                if args.data:
                    asks, result["turns_recorded"] = record_locomo(engine, args.data, args.limit_conversations)
                else:
                    asks = record_demo(engine)
                result["record_s"] = round(time.perf_counter() - start, 1)
                for user in dict.fromkeys(ask.user for ask in asks):  # the model loaded, each user's index held
                    engine.retrieve(user, "warm up the query path")
                vacuum(dsn)
                result["questions"] = len(asks)
                result["measuring_connection"] = own = idle(dsns)
                answers = {}
                for mode in ("replica", "primary"):
                    result[mode], answers[mode] = measure(engine, asks, rounds, mode, dsns, own)
                result["same_answers"] = answers["replica"] == answers["primary"]
                result["differing_answers"] = sum(a != b for a, b in zip(answers["replica"], answers["primary"]))
                result["standbys"] = engine.store.standby_states()  # type: ignore[attr-defined]
    print(json.dumps(result, indent=None if args.json else 1), file=sys.stdout)
    return 0 if result["same_answers"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
