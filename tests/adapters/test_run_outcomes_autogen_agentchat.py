"""AutoGen AgentChat 0.7: each recorded turn ends the agent's run with the outcome AgentChat gave
(issue 43), with a real ``AssistantAgent`` tool loop and ``OpenAIChatCompletionClient`` talking to
the fake model server; the procedures ``update_context`` retrieved are passed along."""

from __future__ import annotations

import openai
import pytest

pytest.importorskip("autogen_agentchat", reason="AutoGen AgentChat is not installed")
pytest.importorskip("autogen_ext.models.openai", reason="autogen-ext[openai] is not installed")

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

from memoryscope_plugins.adapters.autogen_agentchat import MemoryAssistantAgent, MemoryScopeMemory, run_with_memory
from tests.support import run_outcomes as ro, tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

MODEL = "gpt-4o-2024-08-06"  # the model the client resolves "gpt-4o" to: the replies name it
AGENT = "concierge"


@pytest.fixture
def engine(tmp_path, local_embedder):
    memory = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield memory
    memory.close()


def client(server) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model="gpt-4o", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)


def tools() -> list[FunctionTool]:
    return [FunctionTool(s.weather, description="Today's weather in a city.", name="weather"),
            FunctionTool(s.book_table, description="Book a table at a restaurant.", name="book_table")]


def memory_of(engine) -> MemoryScopeMemory:
    return MemoryScopeMemory(engine, user_id="anna", agent_id=AGENT, scope_to_agent=True)


def script(server, *calls: tuple[str, str, str], answers: tuple[str, ...] = (s.ANSWER,)) -> None:
    replies = [Reply(json=openai_tool_calls(*calls, model=MODEL))] if calls else []
    server.script(OPENAI_CHAT, replies + [Reply(json=openai_completion(a, model=MODEL)) for a in answers])


async def test_an_unrecovered_tool_error_fails_the_run_and_counts_the_procedures_used(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    agent = AssistantAgent(AGENT, model_client=client(server), tools=tools(), memory=[memory_of(engine)],
                           reflect_on_tool_use=True)
    script(server, ("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))
    await run_with_memory(agent, s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]


async def test_with_the_default_scope_each_agent_gets_and_weighs_its_own_procedures(server, engine):
    # no agent_id, scope_to_agent=False: the memory reads every memory of the user, and the procedures of
    # the agent it serves (the one the run is recorded under), told by MemoryAssistantAgent and run_with_memory
    used = ro.seed_two_agents(engine, "anna", AGENT)
    concierge = MemoryAssistantAgent(AGENT, model_client=client(server), tools=tools(),
                                     memory=[MemoryScopeMemory(engine, user_id="anna")], reflect_on_tool_use=True)
    script(server, ("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))
    await concierge.run(task=s.REQUEST)
    critic = AssistantAgent("critic", model_client=client(server), memory=[MemoryScopeMemory(engine, user_id="anna")])
    script(server, answers=("Looks right.",))
    await run_with_memory(critic, s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(engine, "anna", "critic") == [("unknown", [])]  # not the concierge's, nor "assistant"'s


async def test_in_a_team_a_members_memory_serves_that_member(server, engine):
    used = ro.seed_two_agents(engine, "anna", AGENT)
    memory = MemoryScopeMemory(engine, user_id="anna")
    concierge = AssistantAgent(AGENT, model_client=client(server), tools=tools(), memory=[memory],
                               reflect_on_tool_use=True)
    critic = AssistantAgent("critic", model_client=client(server))
    team = RoundRobinGroupChat([concierge, critic], termination_condition=MaxMessageTermination(3))
    script(server, ("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS),
           answers=(s.ANSWER, "Looks right."))
    await run_with_memory(team, s.REQUEST, memory)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(engine, "anna", "critic") == [("unknown", [])]


async def test_tools_that_succeeded_succeed_and_a_plain_reply_is_unknown(server, engine):
    agent = MemoryAssistantAgent(AGENT, model_client=client(server), tools=tools(), memory=[memory_of(engine)],
                                 reflect_on_tool_use=True)
    script(server, ("c1", "weather", s.WEATHER_ARGS), answers=(s.ANSWER, "Hello!"))
    await agent.run(task=s.REQUEST)
    await agent.run(task="Hi there")
    assert ro.outcomes(engine, "anna", AGENT) == [("succeeded", []), ("unknown", [])]


async def test_a_turn_that_raises_fails_the_run_with_the_calls_made_before(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    agent = MemoryAssistantAgent(AGENT, model_client=client(server), tools=tools(), memory=[memory_of(engine)],
                                 reflect_on_tool_use=True)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), model=MODEL)),
                                Reply(status=400, json={"error": {"message": "bad request", "type": "invalid"}})])
    with pytest.raises(openai.BadRequestError):
        await agent.run(task=s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert [m.message.tool_call.call_id for m in s.logged_calls(engine, "anna")] == ["c1"]
    assert engine.list("anna") == []  # no reply: the user's words are not recorded


async def test_in_a_team_each_agent_ends_its_own_run(server, engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    concierge = AssistantAgent(AGENT, model_client=client(server), tools=tools(), reflect_on_tool_use=True)
    critic = AssistantAgent("critic", model_client=client(server))
    team = RoundRobinGroupChat([concierge, critic], termination_condition=MaxMessageTermination(3))
    script(server, ("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS),
           answers=(s.ANSWER, "Looks right."))
    await run_with_memory(team, s.REQUEST, memory)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [])]
    assert ro.outcomes(engine, "anna", "critic") == [("unknown", [])]


async def test_a_memory_two_members_share_serves_neither_and_retrieves_the_configured_agents(server, engine):
    ro.seed_two_agents(engine, "anna", AGENT)
    shared = MemoryScopeMemory(engine, user_id="anna")
    shared.serve(AGENT)  # left from an earlier run of the concierge alone
    concierge = AssistantAgent(AGENT, model_client=client(server), memory=[shared])
    critic = AssistantAgent("critic", model_client=client(server), memory=[shared])
    team = RoundRobinGroupChat([concierge, critic], termination_condition=MaxMessageTermination(2))
    script(server, answers=("On it.",))
    await run_with_memory(team, s.REQUEST, shared)
    # the Memory protocol does not say which member retrieves: "assistant"'s, never one member's for the other
    assert ro.outcomes(engine, "anna", AGENT) == [("unknown", ["proc-assistant"])]
