"""`memoryscope-plugins worker` processes over one PostgreSQL database, the model faked at the HTTP
boundary: what the lease takeover tests (tests/consolidation/test_worker_takeover.py) and the
takeover measurement (bench/worker_takeover.py) share.

Each worker gets its own API key, so the fake model tells the workers apart: a `Gate` holds the
first consolidation request of one worker (to kill or pause that worker mid-step, holding the
user's lease) and can answer it with different words (so a late commit would show).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from memoryscope_plugins import MemoryScope
from tests.support.consolidation_helpers import Brain, Prompt, at, entries, parse_prompt, user_msg
from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer, Reply, openai_completion
from tests.support.paths import ROOT

USER = "anna"


def write_config(path: Path, dsn: str, model_url: str, *, llm_key: str | None, lease_ttl_s: float | None,
                 every_seconds: float = 0.2) -> Path:
    """Settings for one process: the PostgreSQL store, the fake embedder, and (with `llm_key`)
    the fake chat model; `lease_ttl_s` None keeps the default."""
    lines = [f"store: {{backend: postgres, url: '{dsn}'}}",
             f"embedder: {{provider: openai, model: fake-embed, base_url: '{model_url}/v1', api_key: sk-embed}}"]
    if llm_key is not None:
        lines.append(f"llm: {{provider: openai, model: fake-llm, base_url: '{model_url}/v1', api_key: {llm_key}, "
                     "max_retries: 0, timeout_s: 120}")
    lease = "" if lease_ttl_s is None else f", lease_ttl_s: {lease_ttl_s}"
    lines.append(f"consolidation: {{worker: none, every_seconds: {every_seconds}, every_messages: 1, "
                 f"reflect_every_observations: 100, language: en{lease}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recorder(folder: Path, dsn: str, model_url: str) -> MemoryScope:
    """An application's engine on the same store: records, never consolidates."""
    return MemoryScope(str(write_config(folder / "app.yaml", dsn, model_url, llm_key=None, lease_ttl_s=None)))


def say(engine: MemoryScope, day: int, text: str) -> None:
    engine.record(USER, [user_msg(text, at(day))])


class Gate:
    """The fake chat model (a `Brain`), except that the first consolidation request sent with
    `held_key` waits until `release` is set and is then answered by `held_extract`, if given."""

    def __init__(self, brain: Brain, held_key: str,
                 held_extract: Callable[[Prompt], list[dict] | str] | None = None) -> None:
        self.brain, self.held_key, self.held_extract = brain, held_key, held_extract
        self.waiting, self.release = threading.Event(), threading.Event()
        self._taken = False
        self._lock = threading.Lock()

    def __call__(self, server: FakeModelServer, request: Any) -> Reply:
        if self.held_key in request.headers.get("authorization", ""):
            kind = parse_prompt((request.json or {}).get("messages") or []).kind
            with self._lock:
                hold = not self._taken and kind == "consolidate"
                self._taken = self._taken or hold
            if hold:
                self.waiting.set()
                self.release.wait(110)
                if self.held_extract is not None:
                    prompt = parse_prompt((request.json or {}).get("messages") or [])
                    value = self.held_extract(prompt)
                    text = value if isinstance(value, str) else json.dumps(entries(prompt, value), ensure_ascii=False)
                    return Reply(json=openai_completion(text, "fake-llm"))
        return self.brain(server, request)


def requests_of(server: FakeModelServer, key: str) -> int:
    """Chat requests the fake model received with this worker's key."""
    return sum(1 for r in server.requests_to(OPENAI_CHAT) if key in r.headers.get("authorization", ""))


class WorkerProcess:
    """One `memoryscope-plugins worker` process (stderr in a file: read it with `log_text`)."""

    def __init__(self, folder: Path, name: str, dsn: str, model_url: str, *, lease_ttl_s: float | None,
                 every_seconds: float = 0.2) -> None:
        self.key = f"sk-{name}"
        self.config = write_config(folder / f"{name}.yaml", dsn, model_url, llm_key=self.key, lease_ttl_s=lease_ttl_s,
                                   every_seconds=every_seconds)
        self.log = folder / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYSCOPE_")}
        env["MEMORYSCOPE_HOME"] = str(self.config.parent / "home")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "memoryscope_plugins", "--config", str(self.config),
                                          "worker", "--no-flush"], stdout=log, stderr=log, env=env, cwd=str(ROOT))
        return self

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 60) -> int | None:
        """SIGCONT (in case it is paused), SIGTERM, wait; SIGKILL when it does not stop."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""


def consolidated(engine: MemoryScope) -> bool:
    """Nothing of the user pending, and at least one observation stored."""
    return not engine.store.pending_messages(USER) and bool(engine.list(USER, types=["observation"], limit=1))


@dataclass
class Fleet:
    """An application's engine and two workers on one store; the fake model holds `first`'s first step."""

    gate: Gate
    app: MemoryScope
    first: WorkerProcess
    second: WorkerProcess


@contextlib.contextmanager
def fleet(folder: Path, dsn: str, server: FakeModelServer, brain: Brain, *, lease_ttl_s: float | None,
          every_seconds: float = 0.2, held_extract: Callable[[Prompt], list[dict] | str] | None = None
          ) -> Iterator[Fleet]:
    """The workers are not started; at the end both are stopped and the engine closed."""
    gate = Gate(brain, held_key="sk-first", held_extract=held_extract)
    server.route(OPENAI_CHAT, gate)
    app = recorder(folder, dsn, server.url)
    workers = [WorkerProcess(folder, name, dsn, server.url, lease_ttl_s=lease_ttl_s, every_seconds=every_seconds)
               for name in ("first", "second")]
    try:
        yield Fleet(gate, app, *workers)
    finally:
        gate.release.set()
        for worker in workers:
            worker.stop()
        app.close()
