"""Tool calls over HTTP on a real server: recorded through /record, counted per user by /tool-stats
(never across tenants), carried by export and import."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from memoryscope_plugins.tool_calls import latency_bound  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys  # noqa: E402

RUN = {"agent_id": "travel", "messages": [
    {"role": "user", "content": "Find me a flight to Oslo", "timestamp": "2026-06-01T10:00:00+00:00"},
    {"role": "tool", "tool_call": {"name": "flights", "arguments": {"to": "OSL"}, "result": "3 flights",
                                   "duration_ms": 420}, "timestamp": "2026-06-01T10:00:01+00:00"},
    {"tool_call": {"name": "flights", "arguments": {"to": "OSL", "day": 3}, "error": "HTTP 502",
                   "duration_ms": 30}, "timestamp": "2026-06-01T10:00:02+00:00"},
]}


@pytest.fixture
def keys():
    return make_keys()


@pytest.fixture
def running(engine, keys):
    with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
        yield srv


def client(srv, key: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_tool_calls_recorded_over_http_are_counted_per_user_and_tenant(running, keys, engine):
    with client(running, keys.acme) as acme, client(running, keys.other) as globex:
        recorded = acme.post("/v1/users/anna/record", json=RUN)
        assert recorded.status_code == 201, recorded.text
        assert len(recorded.json()["ids"]) == 3
        assert globex.post("/v1/users/zoe/record", json=RUN).status_code == 201
        [flights] = acme.get("/v1/users/anna/tool-stats", params={"agent_id": "travel"}).json()["tools"]
        assert (flights["calls"], flights["failures"], flights["timed_calls"]) == (2, 1, 2)
        assert (flights["p50_ms"], flights["p95_ms"]) == (latency_bound(30), latency_bound(420))
        assert flights["errors"] == [{"error": "HTTP <n>", "count": 1}]
        # another tenant's calls of the same agent are not this user's; the store's owner sees both
        assert [s.calls for s in engine.tool_stats("travel")] == [4]
        assert acme.get("/v1/users/ben/tool-stats", params={"agent_id": "travel"}).json() == {"tools": []}
        assert [m["role"] for m in acme.get("/v1/users/anna/memories").json()["memories"]] == ["user"]


def test_the_tool_stats_route_checks_its_input_and_its_key(running, keys):
    with client(running, keys.acme) as acme, client(running, keys.anna_only) as anna_only:
        assert acme.post("/v1/users/anna/record", json=RUN).status_code == 201
        for params, message in [({}, "agent_id is required"), ({"agent_id": "travel", "top": "x"}, "top"),
                                ({"agent_id": "travel", "top": "0"}, "top"), ({"agent_id": "a/b"}, "agent_id"),
                                ({"agent_id": "travel", "tool": "no such"}, "tool"),
                                ({"agent_id": "travel", "user": "x"}, "unknown query parameters")]:
            answer = acme.get("/v1/users/anna/tool-stats", params=params)
            assert answer.status_code == 400 and message in answer.json()["error"], (params, answer.text)
        assert anna_only.get("/v1/users/ben/tool-stats", params={"agent_id": "travel"}).status_code == 403
        assert anna_only.get("/v1/users/anna/tool-stats", params={"agent_id": "travel"}).status_code == 200
        bad = acme.post("/v1/users/anna/record", json={"messages": [{"tool_call": {"name": "x", "argz": {}}}]})
        assert bad.status_code == 400 and "unknown keys" in bad.json()["error"]


def test_export_and_import_over_http_carry_the_calls(running, keys):
    with client(running, keys.acme) as acme, client(running, keys.admin) as admin:
        assert acme.post("/v1/users/anna/record", json=RUN).status_code == 201
        exported = acme.get("/v1/users/anna/export").text
        assert exported.count('"record": "tool_call"') == 2 and "acme:" not in exported
        imported = admin.post("/v1/users/bea/import", content=exported).json()
        assert (imported["imported"], imported["tool_calls"]) == (1, 2)
        assert admin.post("/v1/users/bea/import", content=exported).json()["tool_calls"] == 0
        stats = [acme.get(f"/v1/users/{u}/tool-stats", params={"agent_id": "travel"}).json() for u in ("anna", "bea")]
        assert stats[0] == stats[1]
