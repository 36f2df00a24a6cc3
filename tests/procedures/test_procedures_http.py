"""Procedures over HTTP on a real server: a run ended through /record, learnt, and returned by
/retrieve to the same tenant only, with the outcome of a later run counted on it."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from tests.procedures.test_procedures import AGENT, GOOD, answer, booking_run, make, procedures_of  # noqa: E402
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
            # a tenant's figures are per user (the counters are never summed across tenants): anna's calls failed
            assert found["tool_notes"] == []
            [note] = acme.post("/v1/users/anna/retrieve", json=query).json()["tool_notes"]
            assert (note["tool"], note["calls"], note["failures"]) == ("book_table", 2, 1)
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
