"""AgentScope 2.x: each reply ends the agent's run with the outcome AgentScope gave (issue 43), with
a real ``Agent`` tool loop, a real ``Toolkit`` and ``OpenAIChatModel`` talking to the fake model
server; the procedures the middleware's retrieval returned are passed along."""

from __future__ import annotations

import openai
import pytest

pytest.importorskip("agentscope.middleware", reason="AgentScope 2.x is not installed")

from agentscope.agent import Agent, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import TextBlock, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk, Toolkit

from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware
from tests.support import run_outcomes as ro, tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

AGENT = "concierge"


@pytest.fixture
def engine(tmp_path, local_embedder):
    memory = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield memory
    memory.close()


def weather(city: str) -> ToolChunk:
    """Today's weather in a city."""
    return ToolChunk(content=[TextBlock(type="text", text=s.weather(city))])


def book_table(restaurant: str, day: str) -> ToolChunk:
    """Book a table at a restaurant."""
    return ToolChunk(content=[TextBlock(type="text", text=s.book_table(restaurant, day))])  # raises


def make_agent(server, engine, name: str = AGENT, scope_to_agent: bool = True, **options) -> Agent:
    model = OpenAIChatModel(credential=OpenAICredential(api_key="sk-test", base_url=server.url + "/v1"),
                            model="fake", stream=False, max_retries=0)
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test tools")
    toolkit = Toolkit(tools=[FunctionTool(weather, permission=allow), FunctionTool(book_table, permission=allow)])
    return Agent(name=name, system_prompt="You are a concierge.", model=model, toolkit=toolkit,
                 middlewares=[MemoryScopeMiddleware(engine, user_id="anna", scope_to_agent=scope_to_agent)], **options)


async def test_an_unrecovered_tool_error_fails_the_run_and_counts_the_procedures_used(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER))])
    await make_agent(server, engine).reply(UserMsg("anna", s.REQUEST))
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]


async def test_with_the_default_scope_each_agent_gets_and_weighs_its_own_procedures(server, engine):
    # scope_to_agent=False reads every memory of the user, but the procedures are the recording agent's
    used = ro.seed_two_agents(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Looks right."))])
    await make_agent(server, engine, scope_to_agent=False).reply(UserMsg("anna", s.REQUEST))
    await make_agent(server, engine, name="critic", scope_to_agent=False).reply(UserMsg("anna", s.REQUEST))
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(engine, "anna", "critic") == [("unknown", [])]  # not the concierge's, nor "assistant"'s


async def test_tools_that_succeeded_succeed_and_a_plain_reply_is_unknown(server, engine):
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Hello!"))])
    agent = make_agent(server, engine)
    await agent.reply(UserMsg("anna", s.REQUEST))
    await agent.reply(UserMsg("anna", "Hi there"))
    assert ro.outcomes(engine, "anna", AGENT) == [("succeeded", []), ("unknown", [])]


async def test_a_reply_cut_at_max_iters_fails_the_run_though_its_tools_succeeded(server, engine):
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion("Still checking, it seems clear in Oslo."))])
    reply = await make_agent(server, engine, react_config=ReActConfig(max_iters=1)).reply(UserMsg("anna", s.REQUEST))
    assert str(reply.finished_reason) == "exceed_max_iters"
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [])]


async def test_a_model_call_that_fails_fails_the_run_with_the_calls_made_before(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(status=400, json={"error": {"message": "bad request", "type": "invalid"}})])
    with pytest.raises(openai.BadRequestError):
        await make_agent(server, engine).reply(UserMsg("anna", s.REQUEST))
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert [m.message.tool_call.call_id for m in s.logged_calls(engine, "anna")] == ["c1"]
    assert engine.list("anna") == []  # no reply: the user's words are not recorded


async def test_a_message_without_text_records_the_reply_its_tool_calls_and_its_run(server, engine):
    from agentscope.message import DataBlock, URLSource

    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Hello!"))])
    agent = make_agent(server, engine)
    photo = DataBlock(source=URLSource(url="https://example.com/oslo.png", media_type="image/png"))
    await agent.reply(UserMsg("anna", [photo]))  # an image alone: no words of the user
    await agent.reply(UserMsg("anna", "  "))
    recorded = engine.list("anna", newest_first=False)
    assert [(m.role, m.content) for m in recorded] == [("assistant", s.ANSWER), ("assistant", "Hello!")]
    calls = [m.message.tool_call for m in s.logged_calls(engine, "anna", AGENT)]
    assert [(c.name, c.status, c.result) for c in calls] == [("weather", "ok", s.FORECAST)]
    assert ro.outcomes(engine, "anna", AGENT) == [("succeeded", []), ("unknown", [])]
