"""Issue 42, item 3: what a person fills through the command line or the Python API is what `serve` shows
them. README's first commands run as written (the "Use it" snippet into the default store, then the command
line), then `memoryscope-plugins serve` on the same home finds the user with the admin key its first start
printed. And a store written in the older layouts of the default tenant ("default/anna", "default:anna")
is moved to the store's own users on start, never merged into a user the command line made."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")

from memoryscope_plugins import MemoryScope  # noqa: E402
from memoryscope_plugins.storage.sqlite_store import SQLiteStore  # noqa: E402
from memoryscope_plugins.types import Memory  # noqa: E402
from tests.support.paths import ROOT, console_script  # noqa: E402
from tests.support.serve_context import serving  # noqa: E402
from tests.support.server_harness import free_port, make_keys  # noqa: E402


def readme_block(section: str, language: str) -> str:
    """The first ``language`` code block of README.md's section `section`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return body.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_serve_shows_the_user_readmes_first_commands_recorded(tmp_path):
    env = {**os.environ, "MEMORYSCOPE_HOME": str(tmp_path / "home")}
    env.pop("MEMORYSCOPE_CONFIG", None)
    env.pop("MEMORYSCOPE_SERVER_KEYS", None)

    def run(*command: str) -> str:
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr)
        return done.stdout

    cli = console_script()
    assert "peanuts" in run(sys.executable, "-c", readme_block("Use it", "python"))  # the API, default store
    assert "peanuts" in run(cli, "list", "anna")  # the command line reads the same store
    run(cli, "add", "ben", "Ben keeps bees.")  # and writes to it
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        serve = subprocess.Popen([cli, "serve", "--port", str(port)], env=env, cwd=tmp_path, stdout=out,
                                 stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "serving on" not in log.read_text():
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        key = re.search(r"msk_\S+", log.read_text())
        assert key is not None, log.read_text()  # the first start printed its admin key once
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key.group()}"},
                          timeout=60) as http:
            assert http.get("/v1/users").json() == {"users": ["anna", "ben"]}
            listed = http.get("/v1/users/anna/memories").json()["memories"]
            assert any("allergic to peanuts" in m["content"] for m in listed)
            assert all(m["user_id"] == "anna" for m in listed)
            http.post("/v1/users/carl/memories", json={"content": "Carl rows on Sundays."}).raise_for_status()
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=120) == 0
    assert "Carl rows on Sundays." in run(cli, "list", "carl")  # and what the server writes, the CLI reads
    assert run(cli, "users").split() == ["anna", "ben", "carl"]


def test_the_default_tenants_older_layouts_move_to_the_stores_own_users(tmp_path, local_embedder):
    store_path = tmp_path / "memory.db"  # where serving(tmp_path, ...) keeps its store
    with SQLiteStore(store_path, embedding_model=local_embedder.name) as old:
        old.put([Memory(id="m-dora", user_id="default/dora", agent_id="a", content="Dora paints."),  # 0.1.0
                 Memory(id="m-carl", user_id="default:carl", agent_id="a", content="Carl rows."),  # a dev build
                 Memory(id="m-served", user_id="default:anna", agent_id="a", content="Anna told the server."),
                 Memory(id="m-cli", user_id="anna", agent_id="a", content="Anna told the command line."),
                 Memory(id="m-colon", user_id="default/x:y", agent_id="a", content="no default user holds ':'"),
                 Memory(id="m-acme", user_id="acme:anna", agent_id="a", content="Acme's Anna.")])
    keys = make_keys()
    with serving(tmp_path, keys.ring) as srv:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.default}"}, timeout=60) as http:
            assert http.get("/v1/users").json()["users"] == ["anna", "carl", "dora"]
            assert [m["content"] for m in http.get("/v1/users/anna/memories").json()["memories"]] == [
                "Anna told the command line."]  # never merged with the server's anna of the older layout
            assert http.get("/v1/users/carl/memories/m-carl").json()["content"] == "Carl rows."
        assert "2 user(s) renamed to the current layout, 2 user(s) of an older layout left" in srv.log_text()
    with MemoryScope(path=store_path, embedder=local_embedder) as engine:
        assert sorted(engine.users()) == ["acme:anna", "anna", "carl", "default/x:y", "default:anna", "dora"]
