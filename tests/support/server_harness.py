"""A real `memoryscope-plugins` server (uvicorn on a free loopback port, in a thread) for the server tests."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import uvicorn

from memoryscope_plugins.server import KeyRing, ServerConfig, create_app
from memoryscope_plugins.storage.base import LedgerChanges
from memoryscope_plugins.types import Entity, EntityKind, EntityMention, Memory, MemoryStatus, MemoryType, ProfileValue


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

    def __enter__(self) -> RunningServer:
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
    default: str  # tenant default (the store's own, un-prefixed users), admin


def make_keys() -> Keys:
    ring = KeyRing()
    return Keys(ring, admin=ring.create("acme", admin=True), acme=ring.create("acme"),
                anna_only=ring.create("acme", users=("anna",)), other=ring.create("globex", admin=True),
                default=ring.create("default", admin=True))


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


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text + "T12:00:00+00:00")


# entity id -> (name, kind, aliases, [(memory id or turn text, said on, counted)])
LEDGER = {
    "ent-anna": ("Anna", EntityKind.PERSON, ["Annie"], [("obs-old", "2026-05-10", True),
                                                       ("obs-surf", "2026-07-20", True),
                                                       ("obs-new", "2026-08-03", True)]),
    "ent-lisbon": ("Lisbon", EntityKind.PLACE, ["Lisboa"], [("I moved to Lisbon last May.", "2026-06-01", True),
                                                           ("How do you like Lisbon?", "2026-06-01", True),
                                                           ("obs-new", "2026-08-03", True),
                                                           ("ins-1", "2026-08-10", False)]),
    "ent-surf": ("surfing", EntityKind.TOPIC, [], [("obs-surf", "2026-07-20", True), ("ins-1", "2026-08-10", True)]),
    "ent-porto": ("Porto", EntityKind.PLACE, [], [("obs-old", "2026-05-10", True)]),
    "ent-mia": ("Mia", EntityKind.PET, [], []),
}


def seed_ledger(engine, tenant: str = "acme", user: str = "anna") -> None:
    """After `seed`: five entities (four mentioned, over May to August 2026; Mia the pet never) and a
    profile whose home moved from Porto to Lisbon (the Porto value ended), plus likes: surfing; they
    replace the names `record` found in `seed`'s turns (Lisbon, of the kind unknown)."""
    store_user = f"{tenant}:{user}"
    found = [entity.id for entity in engine.store.entities(store_user) if entity.id not in LEDGER]
    turns = {m.content: m.id for m in engine.list(store_user, types=["turn"])}
    entities, mentions = [], []
    for entity_id, (name, kind, aliases, said) in LEDGER.items():
        entities.append(Entity(id=entity_id, user_id=store_user, name=name, kind=kind, aliases=list(aliases)))
        mentions += [EntityMention(entity_id=entity_id, memory_id=turns.get(memory, memory), user_id=store_user,
                                   said_at=_at(on), counted=counted) for memory, on, counted in said]
    profile = [ProfileValue(id="pv-home-porto", user_id=store_user, key="home", value="Porto",
                            valid_from=_at("2025-01-01"), valid_to=_at("2026-05-20"), source_ids=["obs-old"],
                            superseded_by="pv-home-lisbon"),
               ProfileValue(id="pv-home-lisbon", user_id=store_user, key="home", value="Lisbon",
                            valid_from=_at("2026-05-20"), source_ids=["obs-new"]),
               ProfileValue(id="pv-likes-surf", user_id=store_user, key="likes", value="surfing",
                            valid_from=_at("2026-07-20"), source_ids=["obs-surf"])]
    engine.store.put_ledger(LedgerChanges(store_user, entities=entities, mentions=mentions, profile=profile,
                                          removed_entities=found))


class ServeProcess:
    """A real `memoryscope-plugins serve` process (its own store, key file and home in `folder`), for the
    tests that need the CLI's own startup, signals, logging and file creation. Its output goes to `log`."""

    def __init__(self, folder, *extra: str, umask: int = 0o022) -> None:
        import os
        import sys
        from pathlib import Path
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "MEMORYSCOPE_HOME": str(self.folder / "home")}
        self.store = self.folder / "memory.db"
        self.keys_file = self.folder / "keys.json"
        self.cli = [sys.executable, "-m", "memoryscope_plugins", "--store", str(self.store), "serve",
                    "--keys", str(self.keys_file)]
        self.extra = list(extra)
        self.umask = umask
        self.log = self.folder / "serve.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def run_cli(self, *args: str, timeout: float = 60):
        return subprocess.run(self.cli + list(args), env=self.env, capture_output=True, text=True,
                              timeout=timeout, umask=self.umask)

    def create_key(self, tenant: str, *args: str) -> str:
        done = self.run_cli("--create-key", tenant, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def start(self, timeout: float = 120) -> ServeProcess:

        import httpx
        with open(self.log, "a") as log:
            self.process = process = subprocess.Popen(self.cli + ["--port", str(self.port), *self.extra],
                                                      env=self.env, stdout=log, stderr=log, umask=self.umask)
        deadline = time.monotonic() + timeout
        while True:
            try:
                httpx.get(self.url + "/health", timeout=5)
                return self
            except httpx.HTTPError:
                pass
            exit_code = process.poll()
            if exit_code is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start (exit {exit_code}): {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self, sig=None, timeout: float = 120) -> int:
        import signal
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig or signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")
