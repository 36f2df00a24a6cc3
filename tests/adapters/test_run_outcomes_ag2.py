"""ag2 1.x: each turn ends the agent's run with the outcome ag2 gave (issue 43), with a real
``ag2.Agent`` tool loop and ag2's ``OpenAIConfig`` client talking to the fake model server; the
procedures the middleware's retrieval returned are passed along."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ag2", reason="ag2 1.x is not installed")

from ag2 import Agent
from ag2.config import OpenAIConfig

from memoryscope_plugins.adapters.ag2 import MemoryScopePlugin
from tests.support import run_outcomes as ro, tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

AGENT = "concierge"


@pytest.fixture
def memory(tmp_path, local_embedder):
    engine = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield engine
    engine.close()


def make_agent(server, engine, name: str = AGENT, scope_to_agent: bool = True) -> Agent:
    config = OpenAIConfig(model="gpt-4o", api_key="sk-test", base_url=server.url + "/v1")
    return Agent(name, "You are a concierge.", config=config, tools=[s.weather, s.book_table],
                 plugins=[MemoryScopePlugin(engine, user_id="anna", scope_to_agent=scope_to_agent)])


async def test_an_unrecovered_tool_error_fails_the_run_and_counts_the_procedures_used(server, memory):
    used = ro.seed_procedure(memory, "anna", AGENT)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS),
                                                             ("c2", "book_table", s.BOOKING_ARGS))),
                                Reply(json=openai_completion(s.ANSWER))])
    await make_agent(server, memory).ask(s.REQUEST)
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]


async def test_with_the_default_scope_each_agent_gets_and_weighs_its_own_procedures(server, memory):
    # scope_to_agent=False reads every memory of the user, but the procedures are the recording agent's
    used = ro.seed_two_agents(memory, "anna", AGENT)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS),
                                                             ("c2", "book_table", s.BOOKING_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Looks right."))])
    await make_agent(server, memory, scope_to_agent=False).ask(s.REQUEST)
    await make_agent(server, memory, name="critic", scope_to_agent=False).ask(s.REQUEST)
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(memory, "anna", "critic") == [("unknown", [])]  # not the concierge's, nor "assistant"'s


async def test_tools_that_succeeded_succeed_a_plain_reply_is_unknown_a_cut_off_one_failed(server, memory):
    cut = openai_completion("It will be clear in Oslo and")
    cut["choices"][0]["finish_reason"] = "length"
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Hello!")),
                                Reply(json=cut)])
    agent = make_agent(server, memory)
    reply = await agent.ask(s.REQUEST)
    reply = await reply.ask("Hi there")
    await reply.ask("And tomorrow?")
    assert [o for o, _ in ro.outcomes(memory, "anna", AGENT)] == ["succeeded", "unknown", "failed"]


async def test_a_turn_that_raises_fails_the_run_with_its_calls_and_not_the_users_words(server, memory):
    # ag2 1.2 parses the model's arguments again for the next model call: the turn raises after the tools ran
    used = ro.seed_procedure(memory, "anna", AGENT)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS),
                                                             ("c9", "weather", "{city: Oslo")))])
    with pytest.raises(json.JSONDecodeError):
        await make_agent(server, memory).ask(s.REQUEST)
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]
    assert sorted(m.message.tool_call.call_id for m in s.logged_calls(memory, "anna")) == ["c1", "c9"]
    assert memory.list("anna") == []  # the turn gave no answer: the user's words are not recorded
