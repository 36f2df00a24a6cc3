"""AgentScope 2.x: the middleware records the agent's tool calls of a reply (issue 43), with a real
``Agent`` tool loop, a real ``Toolkit`` and ``OpenAIChatModel`` talking to the fake model server."""

from __future__ import annotations

import pytest

pytest.importorskip("agentscope.middleware", reason="AgentScope 2.x is not installed")

from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.message import TextBlock, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk, Toolkit

from memoryscope_plugins.adapters._tool_capture import UNPARSED
from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware
from tests.support import tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls


def weather(city: str) -> ToolChunk:
    """Today's weather in a city."""
    return ToolChunk(content=[TextBlock(type="text", text=s.weather(city))])


def book_table(restaurant: str, day: str) -> ToolChunk:
    """Book a table at a restaurant."""
    return ToolChunk(content=[TextBlock(type="text", text=s.book_table(restaurant, day))])  # raises


def make_agent(server, engine) -> Agent:
    model = OpenAIChatModel(credential=OpenAICredential(api_key="sk-test", base_url=server.url + "/v1"),
                            model="fake", stream=False, max_retries=0)
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tools")
    toolkit = Toolkit(tools=[FunctionTool(weather, permission=allow), FunctionTool(book_table, permission=allow)])
    return Agent(name="concierge", system_prompt="You are a concierge.", model=model, toolkit=toolkit,
                 middlewares=[MemoryScopeMiddleware(engine, user_id="anna")])


async def test_a_replys_tool_calls_are_the_agents_once_and_never_the_users(server, engine):
    agent = make_agent(server, engine)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER))])
    reply = await agent.reply(UserMsg("anna", s.REQUEST))
    assert reply.get_text_content() == s.ANSWER
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("You are welcome."))])
    await agent.reply(UserMsg("anna", "Thanks!"))  # the context holds the calls: not recorded again
    s.check_run(engine, "anna", "concierge", timed=True, call_ids=("c1", "c2"))


async def test_arguments_that_are_not_json_never_break_the_reply(server, engine):
    agent = make_agent(server, engine)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c9", "weather", "{city: Oslo"))),
        Reply(json=openai_completion(s.ANSWER))])
    await agent.reply(UserMsg("anna", s.REQUEST))
    calls = [m.message.tool_call for m in s.logged_calls(engine, "anna")]
    # AgentScope repairs the text and runs the tool; the call keeps the text the model produced
    assert [(c.call_id, c.status, c.arguments) for c in calls] == [
        ("c1", "ok", {"city": "Oslo"}), ("c9", "ok", {UNPARSED: "{city: Oslo"})]
    assert sorted(m.role for m in engine.list("anna")) == ["assistant", "user"]
