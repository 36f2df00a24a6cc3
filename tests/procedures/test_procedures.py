"""Task memory with a fake model at the HTTP boundary: procedures learnt from finished runs,
checked, deduplicated, expired with a link, weighted by later outcomes, and retrieved.

The fake plays the model behind the real `openai` client; the store and the embedder are real.
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any, Sequence

import pytest

from memoryscope_plugins import MemoryScope, MemoryStatus, MemoryType, Settings
from memoryscope_plugins.errors import NotFoundError, ValidationError
from memoryscope_plugins.models.openai_compat import OpenAIChatModel
from memoryscope_plugins.procedures.scope import procedure_scope
from memoryscope_plugins.retrieval import procedures as procedure_retrieval
from memoryscope_plugins.storage.base import MemoryFilter
from tests.support.consolidation_helpers import at, fast_policy

AGENT = "concierge"
GOOD = {"when": "booking a table for a given day",
        "do": "call book_table with day as an ISO date (YYYY-MM-DD), never a weekday name",
        "why": "call 2 failed with Invalid date and the user asked for ISO dates",
        "tools": ["book_table"], "calls": [2, 3], "same_as": None, "replaces": None}
UNGROUNDED = {"when": "booking a table", "do": "call reserve_seat before book_table", "why": "it is faster",
              "tools": ["reserve_seat"], "calls": [], "same_as": None, "replaces": None}


def make(tmp_path, server, embedder, *, enabled: bool = True, store: dict | None = None,
         **procedures: Any) -> MemoryScope:
    llm = OpenAIChatModel("fake-llm", base_url=server.url + "/v1", api_key="sk-test-0123456789",
                          retry_policy=fast_policy(2))
    # the model's path alone unless asked: the run's own lessons are tested in test_engine_lessons.py
    procedures = {"engine_lessons": False, **procedures}
    settings = Settings(store=store or {"path": tmp_path / "memory.db"}, procedures={"enabled": enabled, **procedures},
                        consolidation={"worker": "none", "every_messages": 1, "every_seconds": 0.05,
                                       "reflect_every_observations": 100, "language": "en", "max_attempts": 3})
    return MemoryScope(settings, embedder=embedder, llm=llm, start_worker=False)


def booking_run(user: str = "anna", name: str = "Anna", day: int = 4) -> list[dict]:
    return [
        {"role": "user", "content": "Book me a table at Rosa's for Friday", "name": name, "timestamp": at(day)},
        {"role": "tool", "tool_call": {"name": "find_restaurant", "arguments": {"name": "Rosa's"},
                                       "result": "Rosa's, id 77"}, "timestamp": at(day)},
        {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"restaurant_id": 77, "day": "Friday"},
                                       "error": "Invalid date 'Friday': expected YYYY-MM-DD"}, "timestamp": at(day)},
        {"role": "user", "content": "no, use ISO dates", "name": name, "timestamp": at(day, 11)},
        {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"restaurant_id": 77, "day": "2026-05-08"},
                                       "result": "booked"}, "timestamp": at(day, 11)},
        {"role": "assistant", "content": "Booked for Friday.", "timestamp": at(day, 11)},
    ]


def procedures_of(engine: MemoryScope, user: str = "anna", *, expired: bool = True) -> list:
    flt = MemoryFilter(types=(MemoryType.PROCEDURE,),
                       statuses=None if expired else (MemoryStatus.ACTIVE,))
    return engine.store.list(procedure_scope(user, AGENT), flt, limit=100)


def learnt_by_each(engine: MemoryScope, teacher: Any, users: Sequence[str]) -> list[list]:
    """Each user's booking run recorded and learnt (the model answers `GOOD` for each), then the
    procedures of each user's team, in the order of `users`."""
    teacher.queue = [answer(GOOD) for _ in users]
    for user in users:
        engine.record(user, booking_run(user), agent_id=AGENT, run_outcome="succeeded")
    engine.consolidate()
    return [procedures_of(engine, user) for user in users]


def pending_runs(engine: MemoryScope, user: str = "anna") -> list:
    return engine.store.recent_messages(procedure_scope(user, AGENT), None, None, 100)


def answer(*procedures: dict) -> tuple[str, str]:
    return json.dumps({"procedures": list(procedures)}), "stop"


def test_a_run_becomes_a_grounded_procedure_and_an_ungrounded_one_is_refused(tmp_path, server, teacher,
                                                                              local_embedder):
    teacher.queue = [answer(GOOD, UNGROUNDED)]
    engine = make(tmp_path, server, local_embedder)
    try:
        ids = engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        [procedure] = procedures_of(engine)
        assert procedure.content.startswith("When booking a table for a given day: call book_table")
        assert procedure.metadata["tools"] == ["book_table"] and procedure.metadata["runs"] == 1
        assert procedure.agent_id == AGENT and procedure.user_id.startswith("~procedures~")
        assert ids[2] in procedure.source_ids and ids[4] in procedure.source_ids and ids[0] in procedure.source_ids
        assert any("never called" in line and "reserve_seat" in line for line in report.rejected)
        # the prompt saw the run: the calls numbered with their arguments and errors, and the outcome
        prompt = teacher.procedure_prompts[0]
        assert "[call 2] book_table" in prompt and "Invalid date 'Friday'" in prompt and "succeeded" in prompt
        assert {m.state for m in pending_runs(engine)} == {"done"}
        # the person never sees it: not in their list, and the scope is no user
        assert all(m.type is not MemoryType.PROCEDURE for m in engine.list("anna"))
        exported = io.StringIO()
        engine.export("anna", exported)
        assert '"procedure"' not in exported.getvalue() and "~procedures~" not in exported.getvalue()
        assert engine.users() == ["anna"]
        with pytest.raises(ValidationError, match="reserved"):
            engine.list(procedure_scope("anna", AGENT))
    finally:
        engine.close()


def test_personal_data_and_wrong_quotes_are_refused(tmp_path, server, teacher, local_embedder):
    named = {**GOOD, "when": "Anna books a table"}
    place = {**GOOD, "do": "call book_table for Rosa's with an ISO date"}
    quote = {**GOOD, "why": "the tool said 'No table free tonight'"}
    teacher.queue = [answer(named, place, quote)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        assert procedures_of(engine) == []
        assert [line.split(":")[0] for line in report.rejected] == ["copies personal data", "copies personal data",
                                                                    "quotes a text the run does not hold"]
        assert {m.state for m in pending_runs(engine)} == {"done"}  # the answer accounted for the run
    finally:
        engine.close()


def test_prose_around_the_json_is_read(tmp_path, server, teacher, local_embedder):
    text = "Sure! Here is what the agent should remember:\n```json\n" + json.dumps({"procedures": [GOOD]}) + \
        "\n```\nLet me know if you need more."
    teacher.queue = [(text, "stop")]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert len(procedures_of(engine)) == 1
    finally:
        engine.close()


def test_a_cut_off_answer_leaves_the_run_queued_then_it_is_learnt(tmp_path, server, teacher, local_embedder):
    full = json.dumps({"procedures": [GOOD, {**GOOD, "when": "booking any table"}]})
    teacher.queue = [(full[: len(full) // 2], "length"), (json.dumps({"answer": "done"}), "stop"),
                     (json.dumps({"answer": "done"}), "stop"), answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="failed")
        engine.consolidate()
        assert procedures_of(engine) == []
        [marker] = pending_runs(engine)
        assert (marker.state, marker.attempts) == ("pending", 1)  # cut off: never marked done
        engine.consolidate()  # an answer without a 'procedures' list does not account for the run either
        [marker] = pending_runs(engine)
        assert (marker.state, marker.attempts) == ("pending", 2)
        engine.consolidate()
        assert len(procedures_of(engine)) == 1
        assert [m.state for m in pending_runs(engine)] == ["done"]
    finally:
        engine.close()


def test_a_repeat_is_merged_and_a_contradiction_expires_the_old_one_with_a_link(tmp_path, server, teacher,
                                                                                 local_embedder):
    better = {**GOOD, "do": "call book_table with day as an ISO date (YYYY-MM-DD) after find_restaurant",
              "tools": ["book_table", "find_restaurant"], "calls": [1, 3], "replaces": "P1"}
    teacher.queue = [answer(GOOD), answer({**GOOD, "when": "reserving a table", "same_as": "P1"}),
                     answer({**GOOD, "when": "a table on some day", "same_as": "P7"}),
                     answer({**GOOD, "when": "finding a restaurant", "do": "call find_restaurant with the name",
                             "tools": ["find_restaurant"], "calls": [1], "replaces": "P1"}), answer(better)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [first] = procedures_of(engine)
        bob_ids = engine.record("bob", booking_run("bob", "Bob", 5), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        [merged] = procedures_of(engine)  # one procedure, taught by two runs
        assert merged.id == first.id and merged.metadata["runs"] == 2 and report.merged
        assert bob_ids[2] in merged.source_ids
        assert "P1 When booking a table" in teacher.procedure_prompts[1]  # the existing one was shown
        engine.record("anna", booking_run(day=6), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()  # a label the prompt did not show is no reference: stored as a new one
        assert len(procedures_of(engine)) == 2
        engine.record("anna", booking_run(day=7), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()  # about another tool only: no reference to a book_table procedure
        assert [m.status for m in procedures_of(engine)] == [MemoryStatus.ACTIVE] * 3
        engine.record("anna", booking_run(day=8), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        stored = {m.id: m for m in procedures_of(engine)}
        [newest] = [m for m in stored.values() if "after find_restaurant" in m.content]
        old = stored[newest.metadata["replaces"]]
        assert old.status is MemoryStatus.EXPIRED and old.superseded_by == newest.id
        assert newest.status is MemoryStatus.ACTIVE
    finally:
        engine.close()


def test_later_outcomes_weigh_a_procedure_without_a_model_call(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [procedure] = procedures_of(engine)
        asked = len(teacher.procedure_prompts)
        for outcome, day in (("failed", 8), ("failed", 9), ("succeeded", 10)):
            engine.record("anna", [{"role": "user", "content": "table for two please", "timestamp": at(day)}],
                          agent_id=AGENT, run_outcome=outcome, procedures_used=[procedure.id])
            engine.consolidate()
        [after] = procedures_of(engine)
        assert (after.metadata["uses"], after.metadata["successes"], after.metadata["failures"]) == (3, 1, 2)
        assert after.metadata["weight"] == pytest.approx(2 / 3)
        assert after.metadata["last_used"].startswith("2026-05-10")
        assert len(teacher.procedure_prompts) == asked  # runs without a tool call teach nothing, ask nothing
        with pytest.raises(ValidationError, match="run_outcome"):
            engine.record("anna", [("user", "hi")], agent_id=AGENT, procedures_used=[procedure.id])
        with pytest.raises(ValidationError, match="run_outcome"):
            engine.record("anna", [("user", "hi")], agent_id=AGENT, run_outcome="great")
    finally:
        engine.close()


def test_a_new_task_in_other_words_brings_back_the_procedure_within_the_budget(tmp_path, server, teacher,
                                                                                local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="failed")
        engine.consolidate()
        engine.record("bob", [("user", "I like jazz")], agent_id=AGENT)
        result = engine.retrieve("bob", "reserve a restaurant table for next Tuesday", agent_id=AGENT,
                                 tools=["book_table", "find_restaurant"])
        assert [s.memory.metadata["tools"] for s in result.procedures] == [["book_table"]]
        block = result.context.split("What worked before:\n", 1)[1]
        assert block.startswith("- When booking a table for a given day")
        assert "Tools that failed before:\n- book_table: 1 of 2 calls failed" in result.context
        assert "find_restaurant" not in result.context.split("Tools that failed before:")[1]  # never failed
        assert "Anna" not in result.context and "Rosa" not in result.context  # nothing of anna's reaches bob
        assert procedure_retrieval.estimate_tokens(block) <= engine.settings.procedures.context_tokens
        twin = asyncio.run(engine.aretrieve("bob", "reserve a restaurant table for next Tuesday", agent_id=AGENT,
                                            tools=["book_table", "find_restaurant"]))
        assert twin.context == result.context
        with pytest.raises(ValidationError, match="tools"):
            engine.retrieve("bob", "a table", tools="book_table")
    finally:
        engine.close()
    small = MemoryScope(Settings(store={"path": tmp_path / "memory.db"}, consolidation={"worker": "none"},
                                 procedures={"enabled": True, "context_tokens": 20}), embedder=local_embedder)
    try:
        result = small.retrieve("bob", "reserve a restaurant table for next Tuesday", agent_id=AGENT)
        assert result.procedures == [] and "What worked before" not in result.context  # over the budget
    finally:
        small.close()


def test_off_by_default_nothing_is_queued_and_retrieval_never_enters_the_procedural_path(
        tmp_path, server, teacher, local_embedder, monkeypatch):
    assert Settings().procedures.enabled is False
    engine = make(tmp_path, server, local_embedder, enabled=False)

    def entered(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the procedural path ran")

    monkeypatch.setattr(procedure_retrieval, "add_procedures", entered)
    monkeypatch.setattr(procedure_retrieval, "QueryMemo", entered)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert pending_runs(engine) == [] and teacher.procedure_prompts == []
        assert engine.store.users() == ["anna"]
        result = engine.retrieve("anna", "book a table", agent_id=AGENT, tools=["book_table"])
        assert result.procedures == [] and result.tool_notes == [] and "procedures" not in result.timings_ms
    finally:
        engine.close()


def test_teams_never_share_procedures(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("acme:anna", booking_run("acme:anna"), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert len(procedures_of(engine, "acme:anna")) == 1
        assert procedures_of(engine, "globex:bob") == [] and procedures_of(engine, "bob") == []
        result = engine.retrieve("globex:bob", "reserve a restaurant table", agent_id=AGENT, tools=["book_table"])
        assert result.procedures == [] and "What worked before" not in result.context
        assert "Tools that failed before" not in result.context  # acme's failures are acme's
        mine = engine.retrieve("acme:zoe", "reserve a restaurant table", agent_id=AGENT, tools=["book_table"])
        assert len(mine.procedures) == 1
        assert [(n.calls, n.failures) for n in mine.tool_notes] == [(2, 1)]  # anna's, of zoe's team
        plain = engine.retrieve("bob", "reserve a restaurant table", agent_id=AGENT, tools=["book_table"])
        assert plain.tool_notes == [] and "Tools that failed before" not in plain.context
    finally:
        engine.close()


def test_chinese_runs_use_the_chinese_prompt(tmp_path, server, teacher, local_embedder):
    zh = {"when": "按日期订餐桌", "do": "调用 book_table 时 day 用 ISO 日期（YYYY-MM-DD）", "why": "第 2 次调用失败",
          "tools": ["book_table"], "calls": [2]}
    teacher.queue = [answer(zh)]
    engine = make(tmp_path, server, local_embedder)
    engine.settings.consolidation.language = "auto"
    try:
        run = booking_run()
        run[0] = {"role": "user", "content": "帮我订周五的位子", "name": "安娜", "timestamp": at(4)}
        run[3] = {"role": "user", "content": "不对，用 ISO 日期", "name": "安娜", "timestamp": at(4, 11)}
        run[5] = {"role": "assistant", "content": "订好了。", "timestamp": at(4, 11)}
        engine.record("anna", run, agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert "它已有的做法" in teacher.procedure_prompts[0]
        [procedure] = procedures_of(engine)
        assert procedure.content.startswith("按日期订餐桌：调用 book_table")
    finally:
        engine.close()


def test_runs_queued_while_on_wait_while_procedures_are_off(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
    finally:
        engine.close()
    off = make(tmp_path, server, local_embedder, enabled=False)
    try:
        off.consolidate()
        assert [m.state for m in pending_runs(off)] == ["pending"] and teacher.procedure_prompts == []
    finally:
        off.close()
    on = make(tmp_path, server, local_embedder)
    try:
        on.consolidate()
        assert [m.state for m in pending_runs(on)] == ["done"] and len(procedures_of(on)) == 1
    finally:
        on.close()


@pytest.fixture(scope="module")
def es_server():
    pytest.importorskip("elasticsearch", reason="elasticsearch backend: the elasticsearch client is not installed")
    from tests.support import servers
    try:
        with servers.elasticsearch_server() as running:
            yield running
    except servers.ServerUnavailable as exc:
        pytest.skip(f"elasticsearch backend could not start: {exc}")


@pytest.mark.parametrize("backend", ["postgres", "elasticsearch"])
def test_on_server_stores_a_run_is_learnt_weighed_and_retrieved(tmp_path, server, teacher, local_embedder, request,
                                                                 backend):
    teacher.queue = [answer(GOOD)]
    if backend == "postgres":
        store = {"backend": "postgres", "url": request.getfixturevalue("postgres").create_database("procedures")}
    else:
        store = {"backend": "elasticsearch", "url": request.getfixturevalue("es_server").url,
                 "index_prefix": "procedures"}
    engine = make(tmp_path, server, local_embedder, store=store)
    try:
        engine.record("acme:anna", booking_run("acme:anna"), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [procedure] = procedures_of(engine, "acme:anna")
        engine.record("acme:bob", [("user", "a table for two")], agent_id=AGENT, run_outcome="succeeded",
                      procedures_used=[procedure.id])
        engine.consolidate()
        result = engine.retrieve("acme:bob", "reserve a restaurant table for next Tuesday", agent_id=AGENT)
        [found] = result.procedures
        assert found.memory.id == procedure.id and found.memory.metadata["successes"] == 1
        assert "What worked before:" in result.context
        assert engine.users() == ["acme:anna", "acme:bob"]
        assert engine.retrieve("globex:zoe", "reserve a restaurant table", agent_id=AGENT).procedures == []
        # an operator's edit and delete, under the scope's lease, on this store too
        edited = engine.update_procedure(AGENT, procedure.id, team="acme", do="call book_table with an ISO date")
        [stored] = engine.procedures(AGENT, team="acme")
        assert (stored.content, stored.source_ids, stored.metadata["successes"]) == (edited.content,
                                                                                    procedure.source_ids, 1)
        with pytest.raises(ValidationError, match="names a tool"):
            engine.update_procedure(AGENT, procedure.id, team="acme", tools=["reserve_seat"])
        engine.delete_procedure(AGENT, procedure.id, team="acme")
        assert engine.procedures(AGENT, team="acme", include_expired=True) == []
    finally:
        engine.close()


def test_failures_push_a_procedure_down_and_successes_lift_one(tmp_path, server, teacher, local_embedder):
    other = {**GOOD, "when": "booking a restaurant table", "do": "call find_restaurant first and pass its id "
             "as restaurant_id to book_table", "why": "book_table needs restaurant_id", "calls": [1, 3]}
    teacher.queue = [answer(GOOD, other)]
    engine = make(tmp_path, server, local_embedder)
    query = "book a restaurant table for Tuesday"
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        before = [s.memory.id for s in engine.retrieve("bob", query, agent_id=AGENT).procedures]
        assert len(before) == 2
        first, second = before
        for day in (8, 9, 10):  # the first keeps failing, the second keeps working
            for used, outcome in ((first, "failed"), (second, "succeeded")):
                engine.record("anna", [{"role": "user", "content": "a table", "timestamp": at(day)}],
                              agent_id=AGENT, run_outcome=outcome, procedures_used=[used])
        engine.consolidate()
        after = engine.retrieve("bob", query, agent_id=AGENT).procedures
        assert [s.memory.id for s in after] == [second, first]
        assert [s.memory.metadata["weight"] for s in after] == [4.0, 0.25]
    finally:
        engine.close()


def test_a_user_deleted_before_the_run_is_learnt_leaves_nothing_to_learn(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.delete_all("anna")
        engine.consolidate()
        assert teacher.procedure_prompts == [] and procedures_of(engine) == []
        assert [m.state for m in pending_runs(engine)] == ["done"]
    finally:
        engine.close()


class CountingEmbedder:
    """The real embedder, with the query texts it was asked to embed written down."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)

    def embed(self, texts: Any, *, kind: str = "document") -> Any:
        if kind == "query":
            self.queries.extend(texts)
        return self.embedder.embed(texts, kind=kind)


def test_the_procedures_search_embeds_the_query_no_second_time(tmp_path, server, teacher, local_embedder):
    counting = CountingEmbedder(local_embedder)
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, counting)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        query = "reserve a restaurant table for next Tuesday"
        result = engine.retrieve("bob", query, agent_id=AGENT)
        assert len(result.procedures) == 1 and counting.queries.count(query) == 1
    finally:
        engine.close()


def test_migrate_carries_the_agents_procedures(tmp_path, server, teacher, local_embedder):
    from memoryscope_plugins.storage.migrate import migrate

    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [procedure] = procedures_of(engine)
    finally:
        engine.close()
    report = migrate(tmp_path / "memory.db", tmp_path / "copy.db")
    assert report.mismatches == []
    copy = make(tmp_path / "copy", server, local_embedder, store={"path": tmp_path / "copy.db"})
    try:
        [moved] = procedures_of(copy)
        assert (moved.id, moved.content, moved.source_ids) == (procedure.id, procedure.content, procedure.source_ids)
        assert copy.users() == ["anna"]
        assert copy.retrieve("bob", "reserve a restaurant table", agent_id=AGENT).procedures[0].memory.id == moved.id
    finally:
        copy.close()


def test_an_operator_lists_and_deletes_an_agents_procedures(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD), answer(GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.record("acme:anna", booking_run("acme:anna"), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [mine] = engine.procedures(AGENT)
        [acme] = asyncio.run(engine.aprocedures(AGENT, team="acme"))
        assert mine.id != acme.id and engine.procedures(AGENT, team="globex") == []
        assert engine.procedures("someone-else") == []
        with pytest.raises(NotFoundError):
            engine.delete_procedure(AGENT, acme.id)  # another team's procedure is not this one's
        engine.delete_procedure(AGENT, acme.id, team="acme")
        assert engine.procedures(AGENT, team="acme") == [] and engine.procedures(AGENT) == [mine]
        for bad in ({"team": "a:b"}, {"team": 3}, {"limit": 0}, {"include_expired": "yes"}):
            with pytest.raises(ValidationError):
                engine.procedures(AGENT, **bad)
        with pytest.raises(ValidationError):
            engine.procedures("a/b")
    finally:
        engine.close()


def test_a_process_without_a_model_queues_the_run_for_the_one_with_it(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    recorder = MemoryScope(Settings(store={"path": tmp_path / "memory.db"}, consolidation={"worker": "none"},
                                    procedures={"enabled": True}), embedder=local_embedder)
    try:
        assert recorder.llm is None
        recorder.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        assert [m.state for m in pending_runs(recorder)] == ["pending"]
    finally:
        recorder.close()
    worker = make(tmp_path, server, local_embedder)
    try:
        worker.consolidate()
        assert len(procedures_of(worker)) == 1 and [m.state for m in pending_runs(worker)] == ["done"]
    finally:
        worker.close()


def test_the_tools_about_to_be_used_find_a_procedure_worded_unlike_the_task(tmp_path, server, teacher,
                                                                           local_embedder):
    """The procedures are searched with the task and the tools' names (a procedure names its tools)."""
    assert procedure_retrieval.procedure_query("plan a trip", ["search_flights", "book_hotel"]) == \
        "plan a trip search_flights book_hotel"
    assert procedure_retrieval.procedure_query("plan a trip", []) == "plan a trip"
    counting = CountingEmbedder(local_embedder)
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, counting)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        query = "somewhere nice for dinner with my parents on the 12th"
        result = engine.retrieve("bob", query, agent_id=AGENT, tools=["book_table"])
        assert [s.memory.metadata["tools"] for s in result.procedures] == [["book_table"]]
        assert counting.queries.count(query) == 1 and counting.queries.count(f"{query} book_table") == 1
    finally:
        engine.close()


def test_an_apostrophe_is_no_quote_and_a_quote_may_hold_one(tmp_path, server, teacher, local_embedder):
    """Measured with the 1.5B model (`bench procedural`): "What's ... 'Porto'" and a faithful nested quote
    were refused as quotes the run does not hold."""
    faithful = {**GOOD, "why": "that's why call 2 failed: 'Invalid date 'Friday': expected YYYY-MM-DD'"}
    made_up = {**GOOD, "when": "a table's day", "why": "the tool said 'No table free tonight'"}
    teacher.queue = [answer(faithful, made_up)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        assert [p.metadata["why"] for p in procedures_of(engine)] == [faithful["why"]]
        assert [line.split(":")[0] for line in report.rejected] == ["quotes a text the run does not hold"]
    finally:
        engine.close()


def test_a_small_models_answer_is_checked_end_to_end(tmp_path, server, teacher, local_embedder):
    """What the 1.5B model wrote (`bench procedural`), scripted at the HTTP boundary: prose around
    the JSON, a procedure that tells the failed call again, names in lower case, a reference by a
    stored id instead of a label, calls as strings, a tool in other case, a repeat in one answer;
    and the fair ones with capitalised words that are no names ("German", "Friday", "ISO")."""
    fair = {**GOOD, "when": "a German guest books for Friday",
            "do": "call book_table with day as an ISO date, e.g. 2026-05-08 instead of Friday",
            "why": "call 2 failed: Invalid date; the user asked for ISO dates"}
    repeat = {**GOOD, "do": "call book_table with day Friday", "why": "the user asked for Friday"}
    lower_name = {**GOOD, "do": "call book_table, then call anna back"}
    wrong_ref = {**GOOD, "when": "booking any table", "replaces": "procedure-7f3a", "same_as": "P3"}
    strings = {**GOOD, "when": "a table on a day", "calls": ["2"], "tools": "book_table"}
    other_case = {**GOOD, "when": "a table for a day", "tools": ["Book_Table"], "calls": []}
    text = ("Here are the lessons:\n```json\n" + json.dumps({"procedures": [
        fair, repeat, lower_name, wrong_ref, strings, other_case, fair]}) + "\n```\nHope this helps!")
    teacher.queue = [(text, "stop")]
    engine = make(tmp_path, server, local_embedder, max_per_run=8)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        stored = procedures_of(engine)
        assert sorted(p.metadata["when"] for p in stored) == ["a German guest books for Friday", "booking any table"]
        assert all(p.status is MemoryStatus.ACTIVE and "replaces" not in p.metadata for p in stored)
        assert [line.split(":")[0] for line in report.rejected] == [
            "repeats a failed call", "copies personal data", "rests on no call of the run",
            "names a tool the run never called"]
        assert {m.state for m in pending_runs(engine)} == {"done"}
    finally:
        engine.close()


def test_a_chinese_run_keeps_its_names_out_of_the_agents_procedures(tmp_path, server, teacher, local_embedder):
    fair = {"when": "按日期订餐桌", "do": "调用 book_table 时 day 用 ISO 日期（YYYY-MM-DD），不要写“周五”",
            "why": "第 2 次调用因“周五”失败", "tools": ["book_table"], "calls": [2, 3]}
    named = {**fair, "do": "给王芳订座时调用 book_table，day 用 ISO 日期"}
    repeat = {**fair, "do": "调用 book_table 时 day 写周五", "why": "用户说周五"}
    teacher.queue = [answer(named, repeat, fair)]
    engine = make(tmp_path, server, local_embedder)
    engine.settings.consolidation.language = "auto"
    try:
        run = booking_run()
        run[0] = {"role": "user", "content": "帮我给王芳订一张周五的桌子", "name": "安娜", "timestamp": at(4)}
        run[2]["tool_call"]["arguments"]["day"] = "周五"
        run[2]["tool_call"]["error"] = "日期格式错误：周五"
        run[3] = {"role": "user", "content": "不对，用 ISO 日期", "name": "安娜", "timestamp": at(4, 11)}
        run[5] = {"role": "assistant", "content": "订好了。", "timestamp": at(4, 11)}
        engine.record("anna", run, agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        assert [p.metadata["do"] for p in procedures_of(engine)] == [fair["do"]]
        assert [line.split(":")[0] for line in report.rejected] == ["copies personal data", "repeats a failed call"]
    finally:
        engine.close()


def test_a_name_written_in_lower_case_is_known_from_the_users_ledger(tmp_path, server, teacher, local_embedder):
    """The run writes "mira" in lower case only; the user named her sister Mira before (the ledger
    `record` keeps without a model), so a procedure that tells the agent to text mira is refused."""
    texted = {**GOOD, "do": "call book_table with an ISO date, then text mira the time"}
    teacher.queue = [answer(texted, GOOD)]
    engine = make(tmp_path, server, local_embedder)
    try:
        engine.record("kim", [{"role": "user", "content": "My sister Mira is visiting next week.", "name": "Kim",
                               "timestamp": at(3)}])
        run = booking_run("kim", "Kim")
        run[3] = {**run[3], "content": "no, use ISO dates, and text mira when it's booked"}
        engine.record("kim", run, agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        assert [p.metadata["do"] for p in procedures_of(engine, "kim")] == [GOOD["do"]]
        assert [line.split(":")[0] for line in report.rejected] == ["copies personal data"]
    finally:
        engine.close()
