"""An agent's procedures and tool statistics over MCP, through the MCP SDK's own client on a real server:
a run ended with record_run is learnt and returned by search_memories (agent_id, tools) to its tenant only,
each tenant reaches its own agents' procedures only, a key bound to users manages none, and the tool
statistics are the caller's user's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp", reason="the [server] extra is not installed")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

from memoryscope_plugins.server import ServerConfig  # noqa: E402
from memoryscope_plugins.server.mcp_tools import build_mcp  # noqa: E402
from tests.procedures.test_procedure_edit import NEW_DO  # noqa: E402
from tests.procedures.test_procedures import AGENT, GOOD, answer, booking_run, learnt_by_each, make, procedures_of  # noqa: E402
from tests.procedures.test_procedures_http import as_json  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys  # noqa: E402


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


async def call(srv, headers: dict, tool: str, arguments: dict):
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool(tool, arguments)


TASK = {"query": "reserve a restaurant table for Tuesday", "agent_id": AGENT, "tools": ["book_table"]}


async def test_a_run_ended_over_mcp_is_learnt_and_found_by_its_tenants_agent_only(tmp_path, server, teacher,
                                                                                  local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    keys = make_keys()
    anna = {"Authorization": f"Bearer {keys.anna_only}"}  # a key bound to its user ends that user's runs
    ben = {"Authorization": f"Bearer {keys.acme}", "X-Memory-User": "ben"}
    globex = {"Authorization": f"Bearer {keys.other}", "X-Memory-User": "ben"}
    try:
        with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
            ended = payload(await call(srv, anna, "record_run", {"messages": as_json(booking_run()),
                                                                 "run_outcome": "succeeded", "agent_id": AGENT}))
            assert len(ended["ids"]) == len(booking_run()) and ended["run_outcome"] == "succeeded"
            engine.consolidate()
            found = payload(await call(srv, ben, "search_memories", TASK))
            [procedure] = found["procedures"]
            assert procedure["tools"] == ["book_table"] and "~procedures~" not in json.dumps(found)
            assert "What worked before" in found["context"]
            [note] = found["tool_notes"]  # anna's failure, in ben's tenant
            assert (note["tool"], note["calls"], note["failures"]) == ("book_table", 2, 1)
            assert payload(await call(srv, anna, "search_memories", TASK))["tool_notes"] == [note]
            assert payload(await call(srv, globex, "search_memories", TASK))["tool_notes"] == []
            # another tenant's agent of the same name, and another agent of this tenant: none
            assert payload(await call(srv, globex, "search_memories", TASK))["procedures"] == []
            wrong = await call(srv, ben, "search_memories", {**TASK, "tools": ["book table!"]})
            assert wrong.isError and "tool" in wrong.content[0].text
            plain = payload(await call(srv, ben, "search_memories", {"query": TASK["query"]}))
            assert plain["procedures"] == [] and "What worked before" not in plain["context"]
            # a wrong outcome is refused by name, and records nothing
            refused = await call(srv, ben, "record_run", {"messages": [{"role": "user", "content": "table for two"}],
                                                          "run_outcome": "maybe", "agent_id": AGENT})
            assert refused.isError and "run_outcome" in refused.content[0].text
            # a key bound to anna ends no run of ben's
            bound = await call(srv, {**anna, "X-Memory-User": "ben"}, "record_run", {
                "messages": [{"role": "user", "content": "table for two"}], "run_outcome": "failed", "agent_id": AGENT})
            assert bound.isError and "may not reach" in bound.content[0].text
            assert engine.list("acme:ben") == []
            later = payload(await call(srv, ben, "record_run", {
                "messages": [{"role": "user", "content": "table for two"}], "run_outcome": "failed",
                "agent_id": AGENT, "procedures_used": [procedure["id"]]}))
            assert len(later["ids"]) == 1
        engine.consolidate()
        [stored] = procedures_of(engine, "acme:anna")
        assert (stored.id, stored.metadata["uses"], stored.metadata["failures"]) == (procedure["id"], 1, 1)
        assert procedures_of(engine, "globex:ben") == []
    finally:
        engine.close()


async def test_procedure_and_tool_statistics_tools_keep_to_the_callers_tenant(tmp_path, server, teacher,
                                                                             local_embedder):
    engine = make(tmp_path, server, local_embedder)
    [acme_p], [globex_p] = learnt_by_each(engine, teacher, ("acme:anna", "globex:anna"))
    keys = make_keys()
    acme = {"Authorization": f"Bearer {keys.acme}", "X-Memory-User": "anna"}
    globex = {"Authorization": f"Bearer {keys.other}", "X-Memory-User": "anna"}
    anna_only = {"Authorization": f"Bearer {keys.anna_only}"}
    default = {"Authorization": f"Bearer {keys.default}", "X-Memory-User": "anna"}
    try:
        with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv:
            [listed] = payload(await call(srv, acme, "list_procedures", {"agent_id": AGENT}))["procedures"]
            assert (listed["id"], listed["source_ids"]) == (acme_p.id, acme_p.source_ids)
            assert "~procedures~" not in json.dumps(listed)
            assert [p["id"] for p in payload(await call(srv, globex, "list_procedures",
                                                        {"agent_id": AGENT}))["procedures"]] == [globex_p.id]
            # another tenant: no such procedure, to it; nothing of acme's changes
            for tool, extra in (("forget_procedure", {}), ("update_procedure", {"do": NEW_DO})):
                refused = await call(srv, globex, tool, {"agent_id": AGENT, "procedure_id": acme_p.id, **extra})
                assert refused.isError and "not found" in refused.content[0].text
            # a key bound to a user manages none of the tenant's agents' procedures, but reads its user's figures
            for tool, arguments in (("list_procedures", {"agent_id": AGENT}),
                                    ("forget_procedure", {"agent_id": AGENT, "procedure_id": acme_p.id})):
                bound = await call(srv, anna_only, tool, arguments)
                assert bound.isError and "bound to users" in bound.content[0].text
            stats = payload(await call(srv, anna_only, "tool_stats", {"agent_id": AGENT}))["tools"]
            assert {s["tool"]: (s["calls"], s["failures"]) for s in stats} == {"book_table": (2, 1),
                                                                             "find_restaurant": (1, 0)}
            assert payload(await call(srv, default, "tool_stats", {"agent_id": AGENT}))["tools"] == []
            invented = await call(srv, acme, "update_procedure", {"agent_id": AGENT, "procedure_id": acme_p.id,
                                                                  "tools": ["book_table", "reserve_seat"]})
            assert invented.isError and "names a tool" in invented.content[0].text
            edited = payload(await call(srv, acme, "update_procedure",
                                        {"agent_id": AGENT, "procedure_id": acme_p.id, "do": NEW_DO}))
            assert edited["do"] == NEW_DO and edited["source_ids"] == acme_p.source_ids
            assert payload(await call(srv, acme, "forget_procedure", {"agent_id": AGENT, "procedure_id": acme_p.id}
                                      )) == {"deleted": acme_p.id}
            assert payload(await call(srv, acme, "list_procedures", {"agent_id": AGENT}))["procedures"] == []
        [kept] = procedures_of(engine, "globex:anna")
        assert (kept.id, kept.content) == (globex_p.id, globex_p.content)
    finally:
        engine.close()


async def test_over_stdio_the_process_manages_its_tenants_agents_procedures(tmp_path, server, teacher,
                                                                           local_embedder):
    teacher.queue = [answer(GOOD), answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        for user in ("acme:anna", "anna"):
            engine.record(user, booking_run(user), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        mcp = build_mcp(engine, fixed_user=("acme", "ben"))  # the tools a `serve --stdio --tenant acme` serves
        _, result = await mcp.call_tool("list_procedures", {"agent_id": AGENT})
        assert [p["id"] for p in result["procedures"]] == [p.id for p in procedures_of(engine, "acme:anna")]
        _, result = await mcp.call_tool("tool_stats", {"agent_id": AGENT})
        assert result == {"tools": []}  # ben's own calls: none
        _, result = await mcp.call_tool("record_run", {"messages": as_json(booking_run("ben", "Ben")),
                                                       "run_outcome": "failed", "agent_id": AGENT})
        assert len(result["ids"]) == len(booking_run())
        _, result = await mcp.call_tool("tool_stats", {"agent_id": AGENT})
        assert {s["tool"]: s["failures"] for s in result["tools"]} == {"book_table": 1, "find_restaurant": 0}
        assert sorted(m.role for m in engine.list("acme:ben")) == ["assistant", "user", "user"]  # no call is a turn
    finally:
        engine.close()
