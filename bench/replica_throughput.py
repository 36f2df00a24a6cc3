"""Retrieval throughput and CPU per search on each server with 0, 1 and 2 read standbys, and replication lag
under a write load (issue 44, item 4).

A throw-away PostgreSQL primary (fsync on) gets two synthetic stores (`scale_store.Corpus`: Zipf-worded
sentences, random 384-d unit vectors): ``--users`` users of ``--per-user`` memories each (default 2,000 x 100)
and one user of ``--heavy`` memories (default 100,000; HNSW-indexed). Then two hot standbys are made from it
(`throwaway_postgres.standby_server`, ``pg_basebackup``). For each workload and each number of standbys,
``--clients`` client processes, each with its own `PostgresStore` listing those standbys in ``read_urls``,
search random users for ``--seconds`` inside ``reads_from("replica")``, as the engine's retrieval does.

Workloads: the search made by the database (``user_index_rows=0``: statistics, full text, the vector
channel) and the store's default, users held in the client process (its index warmed first: the database
then answers one small freshness statement per search), each for the many users and the heavy user.

Per run: searches per second (all clients), p50/p95 of one search, and CPU per search on each server
(``/proc`` utime + stime of the postmaster, its live children and its reaped ones, over the run) and in
the clients. The CPU figures are what to read on a shared machine: the throughput of 2 cores shared by
clients, primary and standbys says little of a deployment where each server has cores of its own.

Before each workload's runs, one unreported run with every standby warms the servers' caches (a standby
made by ``pg_basebackup`` starts with cold buffers). Then the write load: one writer puts batches of 5
memories into random users of the many-users store on the primary as fast as it can for ``--seconds``,
alone and then while the clients search the standbys, and the primary's ``pg_stat_replication`` is sampled
every 0.2 s: each standby's replay lag in time and in WAL bytes, and each server's CPU per memory written
(the primary's write, each standby's replay).

    PYTHONPATH=. python bench/replica_throughput.py [--users 2000 --per-user 100 --heavy 100000]
        [--standbys 0,1,2] [--clients 2] [--seconds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import queue as queue_module
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from scale_store import EMBEDDER_NAME, Corpus, _batches, _percentiles  # noqa: E402

from memoryscope_plugins.bench.report_file import print_report  # noqa: E402
from memoryscope_plugins.bench.throwaway_postgres import PostgresServer, postgres_server, standby_server  # noqa: E402
from memoryscope_plugins.storage.base import MemoryFilter, SearchRequest  # noqa: E402
from memoryscope_plugins.storage.postgres_store import PostgresStore  # noqa: E402
from memoryscope_plugins.storage.read_consistency import reads_from  # noqa: E402

STORES = {"many": "rt_many_", "heavy": "rt_heavy_"}
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def server_cpu_s(server: PostgresServer) -> float:
    """CPU seconds used by a server so far: the postmaster, its live children, and the children it reaped."""
    pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])

    def fields(p: int) -> list[str]:
        text = Path(f"/proc/{p}/stat").read_text()
        return text[text.rindex(")") + 2:].split()  # after "pid (comm) "; fields from 3 (state) on

    own = fields(pid)
    total = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            with contextlib.suppress(OSError, ValueError, IndexError):
                child = fields(int(entry))
                if int(child[1]) == pid:  # ppid
                    total += int(child[11]) + int(child[12])
    return total * TICK_S


def load(dsn: str, args: argparse.Namespace) -> None:
    """Fill both stores on the primary (HNSW indexes rebuilt in bulk at the end), then vacuum and analyse."""
    corpus = Corpus(seed=11)
    plans = {"many": (args.users * args.per_user, args.users, 1), "heavy": (args.heavy, 1, 2)}
    for name, (n, users, seed) in plans.items():
        store = PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix=STORES[name])
        start = time.perf_counter()
        try:
            with store.bulk_load(maintenance_work_mem="1GB"):
                for memories, vectors in _batches(corpus, n, users, 1000, seed):
                    if name == "heavy":
                        for m in memories:
                            m.user_id = "heavy"
                    store.put(memories, vectors)
        finally:
            store.close()
        print(f"loaded {name}: {n:,} memories in {time.perf_counter() - start:.0f} s", flush=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def users_of(workload: str, args: argparse.Namespace) -> list[str]:
    return ["heavy"] if workload.startswith("heavy") else [f"user-{i:06d}" for i in range(args.users)]


def client(dsn: str, read_urls: list[str], workload: str, args: argparse.Namespace, seed: int,
           ready: Any, go: Any, out: Any) -> None:
    """One client process: warm up, wait for `go`, search for the run's seconds, put its figures in `out`."""
    held = workload.endswith("held")
    store = PostgresStore(dsn, embedding_model=EMBEDDER_NAME, table_prefix=STORES[workload.split("/")[0]],
                          read_urls=read_urls, user_index_rows=200_000 if held else 0, pool_max_size=2)
    corpus = Corpus(seed=100 + seed)
    rng = np.random.default_rng(seed)
    users = users_of(workload, args)

    def search(user: str) -> None:
        with reads_from("replica"):
            store.search(SearchRequest(user_id=user, text=corpus.query(), vector=corpus.vectors(1)[0],
                                       filter=MemoryFilter(), limit=60))
    try:
        deadline = time.monotonic() + 60  # until every standby in use is checked healthy
        while read_urls and time.monotonic() < deadline and not all(
                s[1] == "ok" for s in store.standby_states()):
            time.sleep(0.2)
        for user in (users if held else users[:20]):  # held: each user's index loaded once, before the run
            search(user)
        ready.put(seed)
        go.wait()
        times: list[float] = []
        cpu = time.process_time()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            search(users[int(rng.integers(len(users)))])
            times.append((time.perf_counter() - start) * 1000.0)
        out.put({"times": times, "cpu_s": time.process_time() - cpu})
    finally:
        store.close()


def gather(queue: Any, procs: list[Any], timeout_s: float) -> list[Any]:
    """One item from each client process, failing at once when one of them died instead."""
    items: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(items) < len(procs):
        with contextlib.suppress(queue_module.Empty):
            items.append(queue.get(timeout=1))
            continue
        if any(p.exitcode not in (None, 0) for p in procs) or time.monotonic() > deadline:
            for p in procs:
                p.terminate()
            raise RuntimeError("a client process failed or timed out (its traceback is above)")
    return items


def run(servers: list[PostgresServer], dsns: list[str], workload: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measured run: the clients search through the standbys in `dsns[1:]`; CPU of every server."""
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=client, args=(dsns[0], dsns[1:], workload, args, n, ready, go, out))
             for n in range(args.clients)]
    for p in procs:
        p.start()
    gather(ready, procs, 900)
    before = [server_cpu_s(s) for s in servers]
    wall = time.perf_counter()
    go.set()
    results = gather(out, procs, args.seconds + 300)
    wall = time.perf_counter() - wall
    for p in procs:
        p.join(timeout=60)
    time.sleep(1.0)  # the clients' backends have exited: their CPU is in the postmaster's reaped children's
    after = [server_cpu_s(s) for s in servers]
    times = [t for r in results for t in r["times"]]
    n = len(times)
    report: dict[str, Any] = {"searches": n, "searches_per_s": round(n / wall, 1), "search_ms": _percentiles(times),
                              "client_cpu_ms_per_search": round(sum(r["cpu_s"] for r in results) / n * 1e3, 3)}
    names = ["primary"] + [f"standby{i}" for i in range(1, len(servers))]
    report["server_cpu_ms_per_search"] = {name: round((a - b) / n * 1e3, 3)
                                          for name, a, b in zip(names, after, before)}
    return report


def sample_lag(primary_dsn: str, stop: threading.Event, samples: list[tuple[str, float, float]]) -> None:
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        while not stop.is_set():
            for name, lag_s, lag_bytes in conn.execute(
                    "SELECT application_name || ':' || client_port, coalesce(extract(epoch FROM replay_lag), 0),"
                    " pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) FROM pg_stat_replication"):
                samples.append((name, float(lag_s), float(lag_bytes)))
            time.sleep(0.2)


def write_load(servers: list[PostgresServer], dsns: list[str], args: argparse.Namespace,
               searching: bool) -> dict[str, Any]:
    """One writer loads the primary for the run's seconds, with the clients searching the standbys in
    `dsns[1:]` or alone; every standby's replay lag meanwhile, and each server's CPU per memory written."""
    samples: list[tuple[str, float, float]] = []
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        store = PostgresStore(dsns[0], embedding_model=EMBEDDER_NAME, table_prefix=STORES["many"])
        corpus = Corpus(seed=99)
        tag = f"w{int(time.time() * 1000)}"  # ids of their own in every phase
        try:
            for n, (memories, vectors) in enumerate(_batches(corpus, 10_000_000, 1, 5, 9)):
                if stop.is_set():
                    break
                for m in memories:
                    m.id, m.user_id = f"{tag}-{n}-{m.id}", f"user-{n * 7919 % args.users:06d}"
                store.put(memories, vectors)
                written[0] += len(memories)
        finally:
            store.close()

    threads = [threading.Thread(target=sample_lag, args=(dsns[0], stop, samples)),
               threading.Thread(target=writer)]
    before = [server_cpu_s(s) for s in servers]
    wall = time.perf_counter()
    for t in threads:
        t.start()
    try:
        searched = run(servers, dsns, "many/database", args) if searching else None
        if not searching:
            time.sleep(args.seconds)
    finally:
        stop.set()
        for t in threads:
            t.join()
    wall = time.perf_counter() - wall
    time.sleep(1.0)
    after = [server_cpu_s(s) for s in servers]
    names = ["primary"] + [f"standby{i}" for i in range(1, len(servers))]
    report: dict[str, Any] = {
        "memories_written": written[0], "written_per_s": round(written[0] / wall, 1),
        "server_cpu_ms_per_memory_written": {name: round((a - b) / max(written[0], 1) * 1e3, 3)
                                             for name, a, b in zip(names, after, before)}}
    if searched is not None:
        report["searches"] = searched
    for name in sorted({s[0] for s in samples}):
        lags = [s for s in samples if s[0] == name]
        seconds = sorted(s[1] * 1e3 for s in lags)
        size = sorted(s[2] for s in lags)
        report[f"replay_lag {name}"] = {
            "samples": len(lags), "ms_p50": round(seconds[len(seconds) // 2], 1),
            "ms_p95": round(seconds[int(len(seconds) * 0.95)], 1), "ms_max": round(seconds[-1], 1),
            "kb_p50": round(size[len(size) // 2] / 1024, 1), "kb_max": round(size[-1] / 1024, 1)}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--heavy", type=int, default=100_000)
    parser.add_argument("--standbys", default="0,1,2", help="numbers of standbys to run with (at most 2)")
    parser.add_argument("--workloads", default="many/database,many/held,heavy/database,heavy/held")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    counts = [int(k) for k in args.standbys.split(",")]
    if any(k not in (0, 1, 2) for k in counts):
        parser.error("--standbys takes numbers from 0 to 2")
    report: dict[str, Any] = {"users": args.users, "per_user": args.per_user, "heavy": args.heavy,
                              "clients": args.clients, "seconds": args.seconds, "cores": os.cpu_count(),
                              "runs": {}}
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(postgres_server(durable=True, settings={"shared_buffers": "2GB"}))
        dsn = primary.create_database("replica_throughput")
        load(dsn, args)
        standbys = [stack.enter_context(standby_server(primary)) for _ in range(max(counts))]
        dsns = [dsn] + [s.dsn.rsplit("/", 1)[0] + "/replica_throughput" for s in standbys]
        servers = [primary, *standbys]
        for workload in args.workloads.split(","):
            # not reported: every server's caches warmed for this workload (a new standby's start cold)
            run(servers, dsns, workload, argparse.Namespace(**{**vars(args), "seconds": args.seconds / 2}))
            for k in counts:
                figures = run(servers, dsns[:k + 1], workload, args)
                report["runs"][f"{workload} standbys={k}"] = figures
                print(f"{workload} standbys={k}: {json.dumps(figures)}", flush=True)
        figures = write_load(servers, dsns, args, searching=False)  # every standby replays, none is read
        report["runs"]["writes alone"] = figures
        print(f"writes alone: {json.dumps(figures)}", flush=True)
        for k in (k for k in counts if k > 0):
            figures = write_load(servers, dsns[:k + 1], args, searching=True)
            report["runs"][f"writes and searches, standbys={k}"] = figures
            print(f"writes and searches, standbys={k}: {json.dumps(figures)}", flush=True)
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
