"""Classic AutoGen: each reply of the agent ends its run with the outcome AutoGen gave (issue 43),
with real ``ConversableAgent``s, ``register_function`` and AutoGen's OpenAI client talking to the
fake model server over HTTP; the procedures the capability's retrieval returned are passed along."""

from __future__ import annotations

import openai
import pytest

pytest.importorskip("autogen", reason="classic AutoGen is not installed")

from autogen import ConversableAgent, register_function

from memoryscope_plugins.adapters.autogen_classic import MemoryCapability
from tests.support import run_outcomes as ro, tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

AGENT = "concierge"


@pytest.fixture
def memory(tmp_path, local_embedder):
    engine = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield engine
    engine.close()


def agents(server, engine, name: str = AGENT, scope_to_agent: bool = True) -> tuple[ConversableAgent, ConversableAgent]:
    config = {"config_list": [{"model": "gpt-4o", "base_url": server.url + "/v1", "api_key": "sk-test",
                               "price": [0, 0]}], "cache_seed": None}
    concierge = ConversableAgent(name, llm_config=config, human_input_mode="NEVER")
    MemoryCapability(engine, user_id="anna", scope_to_agent=scope_to_agent).add_to_agent(concierge)
    user = ConversableAgent("user", llm_config=False, human_input_mode="NEVER",
                            is_termination_msg=lambda m: m.get("content") == s.ANSWER)
    register_function(s.weather, caller=concierge, executor=user, name="weather", description="Weather in a city.")
    register_function(s.book_table, caller=concierge, executor=user, name="book_table", description="Book a table.")
    return concierge, user


def test_an_unrecovered_tool_error_fails_the_run_and_counts_the_procedures_used(server, memory):
    used = ro.seed_procedure(memory, "anna", AGENT)
    concierge, user = agents(server, memory)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS),
                                                             ("c2", "book_table", s.BOOKING_ARGS))),
                                Reply(json=openai_completion(s.ANSWER))])
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    # the reply asking for the tools ends no run: the one answering after their responses does
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]


def test_with_the_default_scope_each_agent_gets_and_weighs_its_own_procedures(server, memory):
    # scope_to_agent=False reads every memory of the user, but the procedures are the recording agent's
    used = ro.seed_two_agents(memory, "anna", AGENT)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS),
                                                             ("c2", "book_table", s.BOOKING_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Looks right."))])
    concierge, user = agents(server, memory, scope_to_agent=False)
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    critic, user = agents(server, memory, name="critic", scope_to_agent=False)
    user.initiate_chat(critic, message=s.REQUEST, max_turns=1, silent=True)
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(memory, "anna", "critic") == [("unknown", [])]  # not the concierge's, nor "assistant"'s


async def test_a_turn_whose_tools_succeeded_succeeds_and_a_plain_reply_is_unknown(server, memory):
    concierge, user = agents(server, memory)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Hello!"))])
    await user.a_initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    await user.a_initiate_chat(concierge, message="Hi there", max_turns=1, silent=True, clear_history=False)
    assert ro.outcomes(memory, "anna", AGENT) == [("succeeded", []), ("unknown", [])]


def test_a_retry_that_succeeds_recovers_the_tool_error(server, memory):
    concierge, user = agents(server, memory)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", '{"town": "Oslo"}'))),
                                Reply(json=openai_tool_calls(("c2", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER))])
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=4, silent=True)
    calls = [m.message.tool_call.status for m in s.logged_calls(memory, "anna")]
    assert calls == ["error", "ok"]
    # one run: the reply asking for the retry goes on with it, and the retry recovered the error
    assert ro.outcomes(memory, "anna", AGENT) == [("succeeded", [])]


def test_a_model_call_that_raises_fails_the_run_with_the_calls_made_before(server, memory):
    used = ro.seed_procedure(memory, "anna", AGENT)
    concierge, user = agents(server, memory)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(status=400, json={"error": {"message": "bad request", "type": "invalid"}})])
    with pytest.raises(openai.BadRequestError):
        user.initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    assert ro.outcomes(memory, "anna", AGENT) == [("failed", [used])]
    assert [m.message.tool_call.name for m in s.logged_calls(memory, "anna")] == ["weather"]
    assert [m.content for m in memory.list("anna")] == [s.REQUEST]  # the user's words of the first reply only


def test_a_chat_ended_while_tools_were_asked_for_leaves_nothing_to_the_next_chat(server, memory):
    concierge, user = agents(server, memory)
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "book_table", s.BOOKING_ARGS))),
                                Reply(json=openai_tool_calls(("c2", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion("Hello!"))])
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=2, silent=True)  # ends on the second request
    assert ro.outcomes(memory, "anna", AGENT) == []  # the run is still open
    user.initiate_chat(concierge, message="Hi there", max_turns=1, silent=True)  # a new chat (history cleared)
    assert ro.outcomes(memory, "anna", AGENT) == [("unknown", [])]  # not the old chat's failed booking
