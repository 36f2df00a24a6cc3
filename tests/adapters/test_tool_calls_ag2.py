"""ag2 1.x: the middleware records the agent's tool calls of a turn (issue 43), with a real
``ag2.Agent`` tool loop and ag2's ``OpenAIConfig`` client talking to the fake model server."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ag2", reason="ag2 1.x is not installed")

from ag2 import Agent
from ag2.config import OpenAIConfig

from memoryscope_plugins.adapters.ag2 import MemoryScopePlugin
from tests.support import tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls


def make_agent(server, engine, name: str = "concierge", tools: list | None = None) -> Agent:
    config = OpenAIConfig(model="gpt-4o", api_key="sk-test", base_url=server.url + "/v1")
    return Agent(name, "You are a concierge.", config=config,
                 tools=[s.weather, s.book_table] if tools is None else tools,
                 plugins=[MemoryScopePlugin(engine, user_id="anna")])


def script_run(server, *calls: tuple[str, str, str]) -> None:
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(*(calls or (("c1", "weather", s.WEATHER_ARGS),
                                                 ("c2", "book_table", s.BOOKING_ARGS))))),
        Reply(json=openai_completion(s.ANSWER))])


async def test_a_turns_tool_calls_are_the_agents_once_and_never_the_users(server, engine):
    agent = make_agent(server, engine)
    script_run(server)
    reply = await agent.ask(s.REQUEST)
    assert reply.body == s.ANSWER
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))
    [failed] = engine.tool_stats("concierge", "book_table")
    assert failed.errors[0][0].startswith("RuntimeError: ")  # the exception, not ag2's traceback
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("You are welcome."))])
    await reply.ask("Thanks!")  # the stream's history holds the calls: not recorded again
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))


async def test_arguments_that_are_not_json_fail_the_turn_in_ag2_itself_which_records_its_calls_only(server, engine):
    # ag2 1.2 parses the model's arguments again for the next model call: the turn raises, with or
    # without memory; a failed turn records the calls that ran (a failed run), never the user's words
    agent = make_agent(server, engine)
    script_run(server, ("c1", "weather", s.WEATHER_ARGS), ("c9", "weather", "{city: Oslo"))
    with pytest.raises(json.JSONDecodeError):
        await agent.ask(s.REQUEST)
    [weather] = engine.tool_stats("concierge")
    assert (weather.tool, weather.calls) == ("weather", 2) and engine.list("anna") == []


async def test_a_delegated_agents_calls_are_its_own(server, engine):
    worker = make_agent(server, engine, "worker")
    lead = make_agent(server, engine, "lead", tools=[worker.as_tool(description="Does the bookings.")])
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("L1", "task_worker", '{"objective": "Book Rosa, check Oslo weather."}'))),
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion("Done: clear in Oslo, Rosa full.")),
        Reply(json=openai_completion(s.ANSWER))])
    await lead.ask(s.REQUEST)
    s.check_run(engine, "anna", "worker", timed=True, call_ids=("c1", "c2"))
    [delegation] = engine.tool_stats("lead")
    assert (delegation.tool, delegation.calls, delegation.failures) == ("task_worker", 1, 0)
