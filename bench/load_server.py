"""Load run for the HTTP API: requests/s and p50/p95 latency of retrieve and record, 8 concurrent clients.

Starts a real `memoryscope-plugins serve` process on a loopback port (embedded SQLite store in a temp dir,
local embedder, no rate limit), seeds a user, then runs a bounded number of requests per operation.

    nice -n 5 .venv/bin/python bench/load_server.py [--clients 8] [--requests 400] [--seed 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOPICS = ["moved to Lisbon", "started a pottery class", "my sister Clara visits in June", "allergic to peanuts",
          "training for a half marathon", "adopted a cat called Mia", "new job at a bakery", "learning Japanese"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def run_op(base: str, key: str, clients: int, total: int, make_request) -> dict:
    latencies: list[float] = []
    errors = 0
    counter = iter(range(total))

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        for i in counter:
            method, path, body = make_request(i)
            t = time.perf_counter()
            response = await http.request(method, path, json=body)
            latencies.append((time.perf_counter() - t) * 1000)
            errors += response.status_code >= 400

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                 limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - start
    q = statistics.quantiles(latencies, n=100)
    return {"requests": total, "errors": errors, "req_per_s": total / elapsed, "p50_ms": q[49], "p95_ms": q[94]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="per operation (bounded run)")
    parser.add_argument("--seed", type=int, default=300, help="turns recorded before measuring")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMORYSCOPE_HOME": tmp}
        keys = Path(tmp) / "keys.json"
        cli = [sys.executable, "-m", "memoryscope_plugins", "--store", str(Path(tmp) / "m.db"), "serve",
               "--keys", str(keys)]
        key = subprocess.run(cli + ["--create-key", "bench", "--admin"], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        port = free_port()
        server = subprocess.Popen(cli + ["--port", str(port), "--rate", "0"], env=env, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(base + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start")
                time.sleep(0.2)
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
                for i in range(0, args.seed, 20):
                    messages = [{"role": "user", "content": f"Note {j}: I {TOPICS[j % len(TOPICS)]}."}
                                for j in range(i, min(i + 20, args.seed))]
                    http.post("/v1/users/anna/record", json={"messages": messages}).raise_for_status()
            ops = {
                "retrieve": lambda i: ("POST", "/v1/users/anna/retrieve",
                                       {"query": f"what about {TOPICS[i % len(TOPICS)].split()[-1]}?"}),
                "record": lambda i: ("POST", f"/v1/users/u{i % 16}/record",
                                     {"messages": [{"role": "user", "content": f"Message {i}: I {TOPICS[i % 8]}."}]}),
            }
            print(f"{args.clients} clients, {args.requests} requests per operation, {args.seed} seeded turns, "
                  f"loopback, SQLite, local embedder")
            print(f"{'operation':<10} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'errors':>7}")
            for name, make in ops.items():
                r = asyncio.run(run_op(base, key, args.clients, args.requests, make))
                print(f"{name:<10} {r['req_per_s']:>8.1f} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['errors']:>7}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
