"""The command line as a new operator meets it: shared options on either side of the command, serve's
options checked and their defaults shown, counts in words that agree, an unknown user named, a mistyped
store refused rather than created, and a reader that leaves early (``| head``) ending the command quietly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memoryscope_plugins.cli.main import build_parser, main
from memoryscope_plugins.cli.wording import count_of, memories
from tests.support.paths import ROOT, console_script


@pytest.mark.parametrize("before, after", [
    (["--config", "a.yaml", "serve", "--port", "1"], ["serve", "--port", "1", "--config", "a.yaml"]),
    (["--store", "m.db", "worker", "--once"], ["worker", "--once", "--store", "m.db"]),
    (["--config", "c.yaml", "--store", "m.db", "list", "anna"],
     ["list", "anna", "--store", "m.db", "--config", "c.yaml"]),
    (["--config", "j.yaml", "bench", "qa", "--data", "d.json"],
     ["bench", "qa", "--data", "d.json", "--config", "j.yaml"]),
    (["-v", "users"], ["users", "-v"]),
])
def test_shared_options_parse_the_same_before_or_after_the_command(before, after):
    parsed = [vars(build_parser().parse_args(argv)) for argv in (before, after)]
    assert parsed[0] == parsed[1]
    assert parsed[0]["config"] is not None or parsed[0]["store"] is not None or parsed[0]["verbose"]


def test_an_option_after_the_command_wins_and_an_absent_one_keeps_the_earlier():
    args = build_parser().parse_args(["--store", "first.db", "--config", "c.yaml", "users", "--store", "second.db"])
    assert (args.store, args.config, args.verbose) == ("second.db", "c.yaml", False)


def test_store_after_the_command_reaches_the_same_store(tmp_path, capsys):
    store = str(tmp_path / "cli.db")
    assert main(["add", "anna", "Anna keeps bees.", "--store", store]) == 0
    capsys.readouterr()
    for argv in (["--store", store, "list", "anna"], ["list", "anna", "--store", store]):
        assert main(argv) == 0
        assert "Anna keeps bees." in capsys.readouterr().out
    assert not (tmp_path / "home" / "memory.db").exists()  # the default store was never opened


@pytest.mark.parametrize("extra", [["--key-user", "anna"], ["--admin"]])
def test_serve_refuses_key_options_without_create_key(tmp_path, capsys, extra):
    keys = tmp_path / "keys.json"
    assert main(["serve", "--keys", str(keys), "--port", "1", *extra]) == 2
    assert "--create-key" in capsys.readouterr().err
    assert not keys.exists()  # nothing started: not even the first-start admin key was made


def test_serve_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["serve", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for shown in ("(default 127.0.0.1", "(default 8765)", "(default 1048576, 1 MiB)", "(default 20)",
                  "(default 40)", "(default 'default')", "$MEMORYSCOPE_HOME", "--config CONFIG"):
        assert shown in text, shown


def test_counts_agree_with_their_noun():
    assert [memories(n) for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert count_of(1, "LLM call") == "1 LLM call" and count_of(3, "LLM call") == "3 LLM calls"


def test_export_and_import_say_one_memory(tmp_path, capsys):
    store, file = str(tmp_path / "cli.db"), str(tmp_path / "anna.jsonl")
    assert main(["--store", store, "add", "anna", "Anna keeps bees."]) == 0
    capsys.readouterr()
    assert main(["--store", store, "export", "anna", file]) == 0
    assert capsys.readouterr().out == f"exported 1 memory to {file}\n"
    assert main(["--store", store, "import", "bob", file]) == 0
    assert capsys.readouterr().out.endswith("imported 1 memory\n")
    assert main(["--store", store, "add", "anna", "Anna sells honey."]) == 0
    capsys.readouterr()
    assert main(["--store", store, "export", "anna", file]) == 0
    assert capsys.readouterr().out == f"exported 2 memories to {file}\n"


@pytest.fixture(scope="module")
def anna_store(tmp_path_factory) -> str:
    """A store holding one user, anna, with one memory."""
    store = str(tmp_path_factory.mktemp("cli") / "cli.db")
    assert main(["--store", store, "add", "anna", "Anna keeps bees."]) == 0
    return store


# every command that reads or changes a user's records, with "nobody" as that user
ON_A_KNOWN_USER = [["list", "nobody"], ["retrieve", "nobody", "bees"], ["export", "nobody", "{folder}/out.jsonl"],
                   ["delete", "nobody", "m1"], ["delete-all", "nobody", "--yes"], ["rename-user", "nobody", "bob"],
                   ["entities", "nobody"], ["entity", "nobody", "Anna"], ["profile", "nobody"],
                   ["profile", "nobody", "--history", "home"], ["rename-entity", "nobody", "Anna", "Annie"],
                   ["add-alias", "nobody", "Anna", "Annie"], ["merge-entities", "nobody", "Anna", "Annie"],
                   ["delete-entity", "nobody", "Anna"], ["remove-profile-value", "nobody", "p1"]]


@pytest.mark.parametrize("command", ON_A_KNOWN_USER, ids=lambda command: "-".join(command[:3:2]))
def test_an_unknown_user_gets_one_answer_from_every_command(anna_store, tmp_path, capsys, command):
    capsys.readouterr()
    argv = [part.replace("{folder}", str(tmp_path)) for part in command]
    assert main(["--store", anna_store, *argv]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "", "error: no user 'nobody' in this store (`memoryscope-plugins users` lists them)\n")
    assert not (tmp_path / "out.jsonl").exists()
    assert main(["--store", anna_store, "users"]) == 0 and capsys.readouterr().out == "anna\n"  # nothing made


def test_a_known_user_without_records_of_a_kind_is_not_an_error(anna_store, capsys):
    capsys.readouterr()
    assert main(["--store", anna_store, "list", "anna", "--offset", "5"]) == 0  # a known user past its last page
    captured = capsys.readouterr()
    assert captured.out == "" and "no memories of 'anna' at offset 5" in captured.err
    assert main(["--store", anna_store, "entities", "anna"]) == 0
    assert capsys.readouterr().out == "'anna' has no entities yet\n"
    assert main(["--store", anna_store, "profile", "anna"]) == 0
    assert capsys.readouterr().out == "'anna' has no profile yet\n"


def test_a_user_with_only_a_profile_set_by_hand_is_known(tmp_path, capsys):
    store = str(tmp_path / "cli.db")
    assert main(["--store", store, "add", "anna", "Anna keeps bees."]) == 0
    assert main(["--store", store, "set-profile", "zoe", "home", "Lisbon"]) == 0  # no memory, no message
    capsys.readouterr()
    assert main(["--store", store, "profile", "zoe"]) == 0
    assert capsys.readouterr().out.startswith("home: Lisbon")


# every command that reads or changes what a store holds; only add, import, set-profile, chat, worker and
# serve may start a new store
ON_AN_EXISTING_STORE = [["stats"], ["users"], ["list", "anna"], ["retrieve", "anna", "tea"], ["export", "anna", "-"],
                        ["entities", "anna"], ["entity", "anna", "Anna"], ["profile", "anna"], ["reembed"],
                        ["delete", "anna", "m1"], ["delete-all", "anna", "--yes"], ["rename-user", "anna", "bob"],
                        ["rename-entity", "anna", "Anna", "Annie"], ["add-alias", "anna", "Anna", "Annie"],
                        ["merge-entities", "anna", "Anna", "Annie"], ["delete-entity", "anna", "Anna"],
                        ["remove-profile-value", "anna", "p1"]]


@pytest.mark.parametrize("command", ON_AN_EXISTING_STORE, ids=lambda command: command[0])
def test_a_mistyped_store_is_refused_not_created(tmp_path, capsys, command):
    typo = tmp_path / "typo.db"
    assert main(["--store", str(typo), *command]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: no SQLite store at {typo}\n")
    assert [path for path in tmp_path.rglob("*") if not path.is_dir()] == []  # nothing written anywhere


def test_reading_the_default_store_before_anything_was_recorded_creates_nothing(tmp_path, capsys):
    assert main(["users"]) == 1
    assert capsys.readouterr().err == f"error: no SQLite store at {tmp_path / 'home' / 'memory.db'}\n"
    assert not (tmp_path / "home" / "memory.db").exists()
    assert main(["add", "anna", "Anna keeps bees."]) == 0  # a command that records starts the store
    assert (tmp_path / "home" / "memory.db").exists()


def test_a_mistyped_store_ends_the_process_with_one_line_and_status_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "memoryscope_plugins", "--store", "typo.db", "stats"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "error: no SQLite store at typo.db\n")
    assert not (tmp_path / "typo.db").exists()


def deploy_settings(name: str) -> str:
    """The settings file `name` as docs/deploy.md shows it (its YAML block starting ``# name``)."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    return text.split(f"```yaml\n# {name}\n", 1)[1].split("```", 1)[0]


def test_an_operator_start_checks_the_settings_before_it_creates_or_runs_anything(tmp_path):
    """deploy.md's instance and worker, started without the model key: the same one line and exit status
    from serve, worker and any other command, no admin key made, no "worker running" said first."""
    for name in ("instance.yaml", "worker.yaml"):
        (tmp_path / name).write_text(deploy_settings(name), encoding="utf-8")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("MEMORYSCOPE_") and name != "OPENAI_API_KEY"}
    env["MEMORYSCOPE_HOME"] = str(tmp_path / "home")
    no_key = "error: no API key for https://api.openai.com/v1: pass api_key= or set OPENAI_API_KEY\n"
    for command in (["serve", "--config", "instance.yaml", "--keys", "keys.json", "--port", "1"],
                    ["worker", "--config", "worker.yaml"], ["stats", "--config", "instance.yaml"]):
        done = subprocess.run([console_script(), *command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", no_key), command
    assert not (tmp_path / "keys.json").exists() and not (tmp_path / "home").exists()


def test_a_reader_that_leaves_early_ends_the_command_quietly(tmp_path):
    store = str(tmp_path / "cli.db")
    assert main(["--store", store, "add", "anna", "Anna keeps bees."]) == 0
    child = subprocess.Popen([sys.executable, "-m", "memoryscope_plugins", "--store", store, "retrieve", "anna",
                              "bees", "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the command writes a byte
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err
