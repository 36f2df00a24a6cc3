"""The entity ledger's and the profile's commands, on a real store: read as text and as JSON, edited."""

from __future__ import annotations

import json

import pytest

from memoryscope_plugins.cli.main import main
from memoryscope_plugins.types import EntityKind


@pytest.fixture
def store(tmp_path, capsys):
    path = str(tmp_path / "cli.db")
    from memoryscope_plugins import MemoryScope
    with MemoryScope(path=path) as memory:
        memory.record("anna", [{"role": "user", "name": "Anna", "content": "Hi, I'm Anna."},
                               {"role": "assistant", "content": "Hello Anna! 你好，安娜。"}])
    capsys.readouterr()
    return path


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_entities_and_entity_as_text_and_json(store, capsys):
    # her own "Hi, I'm Anna." is not a mention of her (docs/entities.md, Speakers)
    assert "Anna  [person]  1 mention, first " in _run(capsys, "entities", "anna", "--store", store)
    listed = json.loads(_run(capsys, "entities", "anna", "--json", "--kind", "person", "--store", store))
    assert [(e["name"], e["kind"], e["mention_count"]) for e in listed] == [("Anna", "person", 1)]
    details = json.loads(_run(capsys, "entity", "anna", "anna", "--json", "--store", store))
    assert details["entity"]["name"] == "Anna" and [m["content"] for m in details["memories"]] == [
        "Hello Anna! 你好，安娜。"]
    assert len(details["timeline"]) == 1
    assert "Hello Anna!" in _run(capsys, "entity", "anna", "Anna", "--bucket", "week", "--store", store)
    assert main(["entities", "nobody", "--store", store]) == 1  # an unknown user, not a user without entities
    assert "no user 'nobody' in this store" in capsys.readouterr().err


def test_entity_edits(store, capsys):
    assert "(also 安娜)" in _run(capsys, "add-alias", "anna", "Anna", "安娜", "--store", store)
    assert "Anna Lee (also Anna, 安娜)" in _run(capsys, "rename-entity", "anna", "Anna", "Anna Lee", "--store", store)
    assert "1 link to memories" in _run(capsys, "delete-entity", "anna", "安娜", "--store", store)
    assert main(["entity", "anna", "Anna", "--store", store]) == 1
    assert "no entity" in capsys.readouterr().err
    assert main(["merge-entities", "anna", "X", "Y", "--store", store]) == 1
    assert main(["list", "anna", "--store", store]) == 0 and "Hello Anna!" in capsys.readouterr().out  # memories kept


def test_profile_commands(store, capsys):
    assert "has no profile yet" in _run(capsys, "profile", "anna", "--store", store)
    assert "home: 成都" in _run(capsys, "set-profile", "anna", "住址", "成都", "--store", store)
    _run(capsys, "set-profile", "anna", "home", "Leeds", "--store", store)
    _run(capsys, "set-profile", "anna", "likes", "tea", "--add", "--store", store)
    _run(capsys, "set-profile", "anna", "likes", "hiking", "--add", "--store", store)
    now = json.loads(_run(capsys, "profile", "anna", "--json", "--store", store))
    assert [(v["key"], v["value"]) for v in now] == [("home", "Leeds"), ("likes", "tea"), ("likes", "hiking")]
    history = json.loads(_run(capsys, "profile", "anna", "--history", "住址", "--json", "--store", store))
    assert [v["value"] for v in history] == ["成都", "Leeds"] and history[0]["valid_to"] is not None
    removed = _run(capsys, "remove-profile-value", "anna", now[1]["id"], "--store", store)
    assert removed.startswith("likes: tea") and "now]" not in removed
    assert "tea" not in _run(capsys, "profile", "anna", "--store", store)
    assert main(["remove-profile-value", "anna", "nope", "--store", store]) == 1
    assert main(["set-profile", "anna", "home", " ", "--store", store]) == 1


def test_names_keys_and_kinds_are_refused_with_the_option_the_command_took(store, capsys):
    assert main(["add-alias", "anna", "Anna", "An\u202ena", "--store", store]) == 1
    assert capsys.readouterr().err.startswith("error: alias holds U+202E, a format character")
    assert main(["add-alias", "anna", "Anna", "🐱🐱", "--store", store]) == 1
    assert capsys.readouterr().err.startswith("error: alias holds fewer than 2 letters or digits")
    assert main(["profile", "anna", "--history", "home\n", "--store", store]) == 1
    assert capsys.readouterr().err.startswith("error: --history holds U+000A, a control character")
    assert main(["set-profile", "anna", "home\n", "Leeds", "--store", store]) == 1
    assert capsys.readouterr().err.startswith("error: key holds U+000A")
    with pytest.raises(SystemExit) as exited:
        main(["entities", "anna", "--kind", "alien", "--store", store])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --kind: invalid choice: 'alien'" in err and "None" not in err
    assert all(kind.value in err for kind in EntityKind)
    assert "Anna  [person]" in _run(capsys, "entities", "anna", "--kind", "Person", "--store", store)
