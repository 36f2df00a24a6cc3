"""The checks a procedure the model wrote must pass (`procedures.run.refusal`), on English and
Chinese runs: personal names judged against the run (not against capitals), a failed call told again,
dates that are no phone numbers, short quotes; and every hand-written reference procedure of the
benchmark's dev sets passes the checks against its own run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memoryscope_plugins.procedures.personal import run_names
from memoryscope_plugins.procedures.run import Proposed, Run, private_words, refusal
from memoryscope_plugins.storage.base import StoredMessage
from memoryscope_plugins.tool_calls import check_tool_call
from memoryscope_plugins.types import Message

BENCH = Path(__file__).resolve().parents[2] / "bench" / "data"


def make_run(messages: list[dict[str, Any]], outcome: str = "succeeded", user: str = "anna",
             name: str | None = None) -> Run:
    stored = []
    for seq, raw in enumerate(messages):
        call = check_tool_call(raw["tool_call"], "tool_call", 10_000) if "tool_call" in raw else None
        message = Message(role=raw["role"], content=raw.get("content", ""), tool_call=call,
                          name=raw.get("name", name if raw["role"] == "user" else None))
        stored.append(StoredMessage(id=f"m{seq}", user_id=user, agent_id="concierge", message=message, seq=seq))
    return Run(messages=stored, outcome=outcome)


EN_RUN = make_run([
    {"role": "user", "content": "Hi, I'm Anna Li. Book a table at Rosa's for Friday for me and my German colleague "
                                "Jonas, in ISO format please."},
    {"role": "tool", "tool_call": {"name": "find_restaurant", "arguments": {"name": "Rosa's"},
                                   "result": "Rosa's, id 77"}},
    {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"restaurant_id": 77, "day": "Friday",
                                                                       "guest_name": "dana", "party_size": 2},
                                   "error": "Invalid date 'Friday': expected YYYY-MM-DD"}},
    {"role": "user", "content": "no, use ISO dates. and call anna back when it's done"},
    {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"restaurant_id": 77, "day": "2026-05-08",
                                                                       "guest_name": "dana", "people": 2},
                                   "result": "booked"}},
    {"role": "assistant", "content": "Booked for Friday, 8 May. I told Jonas."},
], name="Anna")

ZH_RUN = make_run([
    {"role": "user", "content": "帮我给王芳订一张周五的桌子，我同事小林也来，她说德语"},
    {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"day": "周五", "联系人": "王芳"},
                                   "error": "日期格式错误：周五"}},
    {"role": "user", "content": "不对，用 ISO 日期"},
    {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"day": "2026-05-08", "联系人": "王芳"},
                                   "result": "订好了"}},
    {"role": "assistant", "content": "订好了，已通知李明。"},
], user="wf", name="芳芳")


def check(run: Run, do: str, *, when: str = "booking a table", why: str = "call 2 failed",
          tools: tuple[str, ...] = ("book_table",), calls: tuple[int, ...] = (2,)) -> str | None:
    proposed = Proposed(when=when, do=do, why=why, tools=list(tools), calls=list(calls))
    return refusal(proposed, run, private_words(run))


@pytest.mark.parametrize("do", [
    "call book_table with day as an ISO date (YYYY-MM-DD), never a weekday name like Friday",
    "call book_table; a German guest counts like any other, on a Friday in May",
    "call book_table with guest_name and an ISO date; ask in English or German",
    "book_table wants the day in ISO 8601 (UTC offsets optional), as JSON",
    "call book_table with day 2026-05-08 instead of Friday",  # an ISO date is no phone number
    "call book_table with people, not party_size",
    "call book_table with an ISO date, e.g. 2026-05-08, i.e. year first",  # abbreviations are no code words
    "call book_table for the restaurant id find_restaurant returns, 19:00 on Mondays in March",
])
def test_english_words_that_are_no_names_and_no_repeat_pass(do):
    assert check(EN_RUN, do) is None


@pytest.mark.parametrize("do, why", [
    ("call anna back after book_table", "the user id, written in lower case"),
    ("call Anna Li back after book_table", "the user's name"),
    ("call book_table for Jonas", "a colleague the user named"),
    ("tell jonas once book_table says booked", "the same name in lower case"),
    ("call book_table with guest_name dana", "a person argument's value, written in lower case only"),
    ("call book_table and mail anna.li@example.com", "an e-mail address"),
    ("call book_table, then phone +49 170 1234567", "a phone number"),
])
def test_english_personal_names_are_refused(do, why):
    assert check(EN_RUN, do) == "copies personal data", why


@pytest.mark.parametrize("do", [
    "call book_table with day Friday",
    "call book_table with day set to Friday as the user said",
    "call book_table with party_size 2",
])
def test_telling_the_failed_call_again_is_refused(do):
    assert check(EN_RUN, do) == "repeats a failed call"


def test_the_last_call_of_a_failed_run_is_a_failed_call_and_a_succeeded_retry_is_not():
    failed = make_run([
        {"role": "user", "content": "Weather for the old harbour please"},
        {"role": "tool", "tool_call": {"name": "get_forecast", "arguments": {"location": "old harbour"},
                                       "result": "[]"}},
        {"role": "assistant", "content": "I found nothing."},
    ], outcome="failed")
    assert check(failed, "call get_forecast with location old harbour", tools=("get_forecast",), calls=(1,)) == \
        "repeats a failed call"
    assert check(failed, "call get_forecast with a numeric location id, not a place name like old harbour",
                 tools=("get_forecast",), calls=(1,)) is None
    retried = make_run([
        {"role": "tool", "tool_call": {"name": "get_forecast", "arguments": {"location": "old harbour"},
                                       "error": "timeout"}},
        {"role": "tool", "tool_call": {"name": "get_forecast", "arguments": {"location": "old harbour"},
                                       "result": "sunny"}},
    ])  # the same value worked later: the error was not about it
    assert check(retried, "call get_forecast with location old harbour again after a timeout",
                 tools=("get_forecast",), calls=(1, 2)) is None


@pytest.mark.parametrize("do, expected", [
    ("调用 book_table 时 day 用 ISO 日期（YYYY-MM-DD），不要写周五", None),
    ("调用 book_table，说德语的客人也一样", None),
    ("调用 book_table 时把“周五”换算成 2026-05-08 这样的日期", None),  # the correction, with the value that worked
    ("调用 book_table 时 day 写周五", "repeats a failed call"),
    ("给王芳订座时调用 book_table", "copies personal data"),  # the tagger reads 王芳订 in the run
    ("调用 book_table 后通知李明", "copies personal data"),  # named by the agent
    ("调用 book_table 后告诉小林", "copies personal data"),  # after a relation word
    ("调用 book_table 前先问芳芳", "copies personal data"),  # the speaker's name
])
def test_chinese_runs(do, expected):
    assert check(ZH_RUN, do, when="订餐桌", why="第 1 次调用失败", calls=(1,)) == expected


def test_the_names_of_a_run_are_its_peoples_not_its_capitals():
    names = {name.casefold() for name in run_names(EN_RUN, private_words(EN_RUN))}
    assert {"anna", "anna li", "jonas", "dana"} <= names
    assert not names & {"german", "friday", "iso", "may", "book_table", "guest_name", "hi", "i'm", "rosa's"}
    assert {"王芳", "小林", "李明", "芳芳"} <= run_names(ZH_RUN, private_words(ZH_RUN))


def test_a_short_quote_is_not_read_as_the_start_of_a_longer_one():
    # “周五” (two characters) once opened a "quote" that ran on to the next closing mark
    assert check(ZH_RUN, "调用 book_table 时 day 用 ISO 日期，不能写“周五”这类说法", when="订餐桌",
                 why="book_table 收到“周五”时报日期格式错误", calls=(1,)) is None
    assert check(ZH_RUN, "调用 book_table 时写“下个星期五晚上”", when="订餐桌", calls=(1,)) == \
        "quotes a text the run does not hold"


def _runs_of(scenario: dict[str, Any]) -> list[Run]:
    return [make_run(run["messages"], run["outcome"], scenario["user_id"], scenario.get("user_name"))
            for run in scenario["runs"]]


@pytest.mark.parametrize("path", ["procedural_dev_en.json", "procedural_dev_zh.json"])
def test_every_reference_procedure_of_the_benchmark_passes_against_its_last_run(path):
    """The procedures a careful reader takes from the dev sets' runs (written by hand) are what the
    checks must let through: none is refused as personal data or as a repeated failure."""
    refused = {}
    for scenario in json.loads((BENCH / path).read_text(encoding="utf-8")):
        run = _runs_of(scenario)[-1]
        reference = scenario["reference"]
        tools = [tool for tool in reference["tools"] if tool in run.tool_names()]
        proposed = Proposed(when=reference["when"], do=reference["do"], why=reference["why"], tools=tools)
        reason = refusal(proposed, run, private_words(run))
        if reason is not None and not (reason.startswith("names a tool") and len(scenario["runs"]) > 1):
            refused[scenario["name"]] = reason  # a reference over two runs may name the first run's tool
    allowed = {"zh_route_coordinates": "quotes a text the run does not hold"}  # “经度,纬度”: the run writes 经度、纬度
    assert refused == {k: v for k, v in allowed.items() if path.endswith("zh.json")}


def test_the_failed_call_the_small_model_wrote_as_a_procedure_is_refused():
    """docs/benchmarks.md, "Procedures": the 1.5B model stored the failing transfer as the procedure."""
    [scenario] = [s for s in json.loads((BENCH / "procedural_dev_zh.json").read_text(encoding="utf-8"))
                  if s["name"] == "zh_transfer_fen"]
    [run] = _runs_of(scenario)
    written = "transfer {'amount': '3500元', ...} -> error: amount 必须是以分为单位的整数"
    assert check(run, written, when="转账", tools=("transfer",), calls=(1,)) == "repeats a failed call"
    # as the model wrote it, its `when` also copies the user's rent: refused for that first
    assert check(run, written, when="给房东转 3500 块房租", tools=("transfer",), calls=(1,)) == "copies personal data"
    assert check(run, "调用 transfer 时 amount 写 350000（以分为单位的整数）", when="转账", tools=("transfer",),
                 calls=(1, 2)) is None


def test_a_tools_own_terms_are_no_names_and_a_list_of_guests_is():
    run = make_run([
        {"role": "user", "content": "Log 38 euros for dinner with two friends. Dinner goes under Meals."},
        {"role": "tool", "tool_call": {"name": "add_expense", "arguments": {
            "amount": 38, "category": "Meals", "attendees": ["priya", "tom"]}, "result": "logged"}},
    ])
    assert check(run, "call add_expense with category Meals for a dinner", tools=("add_expense",), calls=(1,)) is None
    assert check(run, "call add_expense and list tom among the attendees", tools=("add_expense",),
                 calls=(1,)) == "copies personal data"


def test_a_user_id_that_is_a_role_word_is_no_name():
    messages = [{"role": "user", "content": "Book Friday"},
                {"role": "tool", "tool_call": {"name": "book_table", "arguments": {"day": "2026-05-08"},
                                               "result": "booked"}}]
    role_ids = make_run(messages, user="user", name="guest")
    assert check(role_ids, "ask the user for the day, then call book_table with an ISO date for the guest",
                 calls=(1,)) is None
    assert check(make_run(messages, user="kim"), "ask kim for the day before book_table", calls=(1,)) == \
        "copies personal data"


def test_a_failed_call_copied_as_the_run_shows_it_is_refused():
    """The 1.5B model wrote the prompt's line of the failed call as the procedure (docs/benchmarks.md)."""
    run = make_run([
        {"role": "user", "content": "Open the app config"},
        {"role": "tool", "tool_call": {"name": "read_file", "arguments": {"path": "config/app.toml"},
                                       "error": "No such file: config/app.toml"}},
        {"role": "tool", "tool_call": {"name": "read_file", "arguments": {"path": "/srv/app/config/app.toml"},
                                       "result": "[app] port = 8080"}},
    ])
    copied = "read_file {'path': 'config/app.toml'} -> error: No such file"
    assert check(run, copied, tools=("read_file",), calls=(1,)) == "repeats a failed call"
    fixed = "pass read_file an absolute path like /srv/app/config/app.toml, not config/app.toml"
    assert check(run, fixed, tools=("read_file",), calls=(1, 2)) is None


@pytest.mark.parametrize("do, run", [
    ("resize_image {", EN_RUN),  # the 1.5B model's answer, verbatim, in the English bench run
    ("call book_table with {'day': '2026-05-08', 'people': 2", EN_RUN),
    ("call book_table (with an ISO date", EN_RUN),
    ("call book_table ] with an ISO date [", EN_RUN),
    ("add_expense {（原因：用户说类别只有餐饮、交通、办公这三个", ZH_RUN),  # the same in the Chinese run
])
def test_a_field_whose_brackets_do_not_close_is_cut_off(do, run):
    assert check(run, do) == "is cut off"


@pytest.mark.parametrize("do", [
    "call book_table with {'day': '2026-05-08', 'people': 2} (an ISO date)",
    "call book_table with day [YYYY-MM-DD]; the restaurant id from find_restaurant (not its name)",
])
def test_brackets_that_close_pass(do):
    assert check(EN_RUN, do) is None


@pytest.mark.parametrize(("do", "expected"), [
    ("call route_plan with origin 116.3975,39.9087", "copies personal data"),  # the office, swapped
    ("call route_plan with origin as longitude,latitude, e.g. 116.3975,39.9087", "copies personal data"),
    ("call transfer with amount 350000 for a rent of 3500", "copies personal data"),
    ("call transfer with amount in fen: 100 yuan is 10000", None),  # numbers of its own
    ("call route_plan with longitude first, as 999.9999,99.9999", None),
    ("call route_plan on 2026-05-08 at 19:00", None),  # a date and a time are no user's number
    ("call route_plan, then wait 350 ms", None),  # fewer than four digits
])
def test_a_number_the_user_wrote_is_personal(do, expected):
    run = make_run([
        {"role": "user", "content": "How long to the airport? The office is at 39.9087, 116.3975. Rent 3500 too."},
        {"role": "tool", "tool_call": {"name": "route_plan", "arguments": {"origin": "39.9087,116.3975"},
                                       "error": "longitude first"}},
        {"role": "tool", "tool_call": {"name": "route_plan", "arguments": {"origin": "116.3975,39.9087"},
                                       "result": "42 min"}},
        {"role": "tool", "tool_call": {"name": "transfer", "arguments": {"amount": 350000}, "result": "ok"}},
    ])
    assert check(run, do, when="planning a route", tools=("route_plan",), calls=(2,)) == expected
