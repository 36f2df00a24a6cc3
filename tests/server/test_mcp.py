"""The MCP server through the MCP SDK's own client: over streamable HTTP (real server) and over stdio (a real
`memoryscope-plugins serve --stdio` process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="the [server] extra is not installed")

import mcp.client.stdio  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # noqa: E402

from memoryscope_plugins.server.mcp_tools import build_mcp  # noqa: E402
from memoryscope_plugins.types import EntityKind  # noqa: E402
from tests.support.paths import ROOT, console_script  # noqa: E402
from tests.support.server_harness import RunningServer, make_keys, seed, seed_ledger  # noqa: E402

TOOLS = {"search_memories", "save_memory", "update_memory", "forget_memory", "list_memories", "list_entities",
         "about_entity", "get_profile", "list_procedures", "update_procedure", "forget_procedure", "tool_stats",
         "record_run"}


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


async def exercise(session: ClientSession) -> None:
    await session.initialize()
    assert {t.name for t in (await session.list_tools()).tools} == TOOLS
    saved = payload(await session.call_tool("save_memory", {"content": "Anna is allergic to peanuts."}))
    found = payload(await session.call_tool("search_memories", {"query": "what is Anna allergic to?", "top_k": 3}))
    assert found["memories"][0]["id"] == saved["id"] and found["memories"][0]["score"] > 0
    assert "peanuts" in found["context"]
    assert found["procedures"] == [] and found["tool_notes"] == []  # procedures are off by default
    fixed = payload(await session.call_tool("update_memory", {"memory_id": saved["id"],
                                                              "content": "Anna is allergic to walnuts."}))
    assert fixed["content"] == "Anna is allergic to walnuts."
    assert payload(await session.call_tool("forget_memory", {"memory_id": saved["id"]})) == {"deleted": saved["id"]}
    listed = payload(await session.call_tool("list_memories", {"limit": 50}))
    assert saved["id"] not in {m["id"] for m in listed["memories"]}
    missing = await session.call_tool("forget_memory", {"memory_id": saved["id"]})
    assert missing.isError


async def test_mcp_over_streamable_http_is_scoped_to_the_keys_user(engine):
    keys = make_keys()
    seed(engine)
    with RunningServer(engine, keys.ring) as srv:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {keys.anna_only}"}) as http:
            async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await exercise(session)
                    listed = payload(await session.call_tool("list_memories", {"limit": 50}))
                    assert "Anna lives in Lisbon." in {m["content"] for m in listed["memories"]}
        # another tenant's key, naming the same user, sees its own (empty) anna only
        headers = {"Authorization": f"Bearer {keys.other}", "X-Memory-User": "anna"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    found = payload(await session.call_tool("search_memories", {"query": "where does Anna live?"}))
                    assert found["memories"] == []
        # a key bound to anna cannot switch to bob with the header
        headers = {"Authorization": f"Bearer {keys.anna_only}", "X-Memory-User": "bob"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert (await session.call_tool("list_memories", {})).isError
    assert engine.count("acme:bob") == 0


async def test_the_default_tenant_reaches_the_stores_own_user_and_no_other_tenants(engine):
    keys = make_keys()
    seed(engine)  # acme's anna
    engine.add("anna", "The store's own Anna keeps bees.")
    with RunningServer(engine, keys.ring) as srv:
        for user, own in (("anna", True), ("acme:anna", False)):
            headers = {"Authorization": f"Bearer {keys.default}", "X-Memory-User": user}
            async with create_mcp_http_client(headers=headers) as http:
                async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        listed = await session.call_tool("list_memories", {"limit": 50})
                        if own:
                            assert [m["content"] for m in payload(listed)["memories"]] == [
                                "The store's own Anna keeps bees."]
                        else:  # acme's store id is not a user of the default tenant
                            assert listed.isError and "cannot contain ':'" in listed.content[0].text


async def test_entity_and_profile_tools_read_the_callers_ledger_only(engine):
    keys = make_keys()
    seed(engine)
    seed_ledger(engine)
    with RunningServer(engine, keys.ring) as srv:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {keys.anna_only}"}) as http:
            async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = payload(await session.call_tool("list_entities", {"order": "frequency", "limit": 2}))
                    assert [e["name"] for e in listed["entities"]] == ["Anna", "Lisbon"]
                    places = payload(await session.call_tool("list_entities", {"kind": "place"}))
                    assert sorted(e["name"] for e in places["entities"]) == ["Lisbon", "Porto"]
                    about = payload(await session.call_tool("about_entity", {"name": "Lisboa"}))
                    assert about["entity"]["name"] == "Lisbon" and about["entity"]["user_id"] == "anna"
                    assert "Anna lives in Lisbon." in [m["content"] for m in about["memories"]]
                    assert [p["mentions"] for p in about["timeline"]] == [2, 1]
                    profile = payload(await session.call_tool("get_profile", {}))["profile"]
                    assert [v["value"] for v in profile["home"]] == ["Lisbon"]
                    history = payload(await session.call_tool("get_profile", {"key": "home"}))["history"]
                    assert [(v["value"], v["current"]) for v in history] == [("Porto", False), ("Lisbon", True)]
                    chinese = payload(await session.call_tool("get_profile", {"key": "家"}))
                    assert chinese["key"] == "home" and [v["value"] for v in chinese["history"]] == ["Porto", "Lisbon"]
                    missing = await session.call_tool("about_entity", {"name": "Atlantis"})
                    assert missing.isError and "not found" in missing.content[0].text
                    assert (await session.call_tool("list_entities", {"order": "loudest"})).isError
                    spoofed = await session.call_tool("about_entity", {"name": "Lisb\u202eoa"})
                    assert spoofed.isError and "name holds U+202E, a format character" in spoofed.content[0].text
                    folded = await session.call_tool("get_profile", {"key": "home\n"})
                    assert folded.isError and "key holds U+000A, a control character" in folded.content[0].text
                    described = {t.name: t.description for t in (await session.list_tools()).tools}
                    assert "kind: " + "|".join(kind.value for kind in EntityKind) in described["list_entities"]
        headers = {"Authorization": f"Bearer {keys.other}", "X-Memory-User": "anna"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(srv.url + "/mcp", http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert payload(await session.call_tool("list_entities", {}))["entities"] == []
                    assert payload(await session.call_tool("get_profile", {}))["profile"] == {}
                    assert (await session.call_tool("about_entity", {"name": "Lisbon"})).isError


async def test_mcp_over_stdio(tmp_path, engine):
    store = tmp_path / "stdio.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryscope_plugins", "--store", str(store), "serve", "--stdio", "--tenant", "acme",
              "--user", "anna"],
        env={"MEMORYSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session)
            payload(await session.call_tool("save_memory", {"content": "Anna plays the cello."}))
    from memoryscope_plugins import MemoryScope
    with MemoryScope(path=store, embedder=engine.embedder) as check:
        assert [m.content for m in check.list("acme:anna")] == ["Anna plays the cello."]


async def _one_session(params: StdioServerParameters, errlog) -> None:
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            saved = payload(await session.call_tool("save_memory", {"content": "Anna plays the cello."}))
            assert saved["content"] == "Anna plays the cello."


def test_a_stdio_session_ends_with_exit_status_0_and_nothing_on_stderr(tmp_path, monkeypatch):
    """The official client's whole session (initialize, list_tools, a call, disconnect) against the
    real command: the process must end by itself, with status 0 and an empty stderr (issue 42, item 1)."""
    import anyio
    # the client sends SIGTERM to a server still running 2 s after it closed its stdin: wait for the
    # exit itself here, so the test checks how the process ends, not how fast
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 120.0)
    status, stderr = tmp_path / "status", tmp_path / "stderr"
    command = [console_script(), "--store", str(tmp_path / "stdio.db"), "serve", "--stdio", "--user", "anna"]
    params = StdioServerParameters(  # a shell in between only to keep the exit status
        command="/bin/sh", args=["-c", '"$@"; echo $? > "$STATUS_FILE"', "sh", *command],
        env={"MEMORYSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "STATUS_FILE": str(status)})
    with open(stderr, "w") as errlog:
        anyio.run(_one_session, params, errlog)
    assert status.read_text().strip() == "0"
    assert stderr.read_text() == ""
    # the default tenant's anna is the store's anna: the command line lists what the session saved
    listed = subprocess.run([console_script(), "--store", str(tmp_path / "stdio.db"), "list", "anna"],
                            capture_output=True, text=True, timeout=120, env=params.env)
    assert listed.returncode == 0 and "Anna plays the cello." in listed.stdout


def test_stdio_with_nothing_on_stdin_exits_0_quietly(tmp_path):
    done = subprocess.run([console_script(), "--store", str(tmp_path / "stdio.db"), "serve", "--stdio",
                           "--user", "anna"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, env={"MEMORYSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


async def test_the_readme_and_the_docs_name_every_tool_the_server_has(engine):
    served = {tool.name for tool in await build_mcp(engine, fixed_user=("acme", "anna")).list_tools()}
    assert served == TOOLS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "McpWorkbench" in b)
    comments = " ".join(line.split("#", 1)[1] for line in block.splitlines() if "#" in line)
    assert set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", comments)) == served
    server_md = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    mcp_section = server_md.split("\n## MCP\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`(\w+)\(", mcp_section)) == served
