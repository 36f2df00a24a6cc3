"""The run's own lessons (`procedures.lessons`): read from a failed call and the call that then worked,
told by shapes, never by values; stored by the learning step only where the model's answer left a
failed tool without a procedure that passed the checks. The fake model answers at the HTTP boundary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memoryscope_plugins.procedures.lessons import lessons
from memoryscope_plugins.procedures.run import Run, private_words, refusal
from memoryscope_plugins.storage.base import StoredMessage
from memoryscope_plugins.types import Message, ToolCall
from tests.procedures.test_procedures import GOOD, answer, booking_run, make, pending_runs, procedures_of

AGENT = "concierge"


def run_of(*items: Any, outcome: str = "succeeded") -> Run:
    """A run from user texts (str) and calls ((name, arguments, result-or-Exception))."""
    messages = []
    for number, item in enumerate(items):
        if isinstance(item, str):
            message = Message(role="user", content=item, name="Anna")
        else:
            name, arguments, output = item
            failed = isinstance(output, Exception)
            call = ToolCall(name=name, arguments=arguments, status="error" if failed else "ok",
                            result=None if failed else output, error=str(output) if failed else None)
            message = Message(role="tool", content=str(output), tool_call=call)
        messages.append(StoredMessage(id=f"m{number}", user_id="anna", agent_id=AGENT, message=message, seq=number))
    return Run(messages=messages, outcome=outcome)


def texts(run: Run, language: str = "en") -> list[str]:
    return [f"{p.when} | {p.do} | {p.why}" for p in lessons(run, language)]


def test_a_fixed_argument_is_told_by_its_shape_never_its_value():
    run = run_of("Book Rosa's for Friday",
                 ("book_table", {"restaurant_id": 77, "day": "Friday"},
                  ValueError("Invalid date 'Friday': expected YYYY-MM-DD")),
                 ("book_table", {"restaurant_id": 77, "day": "2026-05-08"}, "booked"))
    [lesson] = lessons(run, "en")
    assert lesson.do == "pass day as text like 9999-99-99, not a word"
    assert lesson.why == "book_table failed: Invalid date <str>: expected YYYY-MM-DD"
    assert lesson.tools == ["book_table"] and lesson.calls == [1, 2]
    joined = " ".join((lesson.when, lesson.do, lesson.why))
    assert "Friday" not in joined and "2026" not in joined and "77" not in joined and "Rosa" not in joined
    assert refusal(lesson, run, private_words(run)) is None


@pytest.mark.parametrize(("old", "new", "told"), [
    ("450.00 EUR", 45000, "pass amount as an integer, not text like 999.99 AAA"),
    ("finance-team", ["finance-team"], "pass amount as a list, not a word"),
    ("800px", 800, "pass amount as an integer, not text like 999aa"),
    ("dhl express", "DHL", "pass amount as DHL"),  # the error lists it: the tool's own word
    ("German", "de", "pass amount as text like aa, not a word"),
    (3, 3.5, "pass amount as a number, not an integer"),
    ("五一", "2026-05-01", "pass amount as text like 9999-99-99, not Chinese text"),
])
def test_shapes(old, new, told):
    run = run_of(("pay", {"amount": old}, ValueError("bad amount; one of DHL, UPS")), ("pay", {"amount": new}, "ok"))
    assert [lesson.do for lesson in lessons(run, "en")] == [told]


def test_a_call_in_between_that_gave_the_value_comes_first():
    run = run_of(("get_forecast", {"location": "Porto", "days": 1}, ValueError("unknown location id 'Porto'")),
                 ("lookup_city", {"query": "Porto"}, "Porto, PT: id 2735943"),
                 ("get_forecast", {"location": 2735943, "days": 1}, "rain"))
    [lesson] = lessons(run, "en")
    assert lesson.do == "first call lookup_city; pass location from what lookup_city returns"
    assert lesson.tools == ["get_forecast", "lookup_city"] and lesson.calls == [1, 2, 3]
    assert "Porto" not in lesson.why and "2735943" not in lesson.do
    # a path built on a folder a call returned, and a list of labels a call listed
    path = run_of(("read_file", {"path": "app.toml"}, ValueError("relative paths are not allowed")),
                  ("get_workdir", {}, "/srv/project"), ("read_file", {"path": "/srv/project/app.toml"}, "[server]"))
    assert [p.do for p in lessons(path, "en")] == ["first call get_workdir; pass path from what get_workdir returns"]
    labels = run_of(("create_issue", {"labels": ["bug-report"]}, ValueError("label 'bug-report' not found")),
                    ("list_labels", {}, "bug, enhancement, docs"), ("create_issue", {"labels": ["bug"]}, "#412"))
    assert [p.do for p in lessons(labels, "en")] == [
        "first call list_labels; pass labels from what list_labels returns"]


def test_a_long_text_is_told_by_the_words_the_tools_showed():
    run = run_of(("run_query", {"sql": "SELECT count(*) FROM orders WHERE date >= '2026-03-01'"},
                  ValueError('column "date" does not exist')),
                 ("describe_table", {"table": "orders"}, "id, customer_id, created_at"),
                 ("run_query", {"sql": "SELECT count(*) FROM orders WHERE created_at >= '2026-03-01'"}, "1843"))
    [lesson] = lessons(run, "en")
    assert lesson.do == "first call describe_table; in sql, use created_at instead of date"
    # words no tool showed (the user's own text changed) are not told: no lesson
    private = run_of(("search", {"q": "flowers for my mother's birthday on Sunday morning please"},
                      ValueError("timeout")),
                     ("search", {"q": "flowers for my sister's wedding on Sunday morning please"}, "3 shops"))
    assert lessons(private, "en") == []


def test_a_replacement_tool_the_error_names():
    run = run_of(("search_flights_v1", {"from": "MAD"},
                  ValueError("search_flights_v1 is deprecated; use search_flights")),
                 ("search_flights", {"origin": "MAD"}, "3 flights"))
    [lesson] = lessons(run, "en")
    assert lesson.do == "call search_flights instead of search_flights_v1"
    assert lesson.tools == ["search_flights_v1", "search_flights"]
    # another tool that worked but that the error does not name is no replacement
    other = run_of(("search_flights_v1", {"from": "MAD"}, ValueError("timeout")), ("weather", {"city": "MAD"}, "sun"))
    assert lessons(other, "en") == []


def test_no_lesson_without_a_fix():
    never_fixed = run_of(("add_expense", {"category": "food"}, ValueError("unknown category 'food'")))
    same_again = run_of(("ping", {"host": "a"}, ValueError("timeout")), ("ping", {"host": "a"}, "pong"))
    no_failure = run_of(("ping", {"host": "a"}, "pong"))
    assert lessons(never_fixed, "en") == lessons(same_again, "en") == lessons(no_failure, "en") == []
    # one lesson per failed tool: its first failure
    twice = run_of(("pay", {"amount": "1 EUR"}, ValueError("integer")),
                   ("pay", {"amount": "2 EUR"}, ValueError("integer")), ("pay", {"amount": 200}, "ok"))
    assert len(lessons(twice, "en")) == 1


def test_chinese_wording_and_values_taken_out_of_the_error():
    run = run_of(("get_weather", {"city": "成都"}, ValueError("未知的城市编码：成都")),
                 ("search_city", {"keyword": "成都"}, "成都市，adcode 510100"),
                 ("get_weather", {"city": 510100}, "小雨"))
    [lesson] = lessons(run, "zh")
    assert (lesson.when, lesson.do) == ("调用 get_weather 时", "先调用 search_city；city 用 search_city 返回的值")
    assert lesson.why == "get_weather 报错：未知的城市编码：<str>"
    transfer = run_of(("transfer", {"payee": "房东", "amount": "3500元"}, ValueError("amount 必须是以分为单位的整数")),
                      ("transfer", {"payee": "房东", "amount": 350000}, "转账成功"))
    assert [p.do for p in lessons(transfer, "zh")] == [
        "amount 写成整数，不是中文；amount 的数值乘以一百（比如 1 写成 100）"]


HUNDRED = "multiply the number in amount by a hundred (1 becomes 100)"


@pytest.mark.parametrize(("old", "new", "error", "told"), [
    (480, 48000, "amount must be an integer number of cents", [HUNDRED]),
    ("12.5 EUR", 1250, "amount: minor units (cents) expected",
     ["pass amount as an integer, not text like 99.9 AAA", HUNDRED]),
    (30000, 30, "amount is in seconds", ["divide the number in amount by a thousand (1000 becomes 1)"]),
    (1, 10, "page 1 is empty", []),  # no unit named: a page is not a unit's change
    (3, 7, "amount is in cents", []),  # no power of ten
    (1, 10, "分页参数错误", []),  # 分 of 分页 is no unit
    (5, 50, "角色不存在", []),  # nor 角 of 角色
    (1000, 100, "the second argument, amount, must be at most 100", []),  # an ordinal, not seconds
    ("-5", 500, "amount is in cents", ["pass amount as an integer, not text like -9"]),  # a sign is no factor
])
def test_a_number_in_other_units_is_told_by_its_factor_in_words(old, new, error, told):
    run = run_of("Pay the 480 bill, 12.5 EUR, wait 30 s", ("pay", {"amount": old}, ValueError(error)),
                 ("pay", {"amount": new}, "ok"))
    found = lessons(run, "en")
    assert [p.do for p in found] == (["; ".join(told)] if told else [])
    for lesson in found:  # the factor is in words: no number of the run, and the checks pass
        assert refusal(lesson, run, private_words(run)) is None


def test_a_unit_change_is_told_of_the_argument_the_error_names_only():
    run = run_of(("pay", {"amount": 480, "page": 1}, ValueError("amount must be an integer number of cents")),
                 ("pay", {"amount": 48000, "page": 10}, "ok"))
    assert [p.do for p in lessons(run, "en")] == [HUNDRED]


def test_the_example_of_a_unit_change_is_left_out_when_the_user_wrote_its_number():
    run = run_of("Set the timeout to 3 s, I said 1000 times", ("wait", {"amount": 3}, ValueError("in milliseconds")),
                 ("wait", {"amount": 3000}, "ok"))
    [lesson] = lessons(run, "en")
    assert lesson.do == "multiply the number in amount by a thousand"
    assert refusal(lesson, run, private_words(run)) is None


# -- in the learning step, with the fake model -----------------------------------------------------------

def test_a_refused_answer_leaves_the_runs_own_lesson(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer({**GOOD, "when": "Anna books a table"})]  # personal data: refused
    engine = make(tmp_path, server, local_embedder, engine_lessons=True)
    try:
        ids = engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        report = engine.consolidate()
        [procedure] = procedures_of(engine)
        assert procedure.content == ("When calling book_table: pass day as text like 9999-99-99, not a word "
                                     "(why: book_table failed: Invalid date <str>: expected YYYY-MM-DD)")
        assert procedure.metadata["by"] == "engine" and procedure.metadata["tools"] == ["book_table"]
        assert ids[2] in procedure.source_ids and ids[4] in procedure.source_ids  # the failed and the fixed call
        assert [line.split(":")[0] for line in report.rejected] == ["copies personal data"]
        assert {m.state for m in pending_runs(engine)} == {"done"}
        # the same lesson from another user's run adds a run to it: one procedure, no user's value in it
        teacher.queue = [answer()]
        engine.record("bob", booking_run("bob", "Bob", 5), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        [again] = procedures_of(engine)
        assert again.id == procedure.id and again.metadata["runs"] == 2
    finally:
        engine.close()


def test_the_models_procedure_and_the_runs_lesson_stand_side_by_side(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD), answer(GOOD)]
    engine = make(tmp_path, server, local_embedder, engine_lessons=True)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        stored = procedures_of(engine)
        assert sorted(m.metadata["by"] for m in stored) == ["engine", "model"]
        [model] = [m for m in stored if m.metadata["by"] == "model"]
        assert model.content.startswith("When booking a table")
        # a second run teaching the same: each of the two gains a run, nothing new
        engine.record("bob", booking_run("bob", "Bob", 5), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert [m.metadata["runs"] for m in procedures_of(engine)] == [2, 2]
    finally:
        engine.close()


def test_the_lessons_count_toward_max_per_run_after_the_models(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer(GOOD)]
    engine = make(tmp_path, server, local_embedder, engine_lessons=True, max_per_run=1)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert [m.metadata["by"] for m in procedures_of(engine)] == ["model"]
    finally:
        engine.close()


def test_no_lesson_while_the_answer_does_not_account_for_the_run(tmp_path, server, teacher, local_embedder):
    # prose without the list, then an answer cut off at the token cap: the run stays pending, nothing stored
    bad = [("I think the agent should use ISO dates.", "stop"), ('{"procedures": [{"when": "bo', "length"),
           ('{"lessons": ["use ISO dates"]}', "stop")]
    teacher.queue = bad * 3
    engine = make(tmp_path, server, local_embedder, engine_lessons=True)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        for _ in range(4):  # up to max_attempts and past it: given up on, never stored half
            engine.consolidate()
            assert procedures_of(engine) == []
            assert {m.state for m in pending_runs(engine)} <= {"pending", "failed"}
        assert len(teacher.procedure_prompts) >= 3
    finally:
        engine.close()


def test_lessons_can_be_turned_off(tmp_path, server, teacher, local_embedder):
    teacher.queue = [answer()]
    engine = make(tmp_path, server, local_embedder, engine_lessons=False)
    try:
        engine.record("anna", booking_run(), agent_id=AGENT, run_outcome="succeeded")
        engine.consolidate()
        assert procedures_of(engine) == []
        assert {m.state for m in pending_runs(engine)} == {"done"}
    finally:
        engine.close()


def test_every_lesson_of_the_dev_scenarios_passes_the_checks_and_holds_no_user_value():
    """The bench files' runs (bench/data), read as the learning step reads them: each lesson is accepted
    by `refusal`, and no argument value a user gave (a name, a place, a date, an amount) is in it."""
    from pathlib import Path
    folder = Path(__file__).resolve().parents[2] / "bench" / "data"
    told = 0
    for name in ("procedural_dev_en.json", "procedural_dev_zh.json"):
        for scenario in json.loads((folder / name).read_text(encoding="utf-8")):
            for raw in scenario["runs"]:
                items: list[Any] = []
                for m in raw["messages"]:
                    call = m.get("tool_call")
                    if call is None and m["role"] == "user":
                        items.append(m["content"])
                    elif call is not None:
                        items.append((call["name"], call["arguments"],
                                      ValueError(call["error"]) if "error" in call else call.get("result", "")))
                run = run_of(*items, outcome=raw["outcome"])
                user_values = {str(v) for m in raw["messages"] if m.get("tool_call")
                               for v in m["tool_call"]["arguments"].values()
                               if isinstance(v, (str, int)) and not isinstance(v, bool) and len(str(v)) >= 3}
                for lesson in lessons(run, scenario["language"]):
                    told += 1
                    assert refusal(lesson, run, private_words(run)) is None
                    text = " ".join((lesson.when, lesson.do, lesson.why))
                    # a value is told only when it is the tool's own word, listed by its error ("DHL", "SF")
                    assert {v for v in user_values if v in text} <= {"DHL", "SF"}, (scenario["name"], text)
    assert told >= 20
