"""`memoryscope-plugins migrate`: a whole store copied between SQLite, PostgreSQL and Elasticsearch
(the emulator), resumed after an interruption, refused into a non-empty target, counted by a dry run,
and verified."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.cli.main import main
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.storage import migrate as mig
from memoryscope_plugins.storage.base import LedgerChanges, MemoryFilter
from memoryscope_plugins.storage.core import StoreBase
from memoryscope_plugins.storage.sqlite_store import SQLiteStore
from memoryscope_plugins.types import (
    Entity,
    EntityKind,
    EntityMention,
    Memory,
    MemoryStatus,
    Message,
    ProfileValue,
    ToolCall,
)
from tests.storage.test_store_contract import es_server, pg_server  # noqa: F401 - the servers, once per session

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=2)))
FACTS = ["{u} keeps bees in the garden", "{u} moved to Lisbon in May", "{u} plays the cello on Sundays",
         "{u} is allergic to peanuts", "{u} works as a nurse at night", "{u} adopted a grey cat named Pixel",
         "{u} runs a half marathon every spring", "{u} learns Japanese with an app"]
USERS = ["anna", "ben", "chloé", "dev"]
QUERIES = ["Where does {u} live?", "what pets", "music on the weekend", "food allergy", "running a marathon",
           "night shift at the hospital", "Japanese lessons"]
_names = itertools.count()


def build_source(path, embedder) -> None:
    """Several users with vectors, an expired memory linked to the one that replaced it, a memory
    without a vector, messages pending, done and failed, tool calls, and an entity ledger and profile."""
    with MemoryScope(path=path, embedder=embedder, start_worker=False) as memory:
        for n, user in enumerate(USERS):
            made = [memory.add(user, fact.format(u=user.title()), created_at=T0 + timedelta(days=i),
                               metadata={"n": i, "tags": ["fact", user]}) for i, fact in enumerate(FACTS)]
            store = memory.store
            old, new = made[1], made[2]
            store.put([_replace(old, status=MemoryStatus.EXPIRED, superseded_by=new.id),
                       _replace(new, previous_id=old.id, source_ids=["m-1", "m-2"])])
            ids = store.append_messages(user, "assistant", [
                Message(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} of {user}",
                        timestamp=T0 + timedelta(minutes=i), metadata={"i": i}) for i in range(5 + n)],
                session_id="s1")
            store.mark_messages(ids[:2], "done")
            store.mark_messages(ids[2:3], "failed")
            store.append_messages(user, "scout", [  # the agent's tool calls: their statistics follow the log
                Message(role="tool", content="", timestamp=T0 + timedelta(hours=i),
                        tool_call=ToolCall(name=f"tool-{i % 2}", arguments={"q": user, "n": i} if i % 3 else {},
                                           error=f"failed for {user} at {i}" if i % 2 else None,
                                           duration_ms=None if i == 2 else 10.0 * (i + n)))
                for i in range(4 + n)], session_id="s2")
            store.put_ledger(_ledger(user, made))
    with SQLiteStore(path) as store:  # after the engine, which would embed it
        store.put([Memory(id=f"novec-{user}", user_id=user, agent_id="assistant", content=f"{user} no vector",
                          created_at=T0, updated_at=T0) for user in USERS])


def _ledger(user: str, made: list[Memory]) -> LedgerChanges:
    """Two entities with mentions (one not counted; Pixel of the kind `unknown`, as record finds a name
    without a model) and a profile value replaced by another."""
    pixel, lisbon = f"{user}-e-pixel", f"{user}-e-lisbon"
    return LedgerChanges(
        user, entities=[Entity(id=pixel, user_id=user, name="Pixel", kind=EntityKind.UNKNOWN, aliases=["the cat"],
                               created_at=T0, updated_at=T0),
                        Entity(id=lisbon, user_id=user, name="Lisboa", kind=EntityKind.PLACE, aliases=["Lisbon"],
                               created_at=T0, updated_at=T0, metadata={"country": "PT"})],
        mentions=[EntityMention(pixel, made[5].id, user, said_at=made[5].created_at),
                  EntityMention(lisbon, made[1].id, user, said_at=made[1].created_at, event_at=T0),
                  EntityMention(lisbon, made[2].id, user, said_at=made[2].created_at, counted=False)],
        profile=[ProfileValue(f"{user}-p1", user, "home", "Porto", valid_from=T0, valid_to=T0 + timedelta(days=1),
                              superseded_by=f"{user}-p2", source_ids=[made[1].id], created_at=T0, updated_at=T0),
                 ProfileValue(f"{user}-p2", user, "home", "Lisbon", valid_from=T0 + timedelta(days=1),
                              source_ids=[made[2].id], created_at=T0, updated_at=T0)])


def _replace(memory: Memory, **changes) -> Memory:
    values = {name: getattr(memory, name) for name in Memory.__slots__}
    values.update(changes)
    return Memory(**values)


@pytest.fixture(scope="module")
def source_file(tmp_path_factory, local_embedder):
    path = tmp_path_factory.mktemp("migrate") / "source.db"
    build_source(path, local_embedder)
    return path


@pytest.fixture
def pg_url(pg_server):  # noqa: F811
    return f"{pg_server.contract_dsn}#mig{next(_names)}"


@pytest.fixture
def es_url(es_server):  # noqa: F811
    return f"{es_server.url}#msp-migrate-{next(_names)}"


def everything(store: StoreBase):
    """Every record of the store: memories by id (with their vectors) and each user's message log
    and ledger (entities with their computed mention counts, mentions, profile values)."""
    memories: dict[str, Memory] = {}
    vectors: dict[str, np.ndarray] = {}
    logs: dict[str, list] = {}
    for user in sorted(store.users()):
        logs[user + "/ledger"] = [[(e.id, e.name, e.kind, e.aliases, e.metadata, e.mention_count)
                                   for e in store.entities(user)], store.mentions(user), store.profile_values(user)]
        for batch in store.iter_memories(user):
            memories.update((m.id, m) for m in batch)
            vectors.update(store.vectors_of(user, [m.id for m in batch]))
        logs[user] = [(m.id, m.state, m.agent_id, m.session_id, m.message) for b in store.iter_messages(user)
                      for m in b]
        logs[user + "/tools"] = [store.tool_counters(agent, user_id=user) for agent in ("assistant", "scout")]
        assert logs[user + "/tools"][1], "every user has tool calls"
    return memories, vectors, logs


def assert_same_contents(a: StoreBase, b: StoreBase, *, exact_vectors: bool = True) -> None:
    ma, va, la = everything(a)
    mb, vb, lb = everything(b)
    assert sorted(ma) == sorted(mb)
    for memory_id, memory in ma.items():
        assert mig.differing_fields(memory, mb[memory_id]) == [], memory_id
    assert sorted(va) == sorted(vb)
    for memory_id, vector in va.items():
        assert (np.array_equal(vector, vb[memory_id]) if exact_vectors
                else mig.same_vector(vector, vb[memory_id])), memory_id
    assert la == lb


def retrievals(path, embedder) -> list[list[tuple[str, float]]]:
    """Answers to a few queries per user from an engine on (a copy of) the SQLite file `path`
    (the engine embeds the memory that has no vector, so it works on a copy)."""
    work = path.with_name(path.stem + "-engine.db")
    shutil.copyfile(path, work)
    with MemoryScope(path=work, embedder=embedder, start_worker=False) as memory:
        return [[(s.memory.id, round(s.score, 9)) for s in memory.retrieve(user, q.format(u=user.title()))]
                for user in USERS for q in QUERIES]


def test_sqlite_to_postgres_to_sqlite_keeps_everything(source_file, pg_url, tmp_path, local_embedder):
    back = tmp_path / "back.db"
    first = mig.migrate(str(source_file), pg_url, batch_size=4)
    assert first.mismatches == [] and first.users == len(USERS)
    second = mig.migrate(pg_url, f"sqlite:///{back}", batch_size=3, sample=50)
    assert second.mismatches == []
    assert first.memories == second.memories == len(USERS) * (len(FACTS) + 1)
    assert first.vectors == len(USERS) * len(FACTS)
    assert first.ledger == second.ledger == len(USERS) * 7
    with SQLiteStore(source_file) as original, mig.open_url(pg_url) as middle, SQLiteStore(back) as copy:
        assert_same_contents(original, middle)
        assert_same_contents(original, copy)
        expired = copy.list("ben", MemoryFilter(statuses=(MemoryStatus.EXPIRED,)))
        assert len(expired) == 1 and expired[0].superseded_by is not None
        assert [m.id for m in copy.pending_messages("dev")] == [m.id for m in original.pending_messages("dev")]
        assert len(copy.pending_messages("dev")) == 5
    assert retrievals(back, local_embedder) == retrievals(source_file, local_embedder)


def test_elasticsearch_as_target_and_as_source(source_file, es_url, tmp_path):
    back = tmp_path / "back.db"
    assert mig.migrate(str(source_file), es_url, batch_size=5).mismatches == []
    assert mig.migrate(es_url, str(back), batch_size=5).mismatches == []
    with SQLiteStore(source_file) as original, mig.open_url(es_url) as middle, SQLiteStore(back) as copy:
        assert_same_contents(original, middle)
        assert_same_contents(original, copy)


class Stop(Exception):
    pass


def _stop_after(k: int):
    seen = []

    def hook(progress: mig.Progress) -> None:
        seen.append(progress.phase)
        if len(seen) == k:
            raise Stop
    return hook


@pytest.mark.parametrize("stop_at", [2, 5, 7, 13])  # in memories, in messages, in the ledger, between users
def test_an_interrupted_migration_resumes_nothing_twice_nothing_missing(source_file, tmp_path, stop_at):
    target = str(tmp_path / "target.db")
    with pytest.raises(Stop):
        mig.migrate(str(source_file), target, batch_size=4, on_batch=_stop_after(stop_at))
    with pytest.raises(mig.MigrationError, match="--resume"):
        mig.migrate(str(source_file), target)
    resumed = mig.migrate(str(source_file), target, batch_size=4, resume=True)
    assert resumed.resumed and resumed.mismatches == []
    with SQLiteStore(source_file) as original, SQLiteStore(target) as copy:
        assert_same_contents(original, copy)
        assert copy.get_meta(mig.MARKER_KEY) is not None
        assert mig.Progress.load(copy.get_meta(mig.MARKER_KEY)).finished


def test_a_kill_between_a_write_and_its_marker_rewrites_that_batch_once(source_file, pg_url, monkeypatch):
    """A real interruption can fall after a batch is written and before the marker says so: the
    rerun writes that batch again, by id, and no record is doubled."""
    calls = itertools.count(1)
    real = StoreBase.copy_messages

    def dies_on_the_third(self, messages):
        real(self, messages)
        if next(calls) == 3:
            raise Stop  # written, marker not yet saved
    monkeypatch.setattr(StoreBase, "copy_messages", dies_on_the_third)
    with pytest.raises(Stop):
        mig.migrate(str(source_file), pg_url, batch_size=2)
    monkeypatch.setattr(StoreBase, "copy_messages", real)
    resumed = mig.migrate(str(source_file), pg_url, batch_size=2, resume=True)
    assert resumed.mismatches == []
    with SQLiteStore(source_file) as original, mig.open_url(pg_url) as copy:
        assert_same_contents(original, copy)


def test_a_target_that_holds_memories_is_refused_unless_forced(source_file, tmp_path, capsys):
    target = tmp_path / "busy.db"
    with SQLiteStore(target) as busy:
        busy.put([Memory(id="mine", user_id="zoe", agent_id="a", content="already here", created_at=T0, updated_at=T0)])
    assert main(["migrate", "--from", str(source_file), "--to", str(target)]) == 1
    assert "already holds" in capsys.readouterr().err
    with SQLiteStore(target) as busy:
        assert busy.users() == ["zoe"]
    assert main(["migrate", "--from", str(source_file), "--to", str(target), "--force"]) == 0
    out = capsys.readouterr().out
    assert "copied 36 memories" in out and "verified" in out
    with SQLiteStore(target) as copy:
        assert sorted(copy.users()) == sorted(USERS + ["zoe"])
    # a finished migration is data like any other: a second run is refused too
    assert main(["migrate", "--from", str(source_file), "--to", str(target)]) == 1


def test_dry_run_counts_and_writes_nothing(source_file, tmp_path, pg_url, capsys):
    target = tmp_path / "never.db"
    assert main(["migrate", "--from", str(source_file), "--to", str(target), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 users, 36 memories (32 with vectors), 48 messages; nothing written" in out  # 22 tool calls
    assert "anna: memories active 8, expired 1; messages pending 2, done 6, failed 1" in out
    assert not target.exists()
    assert mig.migrate(str(source_file), pg_url, dry_run=True).memories == 36
    with mig.open_url(pg_url) as untouched:
        assert untouched.users() == [] and untouched.get_meta(mig.MARKER_KEY) is None


def test_verification_reports_what_differs(source_file, tmp_path):
    target = tmp_path / "target.db"
    mig.migrate(str(source_file), str(target))
    with SQLiteStore(source_file) as original, SQLiteStore(target) as copy:
        some = copy.list("anna", MemoryFilter(statuses=None), limit=100)
        copy.put([_replace(m, content=m.content + "!") for m in some], [np.zeros(0)] * len(some))
        copy.delete("ben", [copy.list("ben", MemoryFilter())[0].id])
        copy.mark_messages([copy.pending_messages("chloé")[0].id], "done")
        (moved, *_) = copy.mentions("dev")
        copy.put_ledger(LedgerChanges("dev", mentions=[EntityMention(moved.entity_id, moved.memory_id, "dev",
                                                                     said_at=T0 - timedelta(days=9),
                                                                     counted=moved.counted)]))
        found = mig.Migration(original, copy, source_label="a", target_label="b").verify(sample=100)
    assert any("'ben': memories" in line for line in found)
    assert any("'chloé': messages" in line for line in found)
    assert any("'anna'" in line and "content differs" in line for line in found)
    assert any("'anna'" in line and "vector differs" in line for line in found)
    assert [line for line in found if "'dev'" in line] == ["user 'dev': the mentions differ"]


@pytest.mark.parametrize("options", [{"batch_size": 0}, {"batch_size": -5}, {"batch_size": True},
                                     {"batch_size": "10"}, {"batch_size": 100_001}, {"sample": -1},
                                     {"sample": 2.5}, {"source_url": None}, {"target_url": 5}, {"target_url": " "}])
def test_bad_options_are_refused_before_anything_is_written(source_file, tmp_path, options):
    target = tmp_path / "never.db"
    arguments = {"source_url": str(source_file), "target_url": str(target), **options}
    with pytest.raises(ValidationError) as refused:
        mig.migrate(**arguments)
    assert next(iter(options)) in str(refused.value)
    assert not target.exists()


@pytest.mark.parametrize("option, value", [("--batch-size", "0"), ("--batch-size", "-5"), ("--batch-size", "ten"),
                                           ("--sample", "-1"), ("--batch-size", "100001")])
def test_the_command_line_refuses_bad_numbers_as_usage_errors(source_file, tmp_path, capsys, option, value):
    target = tmp_path / "never.db"
    with pytest.raises(SystemExit) as stop:
        main(["migrate", "--from", str(source_file), "--to", str(target), option, value])
    assert stop.value.code == 2
    assert f"argument {option}: " in capsys.readouterr().err
    assert not target.exists()


def test_paths_name_stores_too(source_file, tmp_path):
    assert mig.migrate(source_file, tmp_path / "copy.db").mismatches == []


@pytest.mark.parametrize("options", [[], ["--log-format", "json"]])
def test_an_elasticsearch_that_is_not_running_is_one_line_of_error(tmp_path, options):
    """Without -v the client library's retries and tracebacks stay out of it (issue 42, item 5)."""
    from tests.support.servers import free_port
    source = tmp_path / "source.db"
    with SQLiteStore(source) as store:
        store.put([Memory(id="m1", user_id="anna", agent_id="a", content="Anna keeps bees.")])
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    command = [sys.executable, "-m", "memoryscope_plugins", *options, "migrate", "--from", str(source), "--to", url]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: Elasticsearch error: ") and "Connection refused" in line
    verbose = subprocess.run([*command[:3], "-v", *command[3:]], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert verbose.returncode == 1 and "Retrying request after failure" in verbose.stderr  # -v tells the whole story
    assert ("Traceback" in verbose.stderr) == (options == [])  # JSON lines never hold one


def test_store_urls():
    assert mig.settings_for_url("/data/memory.db").path.as_posix() == "/data/memory.db"
    assert mig.settings_for_url("sqlite:///data/memory.db").path.as_posix() == "/data/memory.db"
    pg = mig.settings_for_url("postgresql://me:pw@db:5432/mem#team")
    assert (pg.backend, pg.url, pg.index_prefix) == ("postgres", "postgresql://me:pw@db:5432/mem", "team")
    es = mig.settings_for_url("https://es.example.com:9200")
    assert (es.backend, es.index_prefix) == ("elasticsearch", "memoryscope")
    assert mig.describe_url("postgresql://me:pw@db/mem") == "postgresql://me:***@db/mem"
    with pytest.raises(Exception, match="unknown store URL scheme"):
        mig.settings_for_url("mysql://db/mem")


def test_the_command_line_resumes_when_told(source_file, tmp_path, capsys):
    target = str(tmp_path / "target.db")
    with pytest.raises(Stop):
        mig.migrate(str(source_file), target, batch_size=4, on_batch=_stop_after(5))
    assert main(["migrate", "--from", str(source_file), "--to", target]) == 1
    assert "unfinished migration" in capsys.readouterr().err
    assert main(["migrate", "--from", str(source_file), "--to", target, "--resume", "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("resumed: ") and "verified" in out
    with SQLiteStore(source_file) as original, SQLiteStore(target) as copy:
        assert_same_contents(original, copy)
