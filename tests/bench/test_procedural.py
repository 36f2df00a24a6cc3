"""`bench procedural` end to end through the CLI: the retrieval part with no model, and the learning
and agent parts with a fake model behind real HTTP (the store and the embedder are real)."""

from __future__ import annotations

import json
import re

import pytest

from memoryscope_plugins.bench.procedural import evaluate, load_scenarios, ungrounded
from memoryscope_plugins.bench.procedural_agent import avoids, memory_block
from memoryscope_plugins.cli.main import main
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.types import Memory, MemoryStatus, MemoryType
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion
from tests.support.paths import DATA, ROOT

SCENARIOS = DATA / "procedural_scenarios.json"  # two scenarios of the dev sets: one English, one Chinese
DEV = [ROOT / "bench" / "data" / f"procedural_dev_{language}.json" for language in ("en", "zh")]

# What a good model writes for each run (keyed by the tool whose call failed), and an ungrounded
# procedure it adds (a tool the run never called): the engine must refuse that one.
LEARNT = {
    "book_table": {"when": "booking a table for a given day", "do": "call book_table with day as an ISO date "
                   "(YYYY-MM-DD), never a weekday name", "why": "call 2 failed with Invalid date",
                   "tools": ["book_table"], "calls": [2, 3]},
    "transfer": {"when": "转账付款", "do": "调用 transfer 时 amount 写成以分为单位的整数", "why": "第 1 次调用报错",
                 "tools": ["transfer"], "calls": [1, 2]},
}
UNGROUNDED = {"when": "any task", "do": "call reserve_seat first", "why": "faster", "tools": ["reserve_seat"],
              "calls": []}
# The agent's first call on each new task, with the procedures' block and without it.
AGENT_CALLS = {
    "noodle bar": ({"tool": "book_table", "arguments": {"restaurant_id": 31, "day": "2026-06-09", "people": 4}},
                   {"tool": "book_table", "arguments": {"restaurant_id": 31, "day": "Tuesday", "people": 4}}),
    "物业费": ({"tool": "transfer", "arguments": {"payee": "物业", "amount": 48000}},
            {"tool": "transfer", "arguments": {"payee": "物业", "amount": "480元"}}),
}


class FakeModel:
    """Answers procedure prompts with `LEARNT` (+ `UNGROUNDED`) and agent prompts with `AGENT_CALLS`."""

    def __init__(self) -> None:
        self.agent_prompts: list[str] = []

    def __call__(self, server, request) -> Reply:
        messages = (request.json or {}).get("messages") or []
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = next((m["content"] for m in messages if m["role"] == "user"), "")
        if "calls tools" in system or "调用工具" in system:
            self.agent_prompts.append(user)
            with_block, without = next(calls for key, calls in AGENT_CALLS.items() if key in user)
            shown = "What worked before" in user or "以前管用的做法" in user
            return Reply(json=openai_completion(json.dumps(with_block if shown else without)))
        failed = re.search(r"\[call \d+\] (\w+) \S.* -> error", user)
        assert failed, "a procedure prompt shows the failed call"
        answer = {"procedures": [{**LEARNT[failed.group(1)], "same_as": None, "replaces": None}, UNGROUNDED]}
        return Reply(json=openai_completion(json.dumps(answer, ensure_ascii=False)))


def test_the_retrieval_part_needs_no_model_and_ranks_with_the_tools(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["bench", "procedural", "--data", str(SCENARIOS), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| retrieve(query, tools=the task's tools) |" in printed and "not in the top 3 |" in printed
    assert "| retrieve(query, tools=every tool of the file) |" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert "learning" not in report and report["retrieval"]["procedures"] == 6  # 2 references, 4 distractors
    # each reference is the one procedure of the six that names the task's tools but a distractor
    assert report["retrieval"]["tools"]["top3"] == 2
    assert all(len(row["tools"]["returned"]) <= 3 for row in report["retrieval"]["scenarios"])


def test_learning_and_agent_with_a_model(tmp_path, server, capsys):
    fake = FakeModel()
    server.route(OPENAI_CHAT, fake)
    config = tmp_path / "settings.yaml"
    config.write_text(f"llm: {{provider: openai, model: fake, base_url: '{server.url}/v1', api_key: sk-test-000}}\n",
                      encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["--config", str(config), "bench", "procedural", "--data", str(SCENARIOS), "--agent",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    learning = json.loads(out.read_text(encoding="utf-8"))["learning"]
    assert learning["checks"] == {"passed": 4, "total": 4}
    assert learning["stored"] == 4 and learning["ungrounded"] == 0 and learning["refused"] == 2
    assert all("never called" in line for part in learning["scenarios"] for line in part["refused"])
    # beside the model's, each run's own lesson; the model's procedures alone pass the same checks
    assert learning["stored_by_engine"] == 2 and learning["checks_model_only"] == {"passed": 4, "total": 4}
    assert learning["agent"] == {"scenarios": 2, "avoided_with_memory": 2, "avoided_without_memory": 0, "calls": 4}
    # the agent saw the procedure learnt, never the user's own words
    [shown] = [p for p in fake.agent_prompts if "What worked before" in p]
    assert "book_table with day as an ISO date" in shown and "weekdays" not in shown and "Anna" not in shown
    assert "part (c)" in printed and "2/2 scenarios with the procedures' block, 0/2 without it" in printed


def test_limit_and_no_learning(tmp_path, server, capsys):
    server.route(OPENAI_CHAT, FakeModel())
    config = tmp_path / "settings.yaml"
    config.write_text(f"llm: {{provider: openai, model: fake, base_url: '{server.url}/v1', api_key: sk-test-000}}\n",
                      encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["--config", str(config), "bench", "procedural", "--data", str(SCENARIOS), "--limit", "1",
                 "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [p["name"] for p in report["learning"]["scenarios"]] == ["en_booking_iso_date"]
    assert "agent" not in report["learning"]
    assert main(["--config", str(config), "bench", "procedural", "--data", str(SCENARIOS), "--no-learning",
                 "--out", str(out)]) == 0
    assert "learning" not in json.loads(out.read_text(encoding="utf-8"))
    assert not server.requests_to(OPENAI_CHAT)[2:]  # the first run's one procedure call; none since


def test_the_agent_part_needs_a_model(capsys):
    assert main(["bench", "procedural", "--data", str(SCENARIOS), "--agent"]) == 2
    assert "need an LLM" in capsys.readouterr().err


def test_the_dev_sets_are_well_formed():
    for path, language in zip(DEV, ("en", "zh")):
        scenarios = load_scenarios(path)
        assert len(scenarios) >= 12 and {s["language"] for s in scenarios} == {language}
        assert all(s["agent"]["expect"].get("tool") for s in scenarios)


@pytest.mark.parametrize("content, problem", [
    ("[]", "non-empty JSON list"),
    ('[{"name": "x"}]', "lacks"),
    ("not json", "cannot read"),
])
def test_a_bad_scenario_file_is_refused_clearly(tmp_path, content, problem):
    path = tmp_path / "s.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValidationError, match=problem):
        load_scenarios(path)


def test_a_bad_scenario_is_named(tmp_path):
    scenario = json.loads(SCENARIOS.read_text(encoding="utf-8"))[0]
    for change, problem in (({"checks": [{"type": "magic"}]}, "unknown check"),
                            ({"reference": {"when": "x", "do": "y"}}, "needs 'when', 'do' and 'tools'"),
                            ({"runs": [{**scenario["runs"][0], "time": "2026-01-01T10:00:00"}]}, "offset")):
        path = tmp_path / "s.json"
        path.write_text(json.dumps([{**scenario, **change}]), encoding="utf-8")
        with pytest.raises(ValidationError, match=problem):
            load_scenarios(path)


def test_checks_grounding_and_calls_are_scored_as_documented():
    def memory(content: str, tools: list[str], sources: list[str], status=MemoryStatus.ACTIVE) -> Memory:
        return Memory(id=content, user_id="~procedures~:a", agent_id="a", content=content, type=MemoryType.PROCEDURE,
                      status=status, source_ids=sources, metadata={"tools": tools})
    stored = [memory("call book_table with an ISO date", ["book_table"], ["c1"]),
              memory("call book_table with a weekday", ["book_table"], ["c1"], MemoryStatus.EXPIRED)]
    assert evaluate({"type": "procedure", "all": ["book_table", "iso"]}, stored, [])
    assert evaluate({"type": "not_procedure", "any": ["weekday"]}, stored, [])  # only an expired one says it
    assert not evaluate({"type": "retrieved", "any": ["book_table"]}, stored, ["something else"])
    assert not ungrounded(stored[0], {"c1"}, {"book_table"})
    assert ungrounded(memory("x", ["reserve_seat"], ["c1"]), {"c1"}, {"book_table"})
    assert ungrounded(memory("x", ["book_table"], ["u1"]), {"c1"}, {"book_table"})  # rests on no call
    expect = {"tool": ["list_labels", "create_issue"], "arguments": {"labels": "bug\"\\]$"}}
    assert avoids({"tool": "list_labels", "arguments": {}}, expect)
    assert avoids({"tool": "create_issue", "arguments": {"labels": ["bug"]}}, expect)
    assert not avoids({"tool": "create_issue", "arguments": {"labels": ["bug-report"]}}, expect)
    assert not avoids({"tool": "close_issue"}, expect) and not avoids("book it", expect)
    context = "- Anna likes jazz\n\nWhat worked before:\n- When x: y"
    assert memory_block(context, "en") == "What worked before:\n- When x: y" and memory_block("- a", "en") == ""


def test_a_model_that_learns_nothing_leaves_the_runs_own_lessons_counted_apart(tmp_path, server, capsys):
    def nothing(server, request) -> Reply:
        return Reply(json=openai_completion(json.dumps({"procedures": []})))

    server.route(OPENAI_CHAT, nothing)
    config = tmp_path / "settings.yaml"
    config.write_text(f"llm: {{provider: openai, model: fake, base_url: '{server.url}/v1', api_key: sk-test-000}}\n",
                      encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["--config", str(config), "bench", "procedural", "--data", str(SCENARIOS), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    learning = json.loads(out.read_text(encoding="utf-8"))["learning"]
    assert learning["stored"] == learning["stored_by_engine"] == 2 and learning["ungrounded"] == 0
    assert learning["checks"] == {"passed": 4, "total": 4}
    assert learning["checks_model_only"] == {"passed": 0, "total": 4}
    assert "the model's procedures alone 0/4" in printed and "(2 the runs' own lessons)" in printed
