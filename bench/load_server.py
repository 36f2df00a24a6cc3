"""Load run for the HTTP API: requests/s and p50/p95 latency of retrieve and record, 8 concurrent clients.

Starts a real `memoryscope-plugins serve` process on a loopback port (embedded SQLite store in a temp dir,
local embedder, no rate limit), seeds a user, then runs a bounded number of requests per operation.

    nice -n 5 .venv/bin/python bench/load_server.py [--clients 8] [--requests 400] [--seed 300]

With ``--durability``: 8 clients write (add and record, each to its own user) for ``--seconds`` (60), the
server gets SIGTERM in the middle and is started again on the same store, then once more at the end; after
a last start every write the server acknowledged (2xx) must be there with its text, every stop must exit
0 and leave no WAL (``memory.db-wal`` absent or empty). ``--json`` prints the figures as one JSON object;
the exit status is 1 when a check fails.

    nice -n 5 .venv/bin/python bench/load_server.py --durability [--clients 8] [--seconds 60] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
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


class Serve:
    """One `memoryscope-plugins serve` process on a fixed store, key file and port (restartable)."""

    def __init__(self, tmp: str, port: int, *extra: str) -> None:
        self.env = {**os.environ, "MEMORYSCOPE_HOME": tmp}
        self.store = Path(tmp) / "memory.db"
        self.cli = [sys.executable, "-m", "memoryscope_plugins", "--store", str(self.store), "serve",
                    "--keys", str(Path(tmp) / "keys.json")]
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.extra = list(extra)
        self.log = Path(tmp) / "serve.log"
        self.process: subprocess.Popen | None = None

    def create_key(self, tenant: str = "bench") -> str:
        return subprocess.run(self.cli + ["--create-key", tenant, "--admin"], env=self.env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def start(self, timeout: float = 120) -> None:
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(self.cli + ["--port", str(self.port), *self.extra], env=self.env,
                                            stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.base + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start (exit {self.process.poll()}); see {self.log}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> dict:
        """Send `sig`, wait for the exit; the exit status and what is left of the WAL."""
        assert self.process is not None
        self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        wal = Path(str(self.store) + "-wal")
        return {"exit": code, "wal_bytes": wal.stat().st_size if wal.exists() else 0}


async def _writer(base: str, key: str, client: int, until: list[float], acked: dict, refused: list) -> None:
    """Writes until `until[0]`, alternating add and record, to user w<client>; keeps what got a 2xx."""
    user = f"w{client}"
    n = 0
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        while time.monotonic() < until[0]:
            n += 1
            text = f"Client {client} note {n}: I {TOPICS[n % len(TOPICS)]}."
            try:
                if n % 2:
                    response = await http.post(f"/v1/users/{user}/memories", json={"content": text})
                    ids = [response.json()["id"]] if response.status_code == 201 else []
                else:
                    response = await http.post(f"/v1/users/{user}/record",
                                               json={"messages": [{"role": "user", "content": text}]})
                    ids = response.json()["ids"] if response.status_code == 201 else []
            except (httpx.HTTPError, ValueError):  # the server is stopping or starting: not acknowledged
                refused[0] += 1
                await asyncio.sleep(0.05)
                continue
            if not ids:
                refused[0] += 1
                await asyncio.sleep(0.05)
                continue
            for memory_id in ids:
                acked[memory_id] = (user, text)


def _stored(base: str, key: str, users: list[str]) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for user in users:
            offset = 0
            while True:
                page = http.get(f"/v1/users/{user}/memories", params={"limit": 500, "offset": offset})
                page.raise_for_status()
                items = page.json()["memories"]
                found.update({m["id"]: (user, m["content"]) for m in items})
                if len(items) < 500:
                    break
                offset += 500
    return found


def durability(clients: int, seconds: float, restart_at: float | None = None) -> dict:
    """The SIGTERM-restart load run (see the module docstring); returns its figures and checks."""
    restart_at = seconds / 2 if restart_at is None else restart_at
    with tempfile.TemporaryDirectory() as tmp:
        serve = Serve(tmp, free_port(), "--rate", "0")
        key = serve.create_key()
        serve.start()
        acked: dict[str, tuple[str, str]] = {}
        refused = [0]
        stops: list[dict] = []

        async def run() -> None:
            until = [time.monotonic() + seconds]

            async def restart() -> None:
                await asyncio.sleep(restart_at)
                planned = until[0]
                until[0] = float("inf")  # writers keep trying until the server is back
                stops.append(await asyncio.to_thread(serve.stop))
                stops[-1]["acked_before"] = len(acked)
                await asyncio.to_thread(serve.start)
                until[0] = max(planned, time.monotonic() + 1.0)  # some load after the restart, however slow

            await asyncio.gather(restart(), *(_writer(serve.base, key, c, until, acked, refused)
                                              for c in range(clients)))

        began = time.perf_counter()
        asyncio.run(run())
        elapsed = time.perf_counter() - began
        stops.append(serve.stop())
        serve.start()
        try:
            stored = _stored(serve.base, key, [f"w{c}" for c in range(clients)])
        finally:
            stops.append(serve.stop(signal.SIGINT))
        lost = [i for i, (user, text) in acked.items() if stored.get(i) != (user, text)]
        tracebacks = serve.log.read_text(errors="replace").count("Traceback")
    result = {"clients": clients, "seconds": round(elapsed, 1), "acknowledged": len(acked),
              "acknowledged_before_restart": stops[0]["acked_before"],
              "writes_per_s": round(len(acked) / elapsed, 1), "not_acknowledged_attempts": refused[0],
              "lost": len(lost), "exit_codes": [s["exit"] for s in stops],
              "wal_bytes_after_stop": [s["wal_bytes"] for s in stops], "tracebacks_in_log": tracebacks}
    result["ok"] = (not lost and all(s["exit"] == 0 for s in stops) and not any(s["wal_bytes"] for s in stops)
                    and tracebacks == 0 and result["acknowledged_before_restart"] > 0
                    and len(acked) > result["acknowledged_before_restart"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="per operation (bounded run)")
    parser.add_argument("--seed", type=int, default=300, help="turns recorded before measuring")
    parser.add_argument("--durability", action="store_true", help="the SIGTERM-restart run instead")
    parser.add_argument("--seconds", type=float, default=60.0, help="with --durability: length of the load")
    parser.add_argument("--json", action="store_true", help="with --durability: print one JSON object")
    args = parser.parse_args()
    if args.durability:
        result = durability(args.clients, args.seconds)
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{args.clients} clients writing for {result['seconds']} s, SIGTERM + restart in the middle, "
                  f"loopback, SQLite, local embedder")
            for name, value in result.items():
                print(f"  {name}: {value}")
        return 0 if result["ok"] else 1
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
