"""A real `memoryscope-plugins` server (uvicorn on a free loopback port, in a thread) for the server tests."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from memoryscope_plugins.server import KeyRing, ServerConfig, create_app
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningServer:
    def __init__(self, engine, keys: KeyRing, config: ServerConfig | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(engine, keys, config), host="127.0.0.1",
                                                    port=self.port, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "RunningServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class Keys:
    ring: KeyRing
    admin: str  # tenant acme, admin
    acme: str  # tenant acme, any user
    anna_only: str  # tenant acme, bound to user anna
    other: str  # tenant globex, admin


def make_keys() -> Keys:
    ring = KeyRing()
    return Keys(ring, admin=ring.create("acme", admin=True), acme=ring.create("acme"),
                anna_only=ring.create("acme", users=("anna",)), other=ring.create("globex", admin=True))


def seed(engine, tenant: str = "acme", user: str = "anna") -> dict[str, str]:
    """Turns, an observation, an expired observation replaced by a newer one, an insight with sources."""
    store_user = f"{tenant}:{user}"
    engine.record(store_user, [{"role": "user", "content": "I moved to Lisbon last May.",
                                "timestamp": "2026-06-01T10:00:00+00:00"},
                               {"role": "assistant", "content": "How do you like Lisbon?",
                                "timestamp": "2026-06-01T10:00:05+00:00"}])
    old = Memory(id="obs-old", user_id=store_user, agent_id="assistant", content="Anna lives in Porto.",
                 type=MemoryType.OBSERVATION, status=MemoryStatus.EXPIRED, superseded_by="obs-new")
    new = Memory(id="obs-new", user_id=store_user, agent_id="assistant", content="Anna lives in Lisbon.",
                 type=MemoryType.OBSERVATION)
    hobby = Memory(id="obs-surf", user_id=store_user, agent_id="assistant", content="Anna surfs on weekends.",
                   type=MemoryType.OBSERVATION)
    insight = Memory(id="ins-1", user_id=store_user, agent_id="assistant",
                     content="Anna enjoys an outdoor coastal life.", type=MemoryType.INSIGHT,
                     source_ids=["obs-new", "obs-surf"])
    batch = [old, new, hobby, insight]
    engine.store.put(batch, engine.embedder.embed([m.content for m in batch], kind="document"))
    return {m.id: m.content for m in batch}


class ServeProcess:
    """A real ``memoryscope-plugins serve`` process on a free loopback port (its own Python, its
    own engine over `store`), stopped with SIGINT at the end. Its stderr goes to `log_path`."""

    def __init__(self, store, keys: KeyRing, workdir, *extra: str) -> None:
        import os
        import sys
        from pathlib import Path
        self.workdir = Path(workdir)
        self.keys_file = self.workdir / "keys.json"
        keys.save(self.keys_file)
        self.log_path = self.workdir / "serve.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", "memoryscope_plugins", "--store", str(store), "serve",
                     "--port", str(self.port), "--keys", str(self.keys_file), *extra]
        self.env = dict(os.environ, MEMORYSCOPE_HOME=str(self.workdir / "home"))
        self.process = None

    def __enter__(self) -> "ServeProcess":
        import subprocess
        import httpx
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120  # the process loads the local embedding model first
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}: {self.log()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("serve did not answer /health in time")
            time.sleep(0.2)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def __exit__(self, *exc) -> None:
        import signal
        import subprocess
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
