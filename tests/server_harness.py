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
    store_user = f"{tenant}/{user}"
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
