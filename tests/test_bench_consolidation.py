"""The consolidation benchmark end to end: the CLI, a fresh store per scenario, the worker running,
and the fake model behind real HTTP, answering as a strong model would (every check must pass) and
as a weak one does (cut-off answers: nothing may be marked done without a verdict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.fake_model_server import OPENAI_CHAT, Reply
from test_consolidation_helpers import Brain, Prompt, obs

from memoryscope_plugins.bench.consolidation import evaluate, load_scenarios, matches
from memoryscope_plugins.cli.main import main
from memoryscope_plugins.errors import ValidationError
from memoryscope_plugins.types import Memory, MemoryStatus

SCENARIOS = Path(__file__).parent / "data" / "consolidation_scenarios.json"

# What a strong model writes for each user message of the scenarios above.
OBSERVATIONS = {
    "I work as a baker in Lyon.": [obs("Omar works as a baker.", [], about="Omar"),
                                   obs("Omar lives in Lyon.", [], about="Omar")],
    "Yes. Please remember my bike lock code is 5190.": [obs("Omar's bike lock code is 5190.", [], about="Omar",
                                                            importance=3)],
    "Big news: I quit the bakery last month and now I teach cooking classes.": [
        obs("Omar no longer works as a baker; he quit the bakery.", [], about="Omar", kind="event",
            time="last month", date="2026-04"),
        obs("Omar teaches cooking classes.", [], about="Omar")],
    "Also, I still live in Lyon.": [obs("Omar lives in Lyon.", [], about="Omar")],
    "My daughter Sofia is seven and loves drawing.": [obs("Ines's daughter Sofia is seven.", [], about="Sofia"),
                                                      obs("Sofia loves drawing.", [], about="Sofia")],
    "She hates chess, no way.": [obs("Sofia hates chess.", [], about="Sofia")],
    "In the story I'm writing, a dragon runs a bakery.": [
        obs("Ines is writing a story.", [], about="Ines"),
        obs("In Ines's story a dragon runs a bakery.", [], about="Ines", reality="fiction", importance=1)],
    "Tomorrow I'm taking Sofia to the art museum.": [
        obs("Ines is taking Sofia to the art museum.", [], about="Ines", kind="plan", time="Tomorrow",
            date="2026-06-04")],
    "我在深圳做程序员，平时不喝酒。": [obs("周航在深圳做程序员。", [], about="周航"), obs("周航不喝酒。", [], about="周航")],
    "最近开始喝红酒了，周末会喝一杯。": [obs("周航开始喝红酒了，周末会喝一杯。", [], about="周航")],
    "上周六我去了香港。": [obs("周航去了香港。", [], about="周航", kind="event", time="上周六", date="2026-03-14")],
}
OUTDATED = {("Omar works as a baker.", "Omar no longer works as a baker; he quit the bakery."),
            ("周航不喝酒。", "周航开始喝红酒了，周末会喝一杯。")}


def strong_extract(prompt: Prompt) -> list[dict]:
    out = []
    for number, _stamp, _speaker, content in prompt.new:
        for item in OBSERVATIONS.get(content, []):
            out.append({**item, "messages": [number]})
    return out


def strong_judge(prompt: Prompt) -> list[str]:
    return ["outdated" if (old, new) in OUTDATED else "same" if old == new else "both" for _, old, new in prompt.pairs]


def strong_reflect(prompt: Prompt) -> list[dict]:
    family = [label for label, text in prompt.observations.items() if "Sofia" in text and label not in prompt.expired]
    if not family:
        return []
    value = " ".join(prompt.observations[label] for label in family)
    return [{"subject": "Family of Ines", "value": value, "sources": family, "update": None, "merge": []}]


def run_bench(tmp_path, server, capsys) -> dict:
    config = tmp_path / "settings.yaml"
    config.write_text(f"llm: {{provider: openai, model: fake, base_url: '{server.url}/v1', api_key: sk-test-000}}\n"
                      "consolidation: {every_seconds: 0.2}\n", encoding="utf-8")
    out = tmp_path / "report.json"
    assert main(["--config", str(config), "bench", "consolidation", "--scenarios", str(SCENARIOS),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| check type |" in printed and "silent losses" in printed
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_a_strong_model_passes_every_check(tmp_path, server, capsys):
    brain = Brain()
    brain.extract, brain.judge, brain.reflect = strong_extract, strong_judge, strong_reflect
    server.route(OPENAI_CHAT, brain)
    report = run_bench(tmp_path, server, capsys)
    failed = [(s["name"], f) for s in report["scenarios"] for f in s["failed"]]
    assert failed == []
    assert report["checks"]["passed"] == report["checks"]["total"] == 15
    assert set(report["checks"]["by_type"]) == {"active", "not_active", "expired", "event", "recall", "count_max"}
    assert report["messages"] == {"recorded": 16, "done": 16, "pending": 0, "failed": 0, "dropped": 0}
    assert report["silent_losses"] == 0
    assert report["llm"]["calls"] >= 5 and report["llm"]["tokens"] > 0
    assert report["record_ms"]["n"] == 16


@pytest.mark.slow
def test_a_model_that_cuts_off_every_answer_loses_nothing(tmp_path, server, capsys):
    """Every extraction answer stops at the cap after the first entry: each message still ends done
    only with a verdict, or pending / failed; never done silently."""
    brain = Brain()
    brain.extract = strong_extract

    def cut(server_, request):
        reply = brain(server_, request)
        body = reply.json
        text = body["choices"][0]["message"]["content"]
        if '"says"' in json.dumps(request.json.get("messages", [])[0]) and '{"n": 2' in text:
            body["choices"][0]["message"]["content"] = text[:text.index('{"n": 2') + 12]
            body["choices"][0]["finish_reason"] = "length"
        return Reply(json=body)

    server.route(OPENAI_CHAT, cut)
    report = run_bench(tmp_path, server, capsys)
    messages = report["messages"]
    assert report["silent_losses"] == 0 and messages["dropped"] == 0
    assert messages["done"] + messages["pending"] + messages["failed"] == messages["recorded"] == 16
    assert messages["done"] == 16  # asked again one by one, every message got its verdict


def test_checks_match_as_documented():
    memory = Memory(id="1", user_id="u", agent_id="a", content="Priya drinks green tea now.")
    assert matches(memory, {"all": ["green tea"], "any": ["priya", "drink"]})
    assert not matches(memory, {"any": ["coffee"]})
    assert not matches(memory, {"any": ["tea"], "none": ["NOW"]})
    old = Memory(id="2", user_id="u", agent_id="a", content="Priya drinks coffee.", status=MemoryStatus.EXPIRED,
                 superseded_by="1")
    assert evaluate({"type": "expired", "any": ["coffee"], "superseded": True}, [memory, old], lambda c: [])
    old.superseded_by = "gone"
    assert not evaluate({"type": "expired", "any": ["coffee"], "superseded": True}, [memory, old], lambda c: [])
    assert evaluate({"type": "count_max", "any": ["priya"], "max": 1}, [memory, old], lambda c: [])
    assert evaluate({"type": "not_active", "any": ["coffee"]}, [memory, old], lambda c: [])


@pytest.mark.parametrize("content, problem", [
    ("{}", "non-empty JSON list"),
    ('[{"name": "x"}]', "lacks"),
    ('[{"name": "x", "user_id": "u", "sessions": [{"time": "2026-01-01T10:00:00", "messages": []}], "checks": []}]',
     "offset"),
    ('[{"name": "x", "user_id": "u", "sessions": [{"time": "2026-01-01T10:00:00+00:00", "messages": []}], '
     '"checks": [{"type": "magic"}]}]', "unknown check"),
    ("not json", "cannot read"),
])
def test_a_bad_scenario_file_is_refused_clearly(tmp_path, content, problem):
    path = tmp_path / "s.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValidationError, match=problem):
        load_scenarios(path)


def test_the_bench_needs_a_model(tmp_path, capsys):
    assert main(["bench", "consolidation", "--scenarios", str(SCENARIOS)]) != 0
    assert "needs an LLM" in capsys.readouterr().err
