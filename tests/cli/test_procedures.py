"""``memoryscope-plugins edit-procedure`` and ``delete-procedure`` on a real store: an agent's procedure of
one team corrected and removed, what the engine refuses an error line with exit status 1 and nothing
changed, a wrong command line exit status 2, and another team's procedure never reached."""

from __future__ import annotations

import json

import pytest

from memoryscope_plugins import Memory, MemoryScope, MemoryType
from memoryscope_plugins.cli.main import main
from memoryscope_plugins.procedures.scope import procedure_scope

DO = "call flights with a city name"
ISO = "call flights with an IATA code such as OSL"


def procedure(user: str, pid: str) -> Memory:
    return Memory(id=pid, user_id=procedure_scope(user, "travel"), agent_id="travel", type=MemoryType.PROCEDURE,
                  content=f"When searching flights: {DO} (why: call 2 failed)",
                  metadata={"when": "searching flights", "do": DO, "why": "call 2 failed",
                            "tools": ["flights", "airports"], "runs": 2, "uses": 3, "successes": 2, "failures": 1,
                            "weight": 1.5})


@pytest.fixture
def store(tmp_path, capsys):
    path = str(tmp_path / "procedures.db")
    with MemoryScope(path=path) as memory:
        batch = [procedure("acme:anna", "p-acme"), procedure("globex:anna", "p-globex")]
        memory.store.put(batch, memory.embedder.embed([m.content for m in batch], kind="document"))
    capsys.readouterr()
    return path


def stored(path: str, team: str) -> list[Memory]:
    with MemoryScope(path=path) as memory:
        return memory.procedures("travel", team=team, include_expired=True)


def test_edit_rewrites_the_fields_and_keeps_the_counters(store, capsys):
    assert main(["edit-procedure", "travel", "p-acme", "--team", "acme", "--do", ISO, "--why", "",
                 "--tools", "flights", "--store", store]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"p-acme: When searching flights: {ISO}",
        "  tools flights; runs 2, uses 3 (2 succeeded, 1 failed), weight 1.50"]
    [edited] = stored(store, "acme")
    assert (edited.metadata["do"], edited.metadata["why"], edited.metadata["tools"]) == (ISO, "", ["flights"])
    assert "edited_at" in edited.metadata
    assert main(["edit-procedure", "travel", "p-acme", "--team", "acme", "--when", "looking for flights", "--json",
                 "--store", store]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert (as_json["id"], as_json["metadata"]["when"], as_json["metadata"]["uses"]) == ("p-acme",
                                                                                       "looking for flights", 3)
    [other] = stored(store, "globex")
    assert other.metadata["do"] == DO  # the other team's agent of the same name is untouched


def test_what_the_engine_refuses_is_one_error_line_and_nothing_changes(store, capsys):
    for argv, says in ((["--tools", "flights", "hotels"], "names a tool"),
                       (["--do", "call book_table first"], "tool or argument"),
                       (["--do", "write to anna@example.com"], "e-mail"),
                       (["--when", "   "], "when")):
        assert main(["edit-procedure", "travel", "p-acme", "--team", "acme", *argv, "--store", store]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and says in err and err.count("\n") == 1
    # another team's procedure, or no team: not found, to this command
    for team in ("globex", ""):
        assert main(["edit-procedure", "travel", "p-acme", "--team", team, "--do", ISO, "--store", store]) == 1
        assert "has no procedure 'p-acme'" in capsys.readouterr().err
        assert main(["delete-procedure", "travel", "p-acme", "--team", team, "--store", store]) == 1
        assert "has no procedure 'p-acme'" in capsys.readouterr().err
    [kept] = stored(store, "acme")
    assert (kept.metadata["do"], kept.metadata["tools"]) == (DO, ["flights", "airports"])


def test_a_wrong_command_line_is_exit_status_2(store, capsys):
    assert main(["edit-procedure", "travel", "p-acme", "--team", "acme", "--store", store]) == 2
    assert capsys.readouterr().err == "error: nothing to change: give --when, --do, --why or --tools\n"
    with pytest.raises(SystemExit) as exit_:
        main(["edit-procedure", "travel", "p-acme", "--tools", "--store", store])  # --tools needs a name
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main(["delete-procedure", "travel", "--store", store])
    assert exit_.value.code == 2
    assert main(["delete-procedure", "travel", "p-acme", "--team", "acme", "--store", store + ".missing"]) == 1
    assert "no SQLite store" in capsys.readouterr().err


def test_delete_removes_the_teams_procedure_only(store, capsys):
    assert main(["delete-procedure", "travel", "p-acme", "--team", "acme", "--store", store]) == 0
    assert capsys.readouterr().out == "deleted p-acme\n"
    assert stored(store, "acme") == []
    assert [p.id for p in stored(store, "globex")] == ["p-globex"]
    assert main(["delete-procedure", "travel", "p-acme", "--team", "acme", "--store", store]) == 1
    assert "has no procedure" in capsys.readouterr().err


def test_export_and_import_move_a_teams_procedures_to_another_store(store, tmp_path, capsys):
    path = tmp_path / "acme.jsonl"
    assert main(["export-procedures", "travel", str(path), "--team", "acme", "--store", store]) == 0
    assert capsys.readouterr().out == f"exported 1 procedure to {path}\n"
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["p-acme"]
    assert main(["export-procedures", "travel", "-", "--team", "acme", "--store", store]) == 0
    out = capsys.readouterr()
    assert out.out == path.read_text() and out.err == "exported 1 procedure to standard output\n"
    target = str(tmp_path / "target.db")
    assert main(["import-procedures", "travel", str(path), "--team", "acme", "--store", target]) == 0
    assert capsys.readouterr().out == "imported 1 procedure\n"
    [moved] = stored(target, "acme")
    [before] = stored(store, "acme")
    assert (moved.content, moved.metadata["uses"], moved.source_ids) == (before.content, 3, before.source_ids)
    assert stored(target, "globex") == [] and stored(target, "") == []
    # another team's file, or a broken one: one error line, exit status 1, nothing written
    assert main(["import-procedures", "travel", str(path), "--team", "globex", "--store", target]) == 1
    err = capsys.readouterr().err
    assert err == "error: line 1: a procedure of another agent or team; nothing was imported\n"
    path.write_text(path.read_text() + "{broken\n")
    assert main(["import-procedures", "travel", str(path), "--team", "acme", "--store", target]) == 1
    assert "line 2: not valid JSON" in capsys.readouterr().err
    assert stored(target, "globex") == [] and len(stored(target, "acme")) == 1
