"""Property-based tests of the public API (Hypothesis), on SQLite and PostgreSQL.

Each example is a short program of public calls with random valid and invalid arguments (wrong
types, blank, huge and lone-surrogate strings, extreme dates, malformed metadata and import
lines). Properties, checked after every call:

- a call either succeeds or raises one of our errors (`MemoryScopeError`), never a builtin one;
- a failed import stores nothing (all or nothing per call);
- afterwards, every user's `retrieve`, `list` and `export` still work, and the export is one valid
  JSON object per line that imports back.

The engine (and its store) lives for the whole test, so whatever one example stores stays for
the next ones: a value that passes validation but breaks later calls is caught across examples.
The number of examples is bounded (settings profile below) so the suite takes well under a
minute per backend; `derandomize` makes CI runs repeatable.
"""

from __future__ import annotations

import io
import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from memoryscope_plugins import MemoryScope  # noqa: E402
from memoryscope_plugins.errors import MemoryScopeError  # noqa: E402
from tests.support import servers  # noqa: E402

settings.register_profile("public-api", max_examples=100, deadline=None,
                          derandomize=True, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
PROFILE = settings.get_profile("public-api")

USERS = ["anna", "bob", "用户三"]
STATS: dict[str, Any] = {"examples": 0, "calls": 0, "raised": 0, "checks": 0, "ok": {}}

# -- values -------------------------------------------------------------------------------------
LONE_SURROGATE = "bad \udc80 text"
junk = st.one_of(st.integers(), st.floats(allow_nan=True), st.binary(max_size=8), st.none(), st.booleans(),
                 st.lists(st.integers(), max_size=2), st.just({"a": 1}), st.just(object()))
texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "   ", "I moved to Lisbon last May.", "我上周三去了杭州。", "a\x00b", LONE_SURROGATE,
                     "x" * 100_001, "next year", "in 100 years", "明年"]),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
)
any_text = st.one_of(texts, texts, junk)
names = st.one_of(st.none(), st.text(max_size=20), st.just("n" * 10_000), st.just(LONE_SURROGATE), junk)
user_ids = st.one_of(st.sampled_from(USERS), st.sampled_from(USERS), st.sampled_from(USERS),
                     st.sampled_from(["", " ", "u" * 257, "a\x00", LONE_SURROGATE]), junk)

offsets = st.sampled_from([timezone.utc, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12)),
                           timezone(timedelta(hours=5, minutes=30)), None])
moments = st.builds(lambda d, tz: d.replace(tzinfo=tz),
                    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59)), offsets)
time_strings = st.one_of(
    st.sampled_from(["9999-12-31T23:00:00-12:00", "0001-01-01T00:00:00+14:00", "0001-01-01", "9999-12-31",
                     "2024-02-30", "yesterday", "", "2024-05-01T10:00:00Z", "2023-05-08T14:30:00+08:00"]),
    moments.map(lambda m: m.isoformat()))
times = st.one_of(st.none(), moments, time_strings, junk)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**53, max_value=2**53),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
metadata = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    st.sampled_from([{"k": float("nan")}, {"k": {1, 2}}, {1: "int key"}, {"k": LONE_SURROGATE},
                     {"k": "a\x00"}, {"big": "m" * 70_000}, {"t": (1, 2)}, {"d": datetime(2024, 1, 1)}]),
    junk)
type_values = st.one_of(st.sampled_from(["turn", "observation", "insight", "custom", "fact", ""]), junk)
types_arg = st.one_of(st.none(), type_values, st.lists(type_values, max_size=3), st.just("turn"))
small_ints = st.one_of(st.integers(min_value=-2, max_value=20), st.sampled_from([0, 10**19, -10**19]), junk)

message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", "bot", 3]),
                           "content": any_text},
                          optional={"name": names, "timestamp": times, "metadata": metadata}),
    st.tuples(st.sampled_from(["user", "assistant"]), any_text),
    junk)
messages = st.one_of(st.lists(message, min_size=0, max_size=3), message, junk)


# valid values only: most calls use these, so the store fills with memories later calls must survive
good_texts = st.one_of(st.text(min_size=1, max_size=40).filter(lambda t: t.strip() and "\x00" not in t),
                       st.sampled_from(["I moved to Lisbon last May.", "我上周三去了杭州。", "next year", "明年",
                                        "We met on 2023-05-08 for dinner."]))
good_users = st.sampled_from(USERS)
good_moments = st.builds(lambda d, tz: d.replace(tzinfo=tz),
                         st.datetimes(min_value=datetime(2, 1, 2), max_value=datetime(9998, 12, 30)), offsets)
good_times = st.one_of(st.none(), good_moments, good_moments.map(lambda m: m.isoformat()),
                       st.sampled_from(["2024-05-01T10:00:00Z", "9998-12-30T11:00:00-12:00", "0002-01-01T00:00:00"]))
good_metadata = st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=4))
good_types = st.one_of(st.none(), st.sampled_from(["turn", "observation", "insight", "custom"]),
                       st.lists(st.sampled_from(["turn", "observation", "insight", "custom"]), min_size=1, max_size=2))
good_messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": good_texts},
                                               optional={"name": st.one_of(st.none(), st.sampled_from(["Anna", "Bob"])),
                                                         "timestamp": good_times, "metadata": good_metadata}),
                         min_size=1, max_size=3)


def _record_line(draw, clean: bool) -> dict:
    fields: tuple[tuple[str, st.SearchStrategy[Any]], ...]
    if clean:
        line = {"id": draw(st.uuids()).hex, "content": draw(good_texts)}
        fields = (("type", st.sampled_from(["turn", "observation", "insight", "custom"])),
                  ("status", st.sampled_from(["active", "expired"])), ("created_at", good_times),
                  ("event_start", good_times), ("event_end", good_times), ("metadata", good_metadata),
                  ("source_ids", st.lists(st.uuids().map(lambda u: u.hex), max_size=2)),
                  ("speaker", st.sampled_from(["Anna", None])), ("user_id", good_users))
    else:
        line = {"id": draw(st.one_of(st.uuids().map(lambda u: u.hex), any_text)),
                "content": draw(st.one_of(texts, texts, junk))}
        fields = (("type", type_values), ("status", st.sampled_from(["active", "expired", "gone", 4])),
                  ("created_at", times), ("event_start", times), ("event_end", times),
                  ("metadata", metadata), ("source_ids", st.one_of(st.lists(any_text, max_size=2), junk)),
                  ("speaker", names), ("agent_id", user_ids), ("role", st.sampled_from(["user", "x", None])),
                  ("user_id", user_ids), ("unknown_field", st.integers()))
    for field, values in fields:
        if draw(st.integers(0, 2)) == 0:
            line[field] = draw(values)
    return line


@st.composite
def import_sources(draw, clean: bool):
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        if not clean and draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["{", "[]", "null", "\"text\"", "{\"id\": \"x\"}"])))
        else:
            try:
                lines.append(json.dumps(_record_line(draw, clean or draw(st.booleans())), ensure_ascii=False,
                                        default=str))
            except (TypeError, ValueError):
                lines.append("{")
    text = "\n".join(lines) + "\n"
    form = draw(st.integers(0, 3 if not clean else 1))
    if form == 0:
        return io.StringIO(text)
    if form == 1:
        try:
            return io.BytesIO(text.encode("utf-8"))
        except UnicodeEncodeError:
            return io.BytesIO(b"\xff\xfe not utf-8\n")
    if form == 2:
        return io.BytesIO(b'{"id": "a", "content": "\xff"}\n')
    return draw(junk)


# export destinations and import sources given as paths, in a scratch folder (SCRATCH, set by the
# fixture below): a file, one in a subfolder, a symbolic link to it, and invalid ones (NUL, a name
# or path too long, a folder, a missing folder, a file used as a folder, empty, not encodable)
SCRATCH: list[Path] = []
PATH_NAMES = ["out.jsonl", "sub/out.jsonl", "link.jsonl", "bad\x00name.jsonl", "n" * 300, "/".join(["d" * 200] * 25),
              "sub", ".", "missing/x.jsonl", "out.jsonl/x", "loop", f"{LONE_SURROGATE}.jsonl", "sub/"]
file_paths = st.one_of(
    st.sampled_from(PATH_NAMES).map(lambda name: SCRATCH[0] / name),
    st.sampled_from(PATH_NAMES).map(lambda name: f"{SCRATCH[0]}/{name}"),
    st.sampled_from(["", "nul\x00", b"bytes.jsonl", b"\x00"]))


@pytest.fixture(scope="module", autouse=True)
def scratch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("paths")
    (folder / "sub").mkdir()
    (folder / "link.jsonl").symlink_to(folder / "sub" / "out.jsonl")
    (folder / "loop").symlink_to(folder / "loop")
    SCRATCH[:] = [folder]
    yield folder
    SCRATCH.clear()


def _existing_id(memory: MemoryScope, user) -> str:
    try:
        found = memory.list(user, limit=1) if user in USERS else []
    except MemoryScopeError:
        found = []
    return found[0].id if found else uuid.uuid4().hex


@st.composite
def calls(draw):
    """One public call: (name, function of the engine). Six calls in ten use valid arguments only;
    the others mix in invalid ones."""
    clean = draw(st.integers(0, 9)) < 6

    def pick(good, mixed):
        return draw(good if clean else st.one_of(good, mixed))

    op = draw(st.sampled_from(["record", "add", "import", "retrieve", "export", "update", "delete", "list",
                               "record", "add", "import", "get", "count"]))
    user = pick(good_users, user_ids)
    if op == "record":
        args = {"messages": pick(good_messages, messages), "agent_id": pick(st.just("assistant"), user_ids),
                    "session_id": pick(st.one_of(st.none(), st.just("s1")), user_ids)}
        return op, lambda m: m.record(user, **args)
    if op == "add":
        args = {"content": pick(good_texts, any_text), "type": pick(st.sampled_from(["custom", "observation"]),
                                                                   type_values),
                    "event_start": pick(good_times, times), "event_end": pick(good_times, times),
                    "created_at": pick(good_times, times), "metadata": pick(good_metadata, metadata)}
        return op, lambda m: m.add(user, **args)
    if op == "retrieve":
        args = {"query": pick(good_texts, any_text), "types": pick(good_types, types_arg),
                    "top_k": pick(st.one_of(st.none(), st.integers(1, 20)), small_ints), "now": pick(good_times, times),
                    "time_range": pick(st.one_of(st.none(), st.tuples(good_times, st.none())),
                                    st.one_of(st.tuples(times, times), junk)),
                    "language": pick(st.sampled_from([None, "en", "zh"]), st.sampled_from(["fr", 1])),
                    "include_expired": pick(st.sampled_from([None, True, False]), st.just("yes"))}
        return op, lambda m: m.retrieve(user, **args)
    if op == "list":
        args = {"types": pick(good_types, types_arg), "limit": pick(st.integers(1, 200), small_ints),
                    "offset": pick(st.integers(0, 5), small_ints)}
        return op, lambda m: m.list(user, **args)
    if op == "count":
        return op, lambda m: m.count(user)
    if op in ("get", "delete"):
        guess = pick(st.just(None), any_text)
        return op, lambda m: getattr(m, op)(user, guess if guess is not None else _existing_id(m, user))
    if op == "update":
        args = {"content": pick(st.one_of(st.none(), good_texts), any_text),
                    "status": pick(st.sampled_from([None, "active", "expired"]), st.sampled_from(["gone", 1])),
                    "metadata": pick(good_metadata, metadata), "event_start": pick(good_times, times),
                    "event_end": pick(good_times, times)}
        return op, lambda m: m.update(user, _existing_id(m, user), **args)
    if op == "import":
        source = draw(import_sources(clean))
        batch = pick(st.integers(1, 300), small_ints)
        return op, lambda m: m.import_(user, source, batch_size=batch)
    # (paths as export destinations and import sources: test_export_and_import_paths_raise_only_our_errors)
    target = pick(st.sampled_from(["text", "bytes"]), st.just("junk"))
    return op, lambda m: m.export(user, io.StringIO() if target == "text" else io.BytesIO() if target == "bytes"
                                  else 5)


# -- the property --------------------------------------------------------------------------------

def _every_user_still_works(memory: MemoryScope) -> None:
    for user in USERS:
        memory.retrieve(user, "what do you remember about me and my plans?")
        memory.retrieve(user, "上周三我做了什么")
        listed = memory.list(user, limit=10_000)
        out = io.StringIO()
        exported = memory.export(user, out)
        assert exported == len(listed)
        for line in out.getvalue().splitlines():  # no other line breaks inside a line
            assert isinstance(json.loads(line), dict)
        STATS["checks"] += 1
    folder = SCRATCH[0]
    assert (folder / "sub").is_dir() and (folder / "link.jsonl").is_symlink()  # nothing damaged by an export
    assert not list(folder.rglob("*.part"))  # nor a temporary file left


def _export_imports_back(memory: MemoryScope, user: str) -> None:
    """The export imports back unchanged in number (ids are kept, so nothing is duplicated)."""
    out = io.StringIO()
    exported = memory.export(user, out)
    assert memory.import_(user, io.StringIO(out.getvalue())) == exported
    assert memory.count(user) == exported


def run_program(memory: MemoryScope, program) -> None:
    STATS["examples"] += 1
    for name, call in program:
        before = {u: memory.count(u) for u in USERS} if name == "import" else None
        STATS["calls"] += 1
        try:
            call(memory)
            STATS["ok"][name] = STATS["ok"].get(name, 0) + 1
        except MemoryScopeError:
            STATS["raised"] += 1
            if before is not None:  # a failed import stores nothing
                assert {u: memory.count(u) for u in USERS} == before
        _every_user_still_works(memory)
    _export_imports_back(memory, USERS[STATS["examples"] % len(USERS)])


# -- backends ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sqlite_engine(tmp_path_factory, local_embedder):
    memory = MemoryScope(path=tmp_path_factory.mktemp("props") / "memory.db", embedder=local_embedder)
    yield memory
    memory.close()


@pytest.fixture(scope="module")
def postgres_engine(local_embedder):
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip("postgres backend: psycopg[binary,pool] is not installed")
    try:
        with servers.postgres_server() as server:
            from memoryscope_plugins.storage.postgres_store import PostgresStore
            dsn = server.create_database("props")
            store = PostgresStore(dsn, embedding_model=local_embedder.name, table_prefix="props_", pool_max_size=4)
            memory = MemoryScope(store=store, embedder=local_embedder)
            yield memory
            memory.close()
    except servers.ServerUnavailable as exc:
        pytest.skip(f"postgres backend: embedded PostgreSQL could not start here: {exc}")


@settings(PROFILE)
@given(program=st.lists(calls(), min_size=1, max_size=6))
def test_public_api_on_sqlite(sqlite_engine, program):
    run_program(sqlite_engine, program)


@settings(PROFILE, max_examples=60)
@given(program=st.lists(calls(), min_size=1, max_size=6))
def test_public_api_on_postgres(postgres_engine, program):
    run_program(postgres_engine, program)


@settings(PROFILE, max_examples=80)
@given(path=file_paths, user=good_users)
def test_export_and_import_paths_raise_only_our_errors(sqlite_engine, path, user):
    """Every path given to export and import, valid or not, either works or raises our error."""
    for call in (lambda: sqlite_engine.export(user, path), lambda: sqlite_engine.import_(user, path)):
        try:
            call()
        except MemoryScopeError:
            STATS["raised"] += 1
    _every_user_still_works(sqlite_engine)


PUBLIC_CALLS = {"record", "add", "import", "retrieve", "export", "update", "delete", "list", "get", "count"}


def test_generated_programs_reach_every_public_call(sqlite_engine, capsys):
    """The properties above hold trivially if the generated programs never get past validation, so:
    every kind of public call succeeded at least once, and some calls were refused with our errors.
    Hypothesis is derandomized here (PROFILE), so the same programs run every time. Run alone
    (``-k``), it runs the SQLite property first. The counts are printed (-s, or the CI log)."""
    if not STATS["examples"]:
        test_public_api_on_sqlite(sqlite_engine)
    with capsys.disabled():
        print(f"\n[public-api properties] {STATS['examples']} examples, {STATS['calls']} calls "
              f"({STATS['raised']} refused with our errors), {STATS['checks']} per-user checks; "
              f"succeeded by kind: {STATS['ok']}")
    assert STATS["calls"] > STATS["examples"] > 0
    assert set(STATS["ok"]) == PUBLIC_CALLS, f"never succeeded: {PUBLIC_CALLS - set(STATS['ok'])}"
    assert 0 < STATS["raised"] < STATS["calls"]
    assert STATS["checks"] >= STATS["examples"] * len(USERS)
