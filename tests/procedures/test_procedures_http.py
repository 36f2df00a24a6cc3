"""Procedures over HTTP on a real server: a run ended through /record, learnt, and returned by
/retrieve to the same tenant only, with the outcome of a later run counted on it."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from tests.procedures.test_procedure_edit import NEW_DO  # noqa: E402
from tests.procedures.test_procedures import AGENT, GOOD, answer, booking_run, learnt_by_each, make, procedures_of  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys  # noqa: E402


def client(srv, key: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def as_json(messages: list[dict]) -> list[dict]:
    return [{k: (v.isoformat() if k == "timestamp" else v) for k, v in m.items()} for m in messages]


def test_a_tenants_run_teaches_its_agent_and_no_other_tenant(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    keys = make_keys()
    try:
        with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv, \
                client(srv, keys.acme) as acme, client(srv, keys.other) as globex:
            ended = acme.post("/v1/users/anna/record", json={"agent_id": AGENT, "messages": as_json(booking_run()),
                                                              "run_outcome": "succeeded"})
            assert ended.status_code == 201, ended.text
            engine.consolidate()
            query = {"query": "reserve a restaurant table for Tuesday", "agent_id": AGENT, "tools": ["book_table"]}
            found = acme.post("/v1/users/ben/retrieve", json=query).json()
            [procedure] = found["procedures"]
            assert procedure["tools"] == ["book_table"] and "~procedures~" not in str(found)
            assert "What worked before" in found["context"]
            # a tenant's figures are summed over its users (never across tenants): ben is warned of anna's failure
            [note] = found["tool_notes"]
            assert (note["tool"], note["calls"], note["failures"]) == ("book_table", 2, 1)
            assert acme.post("/v1/users/anna/retrieve", json=query).json()["tool_notes"] == [note]
            other = globex.post("/v1/users/ben/retrieve", json=query).json()
            assert other["procedures"] == [] and other["tool_notes"] == []
            later = acme.post("/v1/users/ben/record", json={
                "agent_id": AGENT, "messages": [{"role": "user", "content": "table for two"}],
                "run_outcome": "failed", "procedures_used": [procedure["id"]]})
            assert later.status_code == 201, later.text
            bad = acme.post("/v1/users/ben/record", json={"messages": [{"role": "user", "content": "hi"}],
                                                          "run_outcome": "maybe"})
            assert bad.status_code == 400 and "run_outcome" in bad.json()["error"]
            engine.consolidate()
            [stored] = procedures_of(engine, "acme:anna")
            assert (stored.metadata["uses"], stored.metadata["failures"]) == (1, 1)
    finally:
        engine.close()


def test_a_tenant_lists_edits_and_deletes_its_agents_procedures_and_no_other_tenants(tmp_path, server, teacher,
                                                                                     local_embedder):
    engine = make(tmp_path, server, local_embedder)
    [acme_p], [globex_p], [own_p] = learnt_by_each(engine, teacher, ("acme:anna", "globex:anna", "anna"))
    keys = make_keys()
    base = f"/v1/agents/{AGENT}/procedures"
    try:
        with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv, \
                client(srv, keys.acme) as acme, client(srv, keys.other) as globex, \
                client(srv, keys.anna_only) as anna_only, client(srv, keys.default) as default:
            [listed] = acme.get(base).json()["procedures"]
            assert (listed["id"], listed["source_ids"], listed["tools"]) == (acme_p.id, acme_p.source_ids,
                                                                             ["book_table"])
            assert listed["status"] == "active" and "~procedures~" not in str(listed)
            assert [p["id"] for p in globex.get(base).json()["procedures"]] == [globex_p.id]
            assert [p["id"] for p in default.get(base).json()["procedures"]] == [own_p.id]
            # another tenant's key can neither change nor delete it: to it, there is no such procedure
            assert globex.patch(f"{base}/{acme_p.id}", json={"do": NEW_DO}).status_code == 404
            assert globex.delete(f"{base}/{acme_p.id}").status_code == 404
            # a key bound to some users manages none of the tenant's agents' procedures
            for response in (anna_only.get(base), anna_only.patch(f"{base}/{acme_p.id}", json={"do": NEW_DO}),
                             anna_only.delete(f"{base}/{acme_p.id}")):
                assert response.status_code == 403, response.text
            invented = acme.patch(f"{base}/{acme_p.id}", json={"tools": ["book_table", "reserve_seat"]})
            assert invented.status_code == 400 and "names a tool" in invented.json()["error"]
            assert acme.patch(f"{base}/{acme_p.id}", json={"content": "x"}).status_code == 400
            for query in ("include_expired=maybe", "limit=0", "team=globex"):
                assert acme.get(f"{base}?{query}").status_code == 400, query
            edited = acme.patch(f"{base}/{acme_p.id}", json={"do": NEW_DO})
            assert edited.status_code == 200, edited.text
            assert edited.json()["do"] == NEW_DO and edited.json()["source_ids"] == acme_p.source_ids
            found = acme.post("/v1/users/ben/retrieve", json={"query": "a table for twelve guests",
                                                              "agent_id": AGENT}).json()
            assert [p["do"] for p in found["procedures"]] == [NEW_DO]
            assert acme.delete(f"{base}/{acme_p.id}").json() == {"deleted": acme_p.id}
            assert acme.get(base).json()["procedures"] == []
            assert acme.delete(f"{base}/{acme_p.id}").status_code == 404
        assert [p.id for p in procedures_of(engine, "globex:anna")] == [globex_p.id]
        assert procedures_of(engine, "globex:anna")[0].content == globex_p.content
        assert procedures_of(engine, "anna")[0].content == own_p.content
    finally:
        engine.close()


def test_a_tenant_exports_and_imports_its_agents_procedures_and_no_other_tenants(tmp_path, server, teacher,
                                                                                 local_embedder):
    engine = make(tmp_path, server, local_embedder)
    [acme_p], [globex_p] = learnt_by_each(engine, teacher, ("acme:anna", "globex:anna"))
    keys = make_keys()
    base = f"/v1/agents/{AGENT}/procedures"
    try:
        with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv, \
                client(srv, keys.admin) as admin, client(srv, keys.acme) as acme, \
                client(srv, keys.other) as globex, client(srv, keys.anna_only) as anna_only:
            exported = acme.get(f"{base}/export")
            assert exported.status_code == 200 and exported.headers["content-type"] == "application/x-ndjson"
            [line] = exported.text.splitlines()
            assert json.loads(line)["id"] == acme_p.id and "~procedures~" not in line and "acme" not in line
            # globex's admin imports acme's file (it holds it): into globex's agent, under new ids
            imported = globex.post(f"{base}/import", content=exported.content)
            assert imported.status_code == 200 and imported.json() == {"imported": 1}, imported.text
            assert len(procedures_of(engine, "globex:anna")) == 2 and procedures_of(engine, "acme:anna") == [acme_p]
            assert globex.post(f"{base}/import", content=exported.content).json() == {"imported": 1}  # idempotent
            assert len(procedures_of(engine, "globex:anna")) == 2
            # a key that is not admin, or bound to users, imports nothing; a bad line is a 400, nothing written
            assert acme.post(f"{base}/import", content=exported.content).status_code == 403
            assert anna_only.post(f"{base}/import", content=exported.content).status_code == 403
            assert anna_only.get(f"{base}/export").status_code == 403
            bad = admin.post(f"{base}/import", content=exported.content.replace(b'"procedure"', b'"fact"', 1))
            assert bad.status_code == 400 and "line 1" in bad.json()["error"]
            other = admin.post("/v1/agents/other-agent/procedures/import", content=exported.content)
            assert other.status_code == 400 and "another agent" in other.json()["error"]
            assert admin.post(f"{base}/import", content=b"\xff").status_code == 400
            assert procedures_of(engine, "acme:anna") == [acme_p]
            assert [p.id for p in procedures_of(engine, "globex:anna")].count(globex_p.id) == 1
            theirs = [json.loads(x)["id"] for x in globex.get(f"{base}/export").text.splitlines()]
            assert globex_p.id in theirs and acme_p.id not in theirs and len(theirs) == 2  # its own tenant's
            for path in (f"{base}/export", f"{base}/import"):
                assert httpx.request("GET" if path.endswith("export") else "POST", srv.url + path).status_code == 401
    finally:
        engine.close()
