"""What retrieval costs the primary when a read standby serves it (issue 44): a throw-away PostgreSQL primary
and a streaming standby made from it (`throwaway_postgres.standby_server`), the demo conversation recorded,
then ``--rounds`` rounds of its questions retrieved with ``consistency="replica"`` and as many with
``"primary"``. For each, the change of both servers' own counters (``pg_stat_database`` of the store's
database: transactions, tuples returned and fetched, blocks read or hit; read after PostgreSQL's idle flush
of backend statistics, 10 s), the p50 of ``retrieve``, and whether both answered the same (ids, order,
scores).

    python bench/replica_reads.py [--rounds 20] [--json]

The measuring connection itself adds a few transactions and catalogue tuples to each server's counters:
the same on both, and all the primary's counters show in "replica" mode."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timedelta
from importlib import resources
from typing import Any

import psycopg

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.bench.throwaway_postgres import postgres_server, standby_server
from memoryscope_plugins.settings import Settings

DATABASE = "replica_reads"
STATS_FLUSH_S = 11.0  # a backend's statistics reach pg_stat_database within 10 s of it going idle
COUNTERS = ("xact_commit", "tup_returned", "tup_fetched", "blks_hit + blks_read")


def counters(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT {', '.join(COUNTERS)} FROM pg_stat_database WHERE datname = %s",
                           (DATABASE,)).fetchone()
    assert row is not None
    return [int(v) for v in row]


def record_demo(engine: MemoryScope) -> tuple[str, list[dict[str, str]]]:
    demo = json.loads((resources.files("memoryscope_plugins") / "data" / "demo_conversation.json")
                      .read_text(encoding="utf-8"))
    for number, session in enumerate(demo["sessions"], start=1):
        when = datetime.fromisoformat(session["time"])
        engine.record(demo["user"], [{"role": role, "content": text, "timestamp": when + timedelta(seconds=i)}
                                     for i, (role, text) in enumerate(session["messages"])],
                      agent_id=demo["agent"], session_id=f"session-{number}")
    return demo["user"], demo["questions"]


def measure(engine: MemoryScope, user: str, questions: list[dict[str, str]], rounds: int, mode: str,
            dsns: dict[str, str]) -> tuple[dict[str, Any], list[list[tuple[str, float]]]]:
    time.sleep(STATS_FLUSH_S)
    before = {name: counters(dsn) for name, dsn in dsns.items()}
    times, answers = [], []
    for _ in range(rounds):
        for question in questions:
            start = time.perf_counter()
            result = engine.retrieve(user, question["query"], now=question["now"], consistency=mode)  # type: ignore[arg-type]
            times.append((time.perf_counter() - start) * 1000)
            answers.append([(m.memory.id, m.score) for m in result.memories])
    time.sleep(STATS_FLUSH_S)
    figures: dict[str, Any] = {"retrievals": len(times), "p50_ms": round(statistics.median(times), 2)}
    for name, dsn in dsns.items():
        after = counters(dsn)
        figures[name] = dict(zip(COUNTERS, (a - b for a, b in zip(after, before[name]))))
    return figures, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of the demo's questions per mode")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    with postgres_server() as primary:
        dsn = primary.create_database(DATABASE)
        with standby_server(primary) as standby:
            dsns = {"primary": dsn, "standby": standby.dsn.rsplit("/", 1)[0] + "/" + DATABASE}
            settings = Settings(store={"backend": "postgres", "url": dsn, "read_urls": [dsns["standby"]]},
                                consolidation={"worker": "none"})
            with MemoryScope(settings) as engine:
                user, questions = record_demo(engine)
                for question in questions:  # the model loaded, the user's index held
                    engine.retrieve(user, question["query"], now=question["now"])
                result: dict[str, Any] = {}
                answers = {}
                for mode in ("replica", "primary"):
                    result[mode], answers[mode] = measure(engine, user, questions, args.rounds, mode, dsns)
                result["same_answers"] = answers["replica"] == answers["primary"]
                result["standbys"] = engine.store.standby_states()  # type: ignore[attr-defined]
    print(json.dumps(result, indent=None if args.json else 1), file=sys.stdout)
    return 0 if result["same_answers"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
