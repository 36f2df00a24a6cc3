"""Issue 20, items 1 and 4, against a real ``memoryscope-plugins serve`` process.

- One identifier rule (validation.ID_RULE) at every entry point: HTTP paths and bodies, the MCP
  header, import lines. Nothing unsafe reaches the store.
- A store written in the old ``"<tenant>/<user>"`` layout opens, its users are renamed on start
  (memory ids, vectors and pending messages kept) and what cannot be renamed can be cleaned.
- No id oracle: importing an id another tenant holds answers exactly as a fresh id does.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
httpx = pytest.importorskip("httpx")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

from memoryscope_plugins import MemoryScope  # noqa: E402
from memoryscope_plugins.storage.sqlite_store import SQLiteStore  # noqa: E402
from memoryscope_plugins.transfer import derived_id  # noqa: E402
from memoryscope_plugins.types import Memory, MemoryType, Message  # noqa: E402
from memoryscope_plugins.validation import is_safe_id  # noqa: E402
from tests.support.serve_context import serving  # noqa: E402
from tests.support.server_harness import make_keys  # noqa: E402

HEX32 = re.compile(r"[0-9a-f]{32}")


def _line(memory_id: str, content: str = "I like green tea.", **fields) -> str:
    return json.dumps({"id": memory_id, "content": content, **fields}, ensure_ascii=False) + "\n"


def _stored_users(store_path, embedder) -> list[str]:
    with MemoryScope(path=store_path, embedder=embedder) as check:
        return check.users()


def test_unsafe_ids_are_refused_at_every_http_and_mcp_entry_point(tmp_path, local_embedder):
    keys = make_keys()
    with serving(tmp_path, keys.ring) as srv:
        store = srv.store
        h = {"Authorization": f"Bearer {keys.admin}"}
        with httpx.Client(base_url=srv.url, headers=h, timeout=60) as http:
            # user ids in the path: blank (the tenant prefix no longer hides it), dot segments, controls,
            # separators, bidi overrides
            for raw in ["%20", "%09", "%20%20", "..", "%2E%2E", ".", "x%0Dy", "x%0Ay", "x%00y", "x%E2%80%A8y",
                        "x%E2%80%AEy", "a%5Cb", "a%2Fb", "x%7Fy"]:
                answer = http.post(f"/v1/users/{raw}/memories", json={"content": "hello"})
                # "." and ".." are removed from the path by the client (RFC 3986), so the request reaches
                # another route: 404 or, where that route exists for other methods, 405; nothing is stored
                assert answer.status_code in (400, 404, 405), (raw, answer.status_code)
                if answer.status_code == 400:
                    assert "id" in answer.json()["error"]
            # ids in bodies
            for body in [{"content": "hello", "agent_id": "../x"}, {"content": "hello", "agent_id": " "},
                         {"content": "hello", "agent_id": "a\u2029b"}]:
                assert http.post("/v1/users/anna/memories", json=body).status_code == 400
            assert http.post("/v1/users/anna/record", json={"messages": [{"role": "user", "content": "hi"}],
                                                            "session_id": "s\r\n1"}).status_code == 400
            # import lines: the old attack ids are refused, nothing of the file is stored
            for bad in ["../../bob", "../../bob/memories/x", "a/b", "..", "x\ny", "x\u2028y"]:
                answer = http.post("/v1/users/anna/import", content=_line("fine") + _line(bad))
                assert answer.status_code == 400 and "line 2" in answer.json()["error"]
            # legal ids that are hostile to URLs are fine and come back as they were given
            legal = http.post("/v1/users/anna%3F%23%25%20%3B%C3%A9/memories", json={"content": "hello"})
            assert legal.status_code == 201 and legal.json()["user_id"] == "anna?#% ;é"
        # MCP: the X-Memory-User header follows the same rule
        import anyio

        async def mcp_call(user: str) -> bool:
            headers = {"Authorization": f"Bearer {keys.admin}", "X-Memory-User": user}
            async with create_mcp_http_client(headers=headers) as client:
                async with streamable_http_client(srv.url + "/mcp", http_client=client) as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        return (await session.call_tool("save_memory", {"content": "hello"})).isError

        for user in ["..", "a/b", "a\\b", "."]:
            assert anyio.run(mcp_call, user), user
        assert not anyio.run(mcp_call, "carl")
    users = _stored_users(store, local_embedder)
    assert sorted(users) == ["acme:anna?#% ;é", "acme:carl"] and all(is_safe_id(u) for u in users)


def test_a_store_in_the_old_layout_is_migrated_on_start_and_can_be_cleaned(tmp_path, local_embedder):
    """The store as the server wrote it before the identifier rule: users "<tenant>/<user>"."""
    store_path = tmp_path / "memory.db"  # where serving(tmp_path, ...) keeps its store
    old = SQLiteStore(store_path, embedding_model=local_embedder.name)
    facts = [Memory(id="obs-1", user_id="acme/anna", agent_id="assistant", content="Anna lives in Lisbon.",
                    type=MemoryType.OBSERVATION),
             Memory(id="obs-2", user_id="globex/anna", agent_id="assistant", content="Globex Anna likes jazz.",
                    type=MemoryType.OBSERVATION),
             Memory(id="odd-1", user_id="acme/x/y", agent_id="assistant", content="cannot be renamed"),
             Memory(id="blank-1", user_id="acme/ ", agent_id="assistant", content="blank user part"),
             Memory(id="../../bob", user_id="acme/anna", agent_id="assistant", content="imported by an old version"),
             Memory(id="bob-1", user_id="acme/bob", agent_id="assistant", content="Bob has a cat.")]
    old.put(facts, np.stack(local_embedder.embed([m.content for m in facts], kind="document")))
    old.append_messages("acme/anna", "assistant", [Message(role="user", content="I started learning Greek.")])
    old.close()

    keys = make_keys()
    with serving(tmp_path, keys.ring) as srv:
        acme = {"Authorization": f"Bearer {keys.admin}"}
        with httpx.Client(base_url=srv.url, headers=acme, timeout=60) as http:
            assert http.get("/v1/users").json()["users"] == ["anna", "bob"]
            assert http.get("/v1/users/anna/memories/obs-1").json()["content"] == "Anna lives in Lisbon."
            # a memory id of the old rules: readable and deletable by its encoded id, not editable
            assert http.get("/v1/users/anna/memories/..%2F..%2Fbob").json()["content"] == "imported by an old version"
            # the legacy-id route serves GET and DELETE only: PATCH is 405 (or 400/404 on other routings)
            assert http.patch("/v1/users/anna/memories/..%2F..%2Fbob",
                              json={"content": "x"}).status_code in (400, 404, 405)
            assert http.get("/v1/users/anna/memories/..%2F..%2Fbob").json()["content"] == "imported by an old version"
            assert http.delete("/v1/users/anna/memories/..%2F..%2Fbob").json() == {"deleted": "../../bob"}
            assert [m["id"] for m in http.get("/v1/users/bob/memories").json()["memories"]] == ["bob-1"]
            found = http.post("/v1/users/anna/retrieve", json={"query": "Where does Anna live?"}).json()
            assert found["memories"][0]["memory"]["id"] == "obs-1"  # the vector moved with it
        other = {"Authorization": f"Bearer {keys.other}"}
        with httpx.Client(base_url=srv.url, headers=other, timeout=60) as http:
            assert [m["id"] for m in http.get("/v1/users/anna/memories").json()["memories"]] == ["obs-2"]
        assert "3 user(s) renamed" in srv.log_text() and "2 user(s) of an older layout left" in srv.log_text()
        assert "acme/x/y" not in srv.log_text() and "Lisbon" not in srv.log_text()  # counts only, never ids or text
        first_log = len(srv.log_text())
    with MemoryScope(path=store_path, embedder=local_embedder) as engine:
        assert sorted(engine.users()) == ["acme/ ", "acme/x/y", "acme:anna", "acme:bob", "globex:anna"]
        pending = engine.store.pending_messages("acme:anna")
        assert [p.message.content for p in pending] == ["I started learning Greek."]
        # what could not be renamed: listed, readable, and removable or renamable by an admin
        assert sorted(engine.legacy_users()) == ["acme/ ", "acme/x/y"]
        assert [m.id for m in engine.list("acme/x/y")] == ["odd-1"]
        assert engine.rename_user("acme/x/y", "acme:x-y") == 1
        assert engine.delete_all("acme/ ") == 1
        assert engine.legacy_users() == []
        with pytest.raises(Exception, match="identifier|id"):
            engine.add("acme/anna", "nothing new is stored under an old-layout id")
    with serving(tmp_path, keys.ring) as srv:  # a second start changes nothing
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.admin}"}) as http:
            assert sorted(http.get("/v1/users").json()["users"]) == ["anna", "bob", "x-y"]
        assert "legacy" not in srv.log_text()[first_log:]


@contextmanager
def two_tenants(tmp_path) -> Iterator[tuple[Any, Any, str]]:
    """A server with tenants acme and globex (each an admin client) and the id of globex's one memory."""
    keys = make_keys()
    with serving(tmp_path, keys.ring) as srv:
        globex = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.other}"}, timeout=60)
        acme = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.admin}"}, timeout=60)
        with globex, acme:
            secret = globex.post("/v1/users/zoe/memories", json={"content": "Zoe's secret."}).json()["id"]
            yield acme, globex, secret


def test_no_tenant_chooses_a_memory_id_on_add(tmp_path):
    """Over HTTP a memory's id is always the server's: a tenant cannot name another tenant's id on add
    (the Python API's `add(memory_id=)` is for the engine's owner, who reads every user anyway)."""
    with two_tenants(tmp_path) as (acme, globex, secret):
        for chosen in (secret, "f" * 32):  # taken elsewhere, free: the same refusal
            answer = acme.post("/v1/users/anna/memories", json={"content": "Mine.", "memory_id": chosen})
            assert answer.status_code == 400 and "memory_id" in answer.json()["error"]
        assert acme.get("/v1/users/anna/memories").json()["memories"] == []
        assert globex.get(f"/v1/users/zoe/memories/{secret}").json()["content"] == "Zoe's secret."


def test_no_id_oracle_across_tenants_on_import(tmp_path):
    with two_tenants(tmp_path) as (acme, globex, secret):
        taken = acme.post("/v1/users/anna/import", content=_line(secret))
        fresh = acme.post("/v1/users/anna/import", content=_line("f" * 32))
        # the same status, the same shape, the same kind of answer
        assert taken.status_code == fresh.status_code == 200
        assert set(taken.json()) == set(fresh.json()) == {"imported", "ids", "tool_calls"}
        assert taken.json()["imported"] == fresh.json()["imported"] == 1
        assert taken.json()["ids"] == {secret: derived_id("acme:anna", secret)}
        assert fresh.json()["ids"] == {"f" * 32: derived_id("acme:anna", "f" * 32)}
        assert all(HEX32.fullmatch(v) for v in [*taken.json()["ids"].values(), *fresh.json()["ids"].values()])
        # afterwards too: neither id is anna's under its own name; both are under their mapped one
        assert acme.get(f"/v1/users/anna/memories/{secret}").status_code == 404
        assert acme.get(f"/v1/users/anna/memories/{'f' * 32}").status_code == 404
        assert acme.get(f"/v1/users/anna/memories/{taken.json()['ids'][secret]}").status_code == 200
        # a mixed file: one answer per id, in the file's order, the other tenant untouched
        mixed = acme.post("/v1/users/anna/import", content=_line("fresh-2") + _line(secret, "mine")).json()
        assert list(mixed["ids"]) == ["fresh-2", secret]
        assert globex.get(f"/v1/users/zoe/memories/{secret}").json()["content"] == "Zoe's secret."
        assert len(globex.get("/v1/users/zoe/memories").json()["memories"]) == 1
