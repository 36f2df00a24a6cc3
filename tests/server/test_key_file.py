"""A --keys file that is not a key ring is an ``error:`` line naming it, never a traceback; a missing one
is no keys (the first start or --create-key makes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")

from memoryscope_plugins.cli.main import main  # noqa: E402
from memoryscope_plugins.errors import ConfigError  # noqa: E402
from memoryscope_plugins.server.auth import KeyRing, hash_key  # noqa: E402
from memoryscope_plugins.server.cli import _key_ring  # noqa: E402

GOOD_ENTRY = {"key_hash": "ab" * 32, "tenant": "acme", "users": [], "admin": False, "name": ""}
# name -> (content written to the file, or None for a folder; a word the error must say)
BAD_FILES: dict[str, tuple[str | bytes | None, str]] = {
    "not_json": ("not json", "not JSON"),
    "empty": ("", "not JSON"),
    "not_utf8": (b"\xff\xfe{", "not UTF-8"),
    "folder": (None, "Is a directory"),
    "a_list": ("[]", "not a key ring"),
    "no_keys": ("{}", "not a key ring"),
    "keys_not_a_list": ('{"keys": {"a": 1}}', "not a key ring"),
    "entry_not_an_object": ('{"keys": [5]}', "key entry 1 is not an object"),
    "entry_without_key_hash": ('{"keys": [{"tenant": "a"}]}', 'key entry 1 has no "key_hash"'),
    "entry_without_tenant": (json.dumps({"keys": [GOOD_ENTRY, {"key_hash": "cd" * 32}]}),
                             'key entry 2 has no "tenant"'),
    "users_not_a_list": (json.dumps({"keys": [{**GOOD_ENTRY, "users": "anna"}]}), '"users"'),
    "admin_a_string": (json.dumps({"keys": [{**GOOD_ENTRY, "admin": "false"}]}), '"admin"'),
}
COMMANDS = {"list": ["--list-keys"], "revoke": ["--revoke-key", "ab" * 8], "create": ["--create-key", "acme"]}


def bad_key_file(folder: Path, name: str) -> Path:
    content = BAD_FILES[name][0]
    path = folder / f"{name}.json"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def snapshot(path: Path) -> bytes | None:
    return None if path.is_dir() else path.read_bytes()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", BAD_FILES)
def test_a_key_file_that_is_not_a_key_ring_is_an_error_line(tmp_path, capsys, name, command):
    path = bad_key_file(tmp_path, name)
    before = snapshot(path)
    assert main(["serve", "--keys", str(path), *COMMANDS[command]]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: cannot read the key file {path}: ")
    assert BAD_FILES[name][1] in captured.err and "Traceback" not in captured.err
    assert snapshot(path) == before  # nothing replaced it, not even --create-key


@pytest.mark.parametrize("name", ["not_json", "folder", "entry_without_key_hash"])
def test_a_server_start_refuses_a_bad_key_file_and_creates_no_key(tmp_path, name):
    path = bad_key_file(tmp_path, name)
    before = snapshot(path)
    with pytest.raises(ConfigError, match="cannot read the key file"):
        _key_ring(path)  # what `serve` calls to load (or, on a first start, make) its keys
    assert snapshot(path) == before


def test_a_missing_key_file_is_no_keys_and_create_key_makes_it(tmp_path, capsys):
    path = tmp_path / "home" / "keys.json"
    assert KeyRing.load(path).keys == []
    assert main(["serve", "--keys", str(path), "--list-keys"]) == 0
    assert capsys.readouterr().out == "" and not path.exists()
    assert main(["serve", "--keys", str(path), "--create-key", "acme", "--admin"]) == 0
    key = capsys.readouterr().out.strip()
    assert main(["serve", "--keys", str(path), "--list-keys"]) == 0
    assert f"{hash_key(key)[:12]}  tenant=acme  users=*  admin=True" in capsys.readouterr().out


def test_a_key_file_written_by_hand_with_optional_fields_left_out_loads(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{"key_hash": hash_key("msk_x"), "tenant": "acme", "users": None}]}))
    found = KeyRing.load(path).lookup("msk_x")
    assert found is not None and found.tenant == "acme" and found.users == () and not found.admin


def test_a_running_ring_keeps_its_keys_when_the_file_turns_bad(tmp_path):
    path = tmp_path / "keys.json"
    ring = KeyRing()
    key = ring.create("acme")
    ring.save(path)
    running = KeyRing.load(path)
    for content in ("not json", "[]", '{"keys": [{"tenant": "a"}]}', '{"keys": [5]}'):
        path.write_text(content, encoding="utf-8")
        running.refresh(force=True)  # logged and retried, not raised: the keys in force stay
        assert running.lookup(key) is not None
    ring.save(path)
    running.refresh(force=True)
    assert running.lookup(key) is not None
