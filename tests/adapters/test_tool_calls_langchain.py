"""LangChain 1.x: the middleware records the agent's tool calls of a run (issue 43), with a real
``create_agent`` tool loop and ``ChatOpenAI`` talking to the fake model server over HTTP."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain.agents.middleware", reason="LangChain 1.x is missing")
pytest.importorskip("langchain_openai", reason="langchain-openai is missing")

from langchain.agents import create_agent
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from memoryscope_plugins.adapters._tool_capture import UNPARSED
from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware
from tests.support import tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls


def failing_booking(restaurant: str, day: str) -> str:
    """Book a table at a restaurant."""
    raise ToolException(s.FULL)


def make_agent(server, engine):
    model = ChatOpenAI(model="fake", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    tools = [StructuredTool.from_function(s.weather, name="weather"),
             StructuredTool.from_function(failing_booking, name="book_table", handle_tool_error=True)]
    return create_agent(model, tools=tools, name="concierge", checkpointer=InMemorySaver(),
                        middleware=[MemoryScopeMiddleware(engine, user_id="anna")])


def script_run(server) -> None:
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER))])


def test_a_runs_tool_calls_are_the_agents_once_and_never_the_users(server, engine):
    agent = make_agent(server, engine)
    script_run(server)
    config = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [{"role": "user", "content": s.REQUEST}]}, config)
    assert out["messages"][-1].content == s.ANSWER
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("You are welcome."))])
    agent.invoke({"messages": [{"role": "user", "content": "Thanks!"}]}, config)  # the history holds the calls
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))  # still once each


async def test_the_async_run_records_the_same(server, engine):
    agent = make_agent(server, engine)
    script_run(server)
    await agent.ainvoke({"messages": [{"role": "user", "content": s.REQUEST}]}, {"configurable": {"thread_id": "t"}})
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))


def test_arguments_that_are_not_json_never_break_the_run(server, engine):
    agent = make_agent(server, engine)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c9", "weather", "{city: Oslo"))),
        Reply(json=openai_completion(s.ANSWER))])
    agent.invoke({"messages": [{"role": "user", "content": s.REQUEST}]}, {"configurable": {"thread_id": "t"}})
    calls = [m.message.tool_call for m in s.logged_calls(engine, "anna")]
    assert [(c.call_id, c.status, c.arguments) for c in calls] == [
        ("c1", "ok", {"city": "Oslo"}), ("c9", "error", {UNPARSED: "{city: Oslo"})]  # LangChain's answer: an error
    assert sorted(m.role for m in engine.list("anna")) == ["assistant", "user"]
