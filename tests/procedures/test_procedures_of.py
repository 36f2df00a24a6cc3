"""`retrieve(..., procedures_of=)` (issue 43): the agent whose procedures are returned, named apart from
`agent_id` (which filters the user's memories by the agent that recorded them), in the engine, its async
twin and over HTTP. The procedures are stored as learning stores them (tests/support/run_outcomes)."""

from __future__ import annotations

import httpx
import pytest

from memoryscope_plugins.errors import ValidationError
from tests.support import run_outcomes as ro

AGENT = "concierge"
QUERY = "Book me a table at Rosa and tell me the weather in Oslo."
FACT = "Anna likes to book a table at Rosa on Fridays"


@pytest.fixture
def engine(tmp_path, local_embedder):
    memory = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield memory
    memory.close()


def shown(result) -> tuple[list[str], list[str]]:
    return [m.memory.content for m in result.memories], [p.memory.id for p in result.procedures]


def test_procedures_of_names_the_agent_without_filtering_the_users_memories(engine):
    own = ro.seed_two_agents(engine, "anna", AGENT)
    engine.add("anna", FACT, agent_id="assistant")  # recorded by another agent than the concierge
    memories, procedures = shown(engine.retrieve("anna", QUERY, procedures_of=AGENT))
    assert FACT in memories and procedures == [own]
    # agent_id alone keeps selecting both: the memories it recorded (none) and its procedures
    memories, procedures = shown(engine.retrieve("anna", QUERY, agent_id=AGENT))
    assert memories == [] and procedures == [own]
    # neither: agent "assistant"'s, as before
    assert shown(engine.retrieve("anna", QUERY))[1] == ["proc-assistant"]
    # both: each does its own job
    memories, procedures = shown(engine.retrieve("anna", QUERY, agent_id="assistant", procedures_of=AGENT))
    assert FACT in memories and procedures == [own]
    # an agent without procedures gets none, never another agent's
    assert shown(engine.retrieve("anna", QUERY, procedures_of="critic"))[1] == []


async def test_the_async_twin_takes_it_too(engine):
    own = ro.seed_two_agents(engine, "anna", AGENT)
    assert [p.memory.id for p in (await engine.aretrieve("anna", QUERY, procedures_of=AGENT)).procedures] == [own]


@pytest.mark.parametrize("bad", ["", "  ", "a/b", 7, "x" * 300])
def test_a_wrong_procedures_of_is_refused_by_name(engine, bad):
    with pytest.raises(ValidationError, match="procedures_of"):
        engine.retrieve("anna", QUERY, procedures_of=bad)


def test_it_is_checked_with_procedures_off_too(tmp_path, local_embedder):
    from memoryscope_plugins import MemoryScope, Settings
    engine = MemoryScope(Settings(store={"path": tmp_path / "off.db"}, consolidation={"worker": "none"}),
                         embedder=local_embedder)
    try:
        assert engine.retrieve("anna", QUERY, procedures_of=AGENT).procedures == []
        with pytest.raises(ValidationError, match="procedures_of"):
            engine.retrieve("anna", QUERY, procedures_of="")
    finally:
        engine.close()


def test_over_http_procedures_of_returns_the_tenants_agents_procedures(engine):
    pytest.importorskip("starlette", reason="the [server] extra is not installed")
    from memoryscope_plugins.server import ServerConfig
    from tests.support.server_harness import RunningServer, make_keys
    own = ro.seed_two_agents(engine, "acme:anna", AGENT)
    engine.add("acme:anna", FACT, agent_id="assistant")
    keys = make_keys()
    with RunningServer(engine, keys.ring, ServerConfig(rate_per_second=0)) as srv, \
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {keys.acme}"}, timeout=30) as acme:
        found = acme.post("/v1/users/anna/retrieve", json={"query": QUERY, "procedures_of": AGENT}).json()
        assert [p["id"] for p in found["procedures"]] == [own]
        assert FACT in [m["memory"]["content"] for m in found["memories"]]
        bad = acme.post("/v1/users/anna/retrieve", json={"query": QUERY, "procedures_of": ""})
        assert bad.status_code == 400 and "procedures_of" in bad.json()["error"]
