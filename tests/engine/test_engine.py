"""The engine's public API on the real embedded store and the real local embedder."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from memoryscope_plugins import MemoryScope, MemoryStatus, MemoryType, Message, NotFoundError, Settings, ValidationError
from memoryscope_plugins.errors import ConfigError

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=timezone.utc)


def _conversation(engine: MemoryScope, user: str = "anna") -> list[str]:
    return engine.record(user, [
        {"role": "user", "content": "I'm allergic to peanuts.", "name": "Anna", "timestamp": T0},
        {"role": "assistant", "content": "Noted, no peanuts.", "timestamp": T0 + timedelta(seconds=5)},
        {"role": "user", "content": "My sister Clara lives in Porto.", "name": "Anna",
         "timestamp": T0 + timedelta(seconds=10)},
    ])


def test_record_then_retrieve_finds_the_fact(engine):
    ids = _conversation(engine)
    assert len(ids) == 3
    result = engine.retrieve("anna", "What food is Anna allergic to?", now=T0 + timedelta(days=3))
    assert result.memories[0].memory.content == "I'm allergic to peanuts."
    assert result.memories[0].memory.speaker == "Anna"
    assert "[2026-05-04 Mon] Anna: I'm allergic to peanuts." in result.context
    assert {"embed_ms", "search_ms", "total_ms"} <= set(result.timings_ms)
    assert all(m.score > 0 for m in result.memories)


def test_content_is_stored_exactly(engine):
    text = "  Ünïcode CASE kept — 我喜欢吃火锅!  " + "x" * 5000
    engine.record("anna", [{"role": "user", "content": text}])
    [memory] = engine.list("anna")
    assert memory.content == text


def test_users_never_see_each_other(engine):
    engine.record("anna", [("user", "My bank PIN hint is the blue door.")])
    engine.record("bob", [("user", "I like the blue door of my house.")])
    for memory in engine.retrieve("bob", "blue door PIN hint", top_k=50).memories:
        assert memory.memory.user_id == "bob"
    assert [m.user_id for m in engine.list("bob")] == ["bob"]
    with pytest.raises(NotFoundError):
        engine.get("bob", engine.list("anna")[0].id)
    with pytest.raises(NotFoundError):
        engine.delete("bob", engine.list("anna")[0].id)
    assert engine.count("anna") == 1


def test_unknown_user_gets_nothing_not_an_error(engine):
    result = engine.retrieve("nobody", "anything at all")
    assert result.memories == [] and result.context == ""
    assert engine.list("nobody") == []
    assert engine.delete_all("nobody") == 0


@pytest.mark.parametrize("bad_user", ["", "   ", None, 42, "u" * 300, "nul\x00user"])
def test_bad_user_ids_are_refused(engine, bad_user):
    with pytest.raises(ValidationError):
        engine.record(bad_user, [("user", "hello")])
    with pytest.raises(ValidationError):
        engine.retrieve(bad_user, "hello")


@pytest.mark.parametrize("messages", [
    [], "just a string", [("user", "")], [("user", "   ")], [("robot", "hi")], [{"role": "user"}],
    [{"role": "user", "content": 5}], [{"role": "user", "content": "x", "colour": "red"}], [42],
    [{"role": "user", "content": "x", "timestamp": "not a time"}], [("user", "nul \x00 inside")],
])
def test_bad_messages_are_refused_and_nothing_is_written(engine, messages):
    with pytest.raises(ValidationError):
        engine.record("anna", messages)
    assert engine.count("anna") == 0


def test_huge_text_is_refused_not_cut(tmp_path, local_embedder):
    settings = Settings(max_content_chars=1000)
    with MemoryScope(settings, path=tmp_path / "m.db", embedder=local_embedder) as memory:
        with pytest.raises(ValidationError, match="limit"):
            memory.record("anna", [("user", "y" * 1001)])
        with pytest.raises(ValidationError):
            memory.retrieve("anna", "q" * 1001)
        with pytest.raises(ValidationError):
            memory.add("anna", "z" * 1001)
        assert memory.count("anna") == 0


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"top_k": "5"}, {"top_k": 5000}, {"now": "yesterday"},
                                    {"types": ["memo"]}, {"time_range": "May"}])
def test_bad_retrieve_arguments(engine, kwargs):
    with pytest.raises(ValidationError):
        engine.retrieve("anna", "hello", **kwargs)


def test_empty_query_is_refused(engine):
    with pytest.raises(ValidationError):
        engine.retrieve("anna", "  ")
    with pytest.raises(ValidationError):
        engine.retrieve("anna", None)


def test_add_get_update_delete(engine):
    memory = engine.add("anna", "Anna's favourite colour is green.", event_start="2026-05-01T00:00:00+00:00")
    assert memory.type is MemoryType.CUSTOM
    assert engine.get("anna", memory.id).content == memory.content
    updated = engine.update("anna", memory.id, content="Anna's favourite colour is teal.")
    assert updated.content.endswith("teal.")
    top = engine.retrieve("anna", "favourite colour teal").memories[0]
    assert top.memory.id == memory.id and top.memory.content.endswith("teal.")
    engine.update("anna", memory.id, status="expired")
    assert engine.retrieve("anna", "favourite colour").memories == []
    assert engine.retrieve("anna", "favourite colour", include_expired=True).memories[0].memory.id == memory.id
    engine.delete("anna", memory.id)
    with pytest.raises(NotFoundError):
        engine.get("anna", memory.id)
    with pytest.raises(NotFoundError):
        engine.delete("anna", memory.id)
    with pytest.raises(NotFoundError):
        engine.update("anna", "no-such-id", content="x")


def test_update_validates(engine):
    memory = engine.add("anna", "fact")
    with pytest.raises(ValidationError):
        engine.update("anna", memory.id, status="zombie")
    with pytest.raises(ValidationError):
        engine.update("anna", memory.id, content="")
    with pytest.raises(ValidationError):
        engine.add("anna", "fact", type="memo")
    with pytest.raises(ValidationError):
        engine.add("anna", "fact", metadata=["not", "a", "dict"])


def test_delete_all_touches_one_user_only(engine):
    _conversation(engine, "anna")
    _conversation(engine, "bob")
    assert engine.delete_all("anna") == 3
    assert engine.count("anna") == 0
    assert engine.count("bob") == 3
    assert engine.retrieve("anna", "peanuts").memories == []
    assert engine.retrieve("bob", "peanuts").memories[0].memory.user_id == "bob"
    assert engine.users() == ["bob"]


def test_filters_by_type_and_agent(engine):
    _conversation(engine)
    engine.add("anna", "Anna avoids peanuts completely.", type="observation")
    engine.record("anna", [("user", "peanut butter is banned at work")], agent_id="work-bot")
    only_obs = engine.retrieve("anna", "peanuts", types=["observation"])
    assert [m.memory.type for m in only_obs.memories] == [MemoryType.OBSERVATION]
    work = engine.retrieve("anna", "peanuts", agent_id="work-bot")
    assert {m.memory.agent_id for m in work.memories} == {"work-bot"}


def test_identical_content_is_returned_once(engine):
    engine.record("anna", [("user", "I play the cello every evening.")])
    engine.add("anna", "I play the cello every evening.", type="observation")
    top = engine.retrieve("anna", "does she play the cello", top_k=5).memories
    assert len(top) == 1
    assert len(engine.retrieve("anna", "does she play the cello", top_k=5, types=["observation"]).memories) == 1


def test_explicit_time_range_filters(engine):
    engine.record("anna", [{"role": "user", "content": "I went hiking in the Alps.", "timestamp": T0}])
    engine.record("anna", [{"role": "user", "content": "I went hiking in Sintra.",
                            "timestamp": T0 + timedelta(days=40)}])
    inside = engine.retrieve("anna", "hiking", time_range=(T0 - timedelta(days=1), T0 + timedelta(days=1)))
    assert [m.memory.content for m in inside.memories] == ["I went hiking in the Alps."]


def test_list_paging_and_order(engine):
    for i in range(5):
        engine.record("anna", [{"role": "user", "content": f"note {i}", "timestamp": T0 + timedelta(minutes=i)}])
    newest = engine.list("anna", limit=2)
    assert [m.content for m in newest] == ["note 4", "note 3"]
    assert [m.content for m in engine.list("anna", limit=2, offset=2)] == ["note 2", "note 1"]
    assert engine.list("anna", newest_first=False, limit=1)[0].content == "note 0"
    with pytest.raises(ValidationError):
        engine.list("anna", limit=0)
    with pytest.raises(ValidationError):
        engine.list("anna", offset=-1)


def test_export_import_roundtrip(engine, tmp_path):
    _conversation(engine)
    engine.add("anna", "Anna runs marathons.", type="observation", metadata={"source": "manual"})
    path = tmp_path / "anna.jsonl"
    assert engine.export("anna", path) == 4
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert all(row["user_id"] == "anna" for row in rows if "record" not in row)  # ledger lines follow
    # the named user, and the names record read from "My sister Clara lives in Porto."
    assert sorted((row["name"], row["kind"]) for row in rows if row.get("record") == "entity") == [
        ("Anna", "person"), ("Clara", "person"), ("Porto", "unknown")]
    assert engine.import_("carl", path) == 4
    assert engine.import_("carl", path) == 4  # idempotent: same ids the second time
    assert engine.count("carl") == 4
    assert engine.count("anna") == 4
    carl = engine.retrieve("carl", "marathons").memories[0].memory
    assert carl.user_id == "carl" and carl.metadata == {"source": "manual"}


def test_import_rejects_bad_lines_and_writes_nothing(engine):
    good = json.dumps({"id": "a1", "user_id": "x", "agent_id": "assistant", "content": "fine"})
    for bad in ["not json", json.dumps([1, 2]), json.dumps({"id": "a2", "content": "x", "colour": 1}),
                json.dumps({"id": "a3", "user_id": "x", "agent_id": "a", "content": ""})]:
        with pytest.raises(ValidationError, match="line 2"):
            engine.import_("dora", io.StringIO(good + "\n" + bad + "\n"))
    assert engine.count("dora") == 0


def test_consolidate_without_llm_says_so(engine):
    report = engine.consolidate("anna")
    assert report.skipped_reason and "LLM" in report.skipped_reason
    assert engine.reflect("anna").skipped_reason


def test_rerank_true_without_reranker_is_a_config_error(engine):
    engine.record("anna", [("user", "hello there")])
    with pytest.raises(ConfigError):
        engine.retrieve("anna", "hello", rerank=True)


def test_message_objects_and_default_timestamp(engine):
    before = datetime.now(timezone.utc)
    engine.record("anna", Message(role="user", content="single message object"))
    [memory] = engine.list("anna")
    assert memory.created_at >= before - timedelta(seconds=1)
    assert memory.role == "user" and memory.speaker == "anna"


def test_turns_are_indexed_with_the_message_they_answer(engine):
    engine.record("anna", [("assistant", "Did you enjoy the pottery class in Lisbon?"), ("user", "Yes, loved it!")])
    top = engine.retrieve("anna", "pottery class", top_k=2).memories
    assert "Yes, loved it!" in [m.memory.content for m in top]


async def test_async_twins(engine):
    ids = await engine.arecord("anna", [("user", "Async facts are facts too.")])
    assert len(ids) == 1
    result = await engine.aretrieve("anna", "async facts")
    assert result.memories[0].memory.id == ids[0]
    memory = await engine.aget("anna", ids[0])
    assert memory.content == "Async facts are facts too."
    assert await engine.acount("anna") == 1
    await engine.adelete("anna", ids[0])
    assert await engine.alist("anna") == []


def test_many_users_one_engine_threads(engine):
    from concurrent.futures import ThreadPoolExecutor

    def work(i: int) -> None:
        user = f"user-{i}"
        engine.record(user, [("user", f"My lucky number is {i}.")])
        hits = engine.retrieve(user, "lucky number").memories
        assert [h.memory.user_id for h in hits] == [user]

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(40)))
    assert len(engine.users()) == 40


def test_settings_object_or_yaml_path(tmp_path, local_embedder):
    config = tmp_path / "settings.yaml"
    config.write_text(f"store:\n  path: {tmp_path / 'from-yaml.db'}\nretrieval:\n  top_k: 2\n", encoding="utf-8")
    with MemoryScope(str(config), embedder=local_embedder) as memory:
        assert memory.settings.retrieval.top_k == 2
        memory.record("anna", [("user", "a"), ("user", "b"), ("user", "c")])
        assert len(memory.retrieve("anna", "a b c").memories) == 2
    assert (tmp_path / "from-yaml.db").exists()
    with pytest.raises(ValidationError):
        MemoryScope(42)
    with pytest.raises(ConfigError):
        Settings.load(tmp_path / "missing.yaml")


def test_expired_status_value(engine):
    memory = engine.add("anna", "old fact")
    engine.update("anna", memory.id, status=MemoryStatus.EXPIRED)
    assert engine.get("anna", memory.id).status is MemoryStatus.EXPIRED


def test_a_message_and_its_turn_memory_share_an_id(engine):
    ids = engine.record("anna", [("user", "first"), ("assistant", "second")])
    logged = engine.store.pending_messages("anna")
    assert [m.id for m in logged] == ids
    assert engine.get("anna", logged[0].id).content == "first"
    assert engine.get("anna", ids[1]).previous_id == ids[0]


def test_the_relevance_floor_keeps_unrelated_memories_out(engine):
    engine.record("anna", [{"role": "user", "content": "I'm vegetarian and allergic to peanuts."},
                           {"role": "user", "content": "My dog is called Biscuit."}])
    # margins, calibrated relevance against the default floor 0.1: "2 + 2" reaches 0.021 (float32 and
    # int8 compute alike); the cooking question 0.32 for the peanuts (and it shares the word "Anna")
    assert engine.retrieve("anna", "What is 2 + 2?").memories == []
    assert engine.retrieve("anna", "What is 2 + 2?").context == ""
    found = engine.retrieve("anna", "What should I cook for Anna tonight?").memories
    assert any("peanuts" in m.memory.content for m in found)
    assert len(engine.retrieve("anna", "What is 2 + 2?", min_relevance=-1).memories) == 2  # floor off
    with pytest.raises(ValidationError):
        engine.retrieve("anna", "dog", min_relevance=5)
