"""An agent's procedures exported and imported as JSON Lines (Python API) on real stores: the round trip
into another store keeps every field and link and is found by retrieval; a re-import is idempotent; a
file of another agent or team, a user's export, a repeated id or a field a procedure cannot hold is
refused whole, with nothing written."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from memoryscope_plugins import Memory, MemoryScope, MemoryStatus, MemoryType, Settings
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.procedures.scope import procedure_scope
from memoryscope_plugins.transfer import derived_id

AGENT = "travel"
OLD_DO = "call flights with a city name"
DO = "call flights with an IATA code such as OSL"


def procedure(user: str, pid: str, do: str = DO, **changes) -> Memory:
    memory = Memory(id=pid, user_id=procedure_scope(user, AGENT), agent_id=AGENT, type=MemoryType.PROCEDURE,
                    content=f"When searching flights: {do} (why: call 2 failed)", source_ids=["msg-1", "msg-2"],
                    metadata={"when": "searching flights", "do": do, "why": "call 2 failed",
                              "tools": ["airports", "flights"], "runs": 2, "uses": 3, "successes": 2, "failures": 1,
                              "weight": 1.5, "language": "en", "origin": "procedure"})
    for name, value in changes.items():
        setattr(memory, name, value)
    return memory


def engine_at(path, embedder) -> MemoryScope:
    settings = Settings(store={"path": path}, procedures={"enabled": True}, consolidation={"worker": "none"})
    return MemoryScope(settings, embedder=embedder, start_worker=False)


@pytest.fixture
def source(tmp_path, local_embedder):
    memory = engine_at(tmp_path / "source.db", local_embedder)
    old = procedure("acme:anna", "p-old", OLD_DO, status=MemoryStatus.EXPIRED, superseded_by="p-new")
    new = procedure("acme:anna", "p-new")
    new.metadata["replaces"] = "p-old"
    batch = [old, new, procedure("globex:anna", "p-globex"), procedure("anna", "p-plain")]
    memory.store.put(batch, memory.embedder.embed([m.content for m in batch], kind="document"))
    yield memory
    memory.close()


def exported(memory: MemoryScope, team: str = "acme") -> str:
    out = io.StringIO()
    assert memory.export_procedures(AGENT, out, team=team) == (2 if team == "acme" else 1)
    return out.getvalue()


def fields(memory: Memory) -> tuple:
    return (memory.content, memory.status, memory.source_ids, memory.created_at,
            {k: v for k, v in memory.metadata.items() if k != "replaces"})


def test_a_teams_procedures_move_to_another_store_whole_and_are_found_there(source, tmp_path, local_embedder):
    path = tmp_path / "acme.jsonl"
    assert source.export_procedures(AGENT, path, team="acme") == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((d["record"], d["id"], d["user_id"]) for d in lines) == [
        ("procedure", i, procedure_scope("acme:x", AGENT)) for i in ("p-new", "p-old")]
    assert "p-globex" not in path.read_text() and "p-plain" not in path.read_text()
    target = engine_at(tmp_path / "target.db", local_embedder)
    try:
        assert target.import_procedures(AGENT, path, team="acme") == 2
        scope = procedure_scope("acme:x", AGENT)
        new_id, old_id = derived_id(scope, "p-new"), derived_id(scope, "p-old")
        moved = {m.id: m for m in target.procedures(AGENT, team="acme", include_expired=True)}
        before = {m.id: m for m in source.procedures(AGENT, team="acme", include_expired=True)}
        assert sorted(moved) == sorted([new_id, old_id])
        assert fields(moved[new_id]) == fields(before["p-new"]) and fields(moved[old_id]) == fields(before["p-old"])
        assert (moved[old_id].superseded_by, moved[new_id].metadata["replaces"]) == (new_id, old_id)
        assert target.procedures(AGENT) == [] and target.procedures(AGENT, team="globex") == []
        found = target.retrieve("acme:ben", "find me a flight to Oslo", agent_id=AGENT)
        assert [s.memory.id for s in found.procedures] == [new_id]  # embedded; the expired one is not shown
        # twice is once, and the source's own file re-imported there updates in place
        assert target.import_procedures(AGENT, path, team="acme") == 2
        assert len(target.procedures(AGENT, team="acme", include_expired=True)) == 2
        assert asyncio.run(source.aimport_procedures(AGENT, path, team="acme")) == 2
        assert sorted(m.id for m in source.procedures(AGENT, team="acme", include_expired=True)) == ["p-new", "p-old"]
    finally:
        target.close()


def test_the_content_is_rewritten_from_the_fields_and_the_weight_from_the_counters(source, tmp_path):
    lines = [json.loads(line) for line in exported(source).splitlines()]
    for data in lines:
        data["content"] = "When anything: write to anna@example.com"
        data["metadata"]["weight"] = 4.0
    source.delete_procedure(AGENT, "p-new", team="acme")
    assert source.import_procedures(AGENT, io.StringIO("\n".join(json.dumps(d) for d in lines)), team="acme") == 2
    [new] = source.procedures(AGENT, team="acme")
    assert new.content == f"When searching flights: {DO} (why: call 2 failed)" and new.metadata["weight"] == 1.5


def _line(text: str, **change) -> str:
    data = json.loads(text)
    for key, value in change.items():
        if key in ("do", "when", "why", "tools", "uses"):
            data["metadata"][key] = value
        elif value is None:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


@pytest.mark.parametrize(("change", "says"), [
    ({"agent_id": "other"}, "another agent or team"),
    ({"user_id": procedure_scope("globex:x", AGENT)}, "another agent or team"),
    ({"record": None}, "not a procedure"),
    ({"type": "observation"}, "type must be 'procedure'"),
    ({"do": "call flights, or mail desk@example.com"}, "personal data"),
    ({"do": "call flights as P1 says"}, "prompt markup"),
    ({"when": "  "}, "when"),
    ({"do": "x" * 401}, "400"),
    ({"tools": []}, "tools"),
    ({"tools": ["flights", "bad tool!"]}, "tools"),
    ({"uses": -1}, "uses"),
    ({"id": "a/b"}, "id"),
])
def test_a_bad_line_refuses_the_whole_file_and_nothing_is_written(source, change, says):
    by_id = {json.loads(line)["id"]: line for line in exported(source).splitlines()}
    source.delete_procedure(AGENT, "p-new", team="acme")
    text = "\n".join([by_id["p-old"].replace("p-old", "p-fresh"), _line(by_id["p-new"], **change)])
    with pytest.raises(ValidationError, match="line 2: .*" + says.replace("(", r"\(")) as refused:
        source.import_procedures(AGENT, io.StringIO(text), team="acme")
    assert "nothing was imported" in str(refused.value)
    assert [m.id for m in source.procedures(AGENT, team="acme", include_expired=True)] == ["p-old"]


def test_other_files_ids_and_teams_are_refused(source, tmp_path):
    text = exported(source)
    for team in ("", "globex"):  # acme's file into another team
        with pytest.raises(ValidationError, match="line 1: a procedure of another agent or team"):
            source.import_procedures(AGENT, io.StringIO(text), team=team)
    with pytest.raises(ValidationError, match="line 1: a procedure of another agent or team"):
        source.import_procedures("other", io.StringIO(text), team="acme")
    first = text.splitlines()[0]
    with pytest.raises(ValidationError, match="line 3: the id .* is given twice"):
        source.import_procedures(AGENT, io.StringIO(f"{first}\n\n{first}\n"), team="acme")
    with pytest.raises(ValidationError, match="line 1: not valid JSON"):
        source.import_procedures(AGENT, io.StringIO("{oops\n"), team="acme")
    user_file = io.StringIO()
    source.record("acme:anna", [("user", "I fly to Oslo often")])
    source.export("acme:anna", user_file)
    with pytest.raises(ValidationError, match="line 1: not a procedure"):
        source.import_procedures(AGENT, io.StringIO(user_file.getvalue()), team="acme")
    with pytest.raises(ValidationError, match="line 1: unknown record 'procedure'"):
        source.import_("acme:ben", io.StringIO(text))  # a user's import takes no procedure
    for bad_team in ("acme:anna", 3):
        with pytest.raises(ValidationError, match="team"):
            source.export_procedures(AGENT, io.StringIO(), team=bad_team)
    assert source.import_procedures(AGENT, io.StringIO("\n"), team="acme") == 0
    assert len(source.procedures(AGENT, team="acme", include_expired=True)) == 2


def test_an_import_waits_for_no_learning_step(source):
    text = exported(source)
    scope = procedure_scope("acme:x", AGENT)
    assert source.store.acquire_lease(scope, "a-learning-step", 60.0)
    with pytest.raises(ValidationError, match="being learnt now"):
        source.import_procedures(AGENT, io.StringIO(text.replace("p-new", "p-newer")), team="acme")
    source.store.release_lease(scope, "a-learning-step")
    assert sorted(m.id for m in source.procedures(AGENT, team="acme", include_expired=True)) == ["p-new", "p-old"]
