"""AutoGen AgentChat 0.7: the agent's tool calls of a turn are recorded (issue 43), with a real
``AssistantAgent`` tool loop and ``OpenAIChatCompletionClient`` talking to the fake model server."""

from __future__ import annotations

import pytest

pytest.importorskip("autogen_agentchat", reason="AutoGen AgentChat is not installed")
pytest.importorskip("autogen_ext.models.openai", reason="autogen-ext[openai] is not installed")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

from memoryscope_plugins.adapters.autogen_agentchat import (
    MemoryAssistantAgent,
    MemoryScopeMemory,
    run_stream_with_memory,
    run_with_memory,
)
from tests.support import tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

MODEL = "gpt-4o-2024-08-06"  # the model the client resolves "gpt-4o" to: the replies name it


def client(server) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model="gpt-4o", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)


def tools() -> list[FunctionTool]:
    return [FunctionTool(s.weather, description="Today's weather in a city.", name="weather"),
            FunctionTool(s.book_table, description="Book a table at a restaurant.", name="book_table")]


def script_run(server) -> None:
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS),
                                     model=MODEL)),
        Reply(json=openai_completion(s.ANSWER, model=MODEL))])


async def test_run_with_memory_records_the_agents_tool_calls_once(server, engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    agent = AssistantAgent("concierge", model_client=client(server), tools=tools(), memory=[memory],
                           reflect_on_tool_use=True)
    script_run(server)
    result = await run_with_memory(agent, s.REQUEST)
    assert result.messages[-1].content == s.ANSWER
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("You are welcome.", model=MODEL))])
    await run_with_memory(agent, "Thanks!")  # the model context holds the calls: not recorded again
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))


async def test_the_stream_records_them_before_the_task_result(server, engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    agent = AssistantAgent("concierge", model_client=client(server), tools=tools(), memory=[memory],
                           reflect_on_tool_use=True)
    script_run(server)
    async for item in run_stream_with_memory(agent, s.REQUEST):
        if isinstance(item, TaskResult):
            s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
            break
    else:
        raise AssertionError("no TaskResult")


async def test_memory_assistant_agent_records_its_own_tool_calls_in_a_team(server, engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    concierge = MemoryAssistantAgent("concierge", model_client=client(server), tools=tools(), memory=[memory],
                                     reflect_on_tool_use=True)
    critic = MemoryAssistantAgent("critic", model_client=client(server), memory=[memory])
    team = RoundRobinGroupChat([concierge, critic], termination_condition=MaxMessageTermination(3))
    script_run(server)
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("Looks right.", model=MODEL))])
    await team.run(task=s.REQUEST)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
    assert engine.tool_stats("critic") == []  # the concierge's calls are not the critic's


async def test_a_team_run_with_memory_gives_each_agent_its_own_calls(server, engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    concierge = AssistantAgent("concierge", model_client=client(server), tools=tools(), reflect_on_tool_use=True)
    critic = AssistantAgent("critic", model_client=client(server))
    team = RoundRobinGroupChat([concierge, critic], termination_condition=MaxMessageTermination(3))
    script_run(server)
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("Looks right.", model=MODEL))])
    await run_with_memory(team, s.REQUEST, memory)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
    assert engine.tool_stats("critic") == []
