"""What the tool statistics' counters cost a store (issue 43): `append_messages` of 10 tool-call
messages against 10 plain messages of the same size, p50 / p95 per call, and the read of an agent's
counters, on SQLite, PostgreSQL (embedded, throwaway) and Elasticsearch (the noida-db emulator, or
MEMORYSCOPE_TEST_ES_URL).

    python bench/tool_counters.py [--calls 200]

Prints one line per store and case.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryscope_plugins.storage.sqlite_store import SQLiteStore  # noqa: E402
from memoryscope_plugins.types import Message, ToolCall  # noqa: E402
from tests.support import servers  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def batch(i: int, tool: bool) -> list[Message]:
    """Ten messages of one run: tool calls (one in four failing), or the same texts as plain messages."""
    out = []
    for j in range(10):
        failed = j % 4 == 0
        call = ToolCall(name=f"tool{j % 3}", arguments={"q": "x", "n": j}, result=None if failed else "r",
                        error="failed on item 12" if failed else None, duration_ms=10.0 + j) if tool else None
        out.append(Message(role="tool", content="failed on item 12" if failed else "r",
                           timestamp=T0 + timedelta(seconds=i * 10 + j), tool_call=call))
    return out


def run(store, label: str, n: int) -> None:
    for tool in (False, True):
        times = []
        for i in range(n):
            messages = batch(i, tool)
            began = time.perf_counter()
            store.append_messages(f"u{i % 20}", "agent" if tool else "plain", messages)
            times.append(time.perf_counter() - began)
        times.sort()
        print(f"{label} {'tool calls' if tool else 'plain     '}: p50 {1000 * times[n // 2]:.2f} ms, "
              f"p95 {1000 * times[int(n * .95)]:.2f} ms per 10 messages")
    began = time.perf_counter()
    store.tool_counters("agent")
    print(f"{label} read of the agent's counters: {1000 * (time.perf_counter() - began):.1f} ms "
          f"({n * 10} calls of 3 tools, 20 users)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="append_messages calls per case")
    n = parser.parse_args().calls
    with SQLiteStore(os.path.join(tempfile.mkdtemp(), "bench.db"), embedding_model="m") as store:
        run(store, "sqlite", n)
    with servers.postgres_server() as pg:
        from memoryscope_plugins.storage.postgres_store import PostgresStore
        with PostgresStore(pg.create_database("bench"), embedding_model="m") as store:
            run(store, "postgres", n)
    with servers.elasticsearch_server() as es:
        from memoryscope_plugins.storage.elasticsearch_store import ElasticsearchStore
        with ElasticsearchStore(es.url, embedding_model="m", index_prefix="bench-tools") as store:
            run(store, "elasticsearch" + (" (emulator)" if es.emulated else ""), n)


if __name__ == "__main__":
    main()
