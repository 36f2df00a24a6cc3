"""How an adapter ends a turn's run (adapters/_outcome.py, `MemoryBridge.record`'s run arguments):
the rule from the framework's signals, the procedures passed along, and nothing written with
procedures off (the default)."""

from __future__ import annotations

import logging

from memoryscope_plugins import Memory, MemoryType, RetrievalResult, ScoredMemory
from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig
from memoryscope_plugins.adapters._outcome import procedure_ids, turn_outcome
from memoryscope_plugins.adapters._tool_capture import CallSeen, ResultSeen, tool_messages
from memoryscope_plugins.procedures.scope import MAX_USED, procedure_scope
from tests.support import run_outcomes as ro


def calls(*pairs: tuple[str, bool]) -> list[dict]:
    """Tool messages of calls (tool, failed), in order."""
    seen = [CallSeen(name, {}, f"c{i}") for i, (name, _) in enumerate(pairs)]
    results = [ResultSeen(f"c{i}", "boom" if failed else "fine", failed=failed) for i, (_, failed) in enumerate(pairs)]
    return tool_messages(seen, results, max_chars=1000)


def test_the_last_call_of_each_tool_decides_and_no_call_is_unknown():
    assert turn_outcome([]) == "unknown"
    assert turn_outcome(calls(("weather", False))) == "succeeded"
    assert turn_outcome(calls(("book", True))) == "failed"
    assert turn_outcome(calls(("book", True), ("book", False))) == "succeeded"  # retried with success
    assert turn_outcome(calls(("book", False), ("book", True))) == "failed"  # the last call failed
    assert turn_outcome(calls(("book", True), ("weather", False))) == "failed"  # another tool recovers nothing
    assert turn_outcome(calls(("weather", False)), failed=True) == "failed"  # the framework said so
    assert turn_outcome([], failed=True) == "failed"
    unseen = tool_messages([CallSeen("book", {}, "u1")], [], max_chars=1000, keep_unanswered=True)
    assert [m["tool_call"]["status"] for m in unseen] == ["unknown"]
    assert turn_outcome(unseen) == "unknown"  # made, outcome never seen: no success
    assert turn_outcome(calls(("weather", False)) + unseen) == "unknown"
    assert turn_outcome(calls(("weather", True)) + unseen) == "failed"
    assert turn_outcome(unseen + calls(("book", False))) == "succeeded"  # its last call succeeded


def test_a_call_without_a_result_is_left_out_unless_asked_for():
    seen = [CallSeen("weather", '{"city": "Oslo"}', "c1"), CallSeen("book", "{bad json", "c2")]
    answered = [ResultSeen("c1", "clear")]
    assert [m["tool_call"]["call_id"] for m in tool_messages(seen, answered, max_chars=1000)] == ["c1"]
    both = tool_messages(seen, answered, max_chars=1000, keep_unanswered=True)
    assert [(m["tool_call"]["call_id"], m["tool_call"]["status"]) for m in both] == [("c1", "ok"), ("c2", "unknown")]
    assert both[1]["tool_call"]["arguments"] == {"_unparsed": "{bad json"} and both[1]["content"] == ""
    assert "result" not in both[1]["tool_call"] and "error" not in both[1]["tool_call"]


def test_the_procedures_used_are_the_retrieved_ones_once_each_at_most_the_engines_limit():
    def result(*ids: str) -> RetrievalResult:
        scored = [ScoredMemory(memory=Memory(id=i, user_id="~procedures~:a", agent_id="a", content=i,
                                             type=MemoryType.PROCEDURE), score=1.0) for i in ids]
        return RetrievalResult(query="q", memories=[], context="", procedures=scored)

    assert procedure_ids([]) == [] and procedure_ids([result()]) == []
    assert procedure_ids([result("p1", "p2"), result("p2", "p3")]) == ["p1", "p2", "p3"]
    assert procedure_ids([result(*(f"p{i}" for i in range(30)))]) == [f"p{i}" for i in range(MAX_USED)]


def test_with_procedures_off_an_ended_run_writes_nothing_but_the_turn(engine):
    bridge = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
    turn = [{"role": "user", "content": "Book Rosa"}, *calls(("book", True)),
            {"role": "assistant", "content": "Rosa is full."}]
    ids = bridge.record("anna", turn, agent_id="concierge", run_outcome="failed", procedures_used=["p1"])
    assert len(ids) == 3
    assert engine.store.users() == ["anna"]  # no procedure scope: no run marker, nothing queued
    assert engine.store.recent_messages(procedure_scope("anna", "concierge"), None, None, 10) == []
    assert sorted(m.content for m in engine.list("anna")) == ["Book Rosa", "Rosa is full."]


def test_procedures_used_without_an_outcome_are_dropped_not_refused(tmp_path, local_embedder, caplog):
    engine = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    try:
        bridge = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
        with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
            assert len(bridge.record("anna", [{"role": "user", "content": "hi"}], agent_id="a",
                                     procedures_used=["p1"])) == 1
            bridge.record("anna", [{"role": "user", "content": "hi again"}], agent_id="a", run_outcome="unknown",
                          procedures_used=[f"p{i}" for i in range(30)])
        assert "failed" not in caplog.text
        assert ro.outcomes(engine, "anna", "a") == [("unknown", [f"p{i}" for i in range(MAX_USED)])]
    finally:
        engine.close()


def test_a_failed_turn_records_its_calls_only_and_never_raises_over_the_frameworks_error(engine, caplog):
    bridge = MemoryBridge(engine, MemoryConfig(user_id="anna", on_error="raise"), "test")
    assert bridge.record_failed("anna", [], agent_id="a") == []  # no call: nothing to record
    assert len(bridge.record_failed("anna", calls(("book", True)), agent_id="a")) == 1
    assert engine.list("anna") == [] and [s.calls for s in engine.tool_stats("a")] == [1]
    engine.close()  # a closed store fails the next write: with on_error="raise" too, it is only logged
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        assert bridge.record_failed("anna", calls(("book", True)), agent_id="a") == []
    assert "recording a failed turn failed too" in caplog.text
