"""Export never damages what it writes to (memoryscope_plugins/safe_write.py).

A regular file is replaced atomically and keeps its mode; a symbolic link is written through; a
character device, a FIFO and ``-`` are written directly; anything else is refused; an invalid
path is a `ValidationError`. The device tests use a PRIVATE device node made with mknod in
tmp_path (root only: CI runs as root, and under CI=true a skip fails the run); the machine's own
/dev/null is never written to.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from memoryscope_plugins.errors import MemoryScopeError, ValidationError
from memoryscope_plugins.server.auth import KeyRing
from memoryscope_plugins.types import Memory

FACTS = ["Anna's dog is called Biscuit.", "Anna works as a nurse.", "Anna lives in Lyon."]
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="making a device node needs root (CI runs as root)")


@pytest.fixture
def anna(engine):
    for fact in FACTS:
        engine.add("anna", fact)
    return engine


def contents(text: str) -> set[str]:
    return {json.loads(line)["content"] for line in text.splitlines()}


def leftovers(*folders: Path) -> list[str]:
    return [p.name for folder in folders for p in folder.iterdir() if p.name.endswith(".part")]


def private_null(folder: Path) -> Path:
    node = folder / "null"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    return node


# -- regular files --------------------------------------------------------------------------------

def test_a_regular_file_is_replaced_atomically_and_keeps_its_mode(anna, tmp_path):
    target = tmp_path / "anna.jsonl"
    target.write_text("an older export\n", encoding="utf-8")
    os.chmod(target, 0o640)
    inode = target.stat().st_ino
    assert anna.export("anna", target) == 3
    assert contents(target.read_text(encoding="utf-8")) == set(FACTS)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino != inode  # a new file renamed into place, not rewritten in place
    assert leftovers(tmp_path) == []


def test_a_new_file_is_private(anna, tmp_path):
    target = tmp_path / "new.jsonl"
    assert anna.export("anna", str(target)) == 3
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert contents(target.read_text(encoding="utf-8")) == set(FACTS)


# -- symbolic links ---------------------------------------------------------------------------------

def test_a_symlink_is_written_through_and_kept(anna, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = elsewhere / "real.jsonl"
    real.write_text("old\n", encoding="utf-8")
    os.chmod(real, 0o644)
    link = tmp_path / "link.jsonl"
    link.symlink_to(os.path.join("elsewhere", "real.jsonl"))  # relative, resolved from the link's folder
    chain = tmp_path / "chain.jsonl"
    chain.symlink_to(link)
    for path in (link, chain):
        assert anna.export("anna", path) == 3
        assert link.is_symlink() and chain.is_symlink()
        assert os.readlink(link) == os.path.join("elsewhere", "real.jsonl")
        assert contents(real.read_text(encoding="utf-8")) == set(FACTS)
        assert stat.S_IMODE(real.stat().st_mode) == 0o644
    assert leftovers(tmp_path, elsewhere) == []


def test_a_dangling_symlink_creates_its_target_when_the_folder_exists(anna, tmp_path):
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "created.jsonl")
    assert anna.export("anna", link) == 3
    assert link.is_symlink()
    assert contents((tmp_path / "created.jsonl").read_text(encoding="utf-8")) == set(FACTS)
    nowhere = tmp_path / "nowhere.jsonl"
    nowhere.symlink_to(tmp_path / "no-such-folder" / "x.jsonl")
    with pytest.raises(ValidationError, match="does not exist"):
        anna.export("anna", nowhere)
    assert nowhere.is_symlink() and not (tmp_path / "no-such-folder").exists()


def test_a_symlink_loop_is_refused(anna, tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ValidationError, match="symbolic links"):
        anna.export("anna", tmp_path / "a")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


# -- devices, FIFOs, standard output ------------------------------------------------------------------

@needs_root
def test_a_character_device_is_written_directly_and_stays_a_device(anna, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    node = private_null(folder)
    link = folder / "to-null"
    link.symlink_to(node)
    for path in (node, link, str(node)):
        assert anna.export("anna", path) == 3
        info = os.lstat(node)
        assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3)
        assert stat.S_IMODE(info.st_mode) == 0o600
    assert link.is_symlink()
    assert sorted(p.name for p in folder.iterdir()) == ["null", "to-null"]  # no temporary file


def test_a_fifo_is_written_directly(anna, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    fifo = folder / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as reader:
            received.append(reader.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert anna.export("anna", fifo) == 3
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert contents(received[0].decode("utf-8")) == set(FACTS)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in folder.iterdir()) == ["pipe"]


def test_dash_is_standard_output(anna, capsysbinary):
    assert anna.export("anna", "-") == 3
    out = capsysbinary.readouterr().out.decode("utf-8")
    assert contents(out) == set(FACTS)


def test_cli_export_to_dash_keeps_the_count_off_standard_output(tmp_path, capsysbinary):
    from memoryscope_plugins.cli.main import main
    store = str(tmp_path / "cli.db")
    assert main(["--store", store, "add", "anna", "Anna's dog is called Biscuit."]) == 0
    capsysbinary.readouterr()
    assert main(["--store", store, "export", "anna", "-"]) == 0
    captured = capsysbinary.readouterr()
    assert contents(captured.out.decode("utf-8")) == {"Anna's dog is called Biscuit."}
    assert b"exported 1 memory to standard output" in captured.err


# -- refused --------------------------------------------------------------------------------------------

def test_a_socket_a_block_device_and_a_folder_are_refused(anna, tmp_path):
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # AF_UNIX paths are short
        sock_path = os.path.join(short, "s")
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(sock_path)
            with pytest.raises(ValidationError, match="socket"):
                anna.export("anna", sock_path)
            assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    with pytest.raises(ValidationError, match="folder"):
        anna.export("anna", tmp_path)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        block = tmp_path / "block"
        os.mknod(block, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
        with pytest.raises(ValidationError, match="block device"):
            anna.export("anna", block)
        assert stat.S_ISBLK(os.lstat(block).st_mode)


@pytest.mark.parametrize("path", [
    "bad\x00name.jsonl", "x" * 300 + ".jsonl", "/".join(["d" * 200] * 30), "", "\ud800.jsonl",
    "no-such-folder/x.jsonl", "file.txt/x.jsonl", "folder/", b"bytes.jsonl", 5, None, 1.5,
])
def test_an_invalid_path_is_a_validation_error_and_writes_nothing(anna, tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("keep\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValidationError):
        anna.export("anna", path)
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "folder") == []
    assert (tmp_path / "file.txt").read_text(encoding="utf-8") == "keep\n"


def test_a_failed_write_to_a_fifo_is_ours(anna, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def read_and_close() -> None:
        with open(fifo, "rb") as reader:
            reader.read(1)

    reader = threading.Thread(target=read_and_close, daemon=True)
    reader.start()
    # far more than a pipe holds, so the export is still writing when the reader has gone
    anna.store.put([Memory(id=f"m{n}", user_id="anna", agent_id="assistant", content="x" * 1000)
                    for n in range(400)])
    with pytest.raises(MemoryScopeError, match="cannot write"):
        anna.export("anna", fifo)
    reader.join(timeout=60)


# -- the server's key file follows the same rules ------------------------------------------------------

def test_the_key_file_is_written_through_a_symlink_private_and_never_to_a_stream(tmp_path):
    ring = KeyRing()
    ring.create("acme", admin=True)
    real = tmp_path / "real-keys.json"
    link = tmp_path / "keys.json"
    link.symlink_to(real)
    ring.save(link)
    assert link.is_symlink() and len(KeyRing.load(link).keys) == 1
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    os.chmod(real, 0o644)
    ring.save(link)
    assert stat.S_IMODE(real.stat().st_mode) == 0o600  # it holds key hashes: always private
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValidationError, match="FIFO"):
        ring.save(fifo)
    with pytest.raises(ValidationError):
        ring.save(tmp_path / "bad\x00name")
