"""Classic AutoGen: the capability records the agent's tool calls (issue 43), with real
``ConversableAgent``s, ``register_function`` and AutoGen's OpenAI client talking to the fake
model server over HTTP."""

from __future__ import annotations

import pytest

pytest.importorskip("autogen", reason="classic AutoGen is not installed")

from autogen import ConversableAgent, GroupChat, GroupChatManager, register_function

from memoryscope_plugins.adapters._tool_capture import UNPARSED
from memoryscope_plugins.adapters.autogen_classic import MemoryCapability
from tests.support import tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls


def llm_config(server) -> dict:
    return {"config_list": [{"model": "gpt-4o", "base_url": server.url + "/v1", "api_key": "sk-test",
                             "price": [0, 0]}], "cache_seed": None}


def agents(server, engine) -> tuple[ConversableAgent, ConversableAgent]:
    concierge = ConversableAgent("concierge", llm_config=llm_config(server), human_input_mode="NEVER")
    MemoryCapability(engine, user_id="anna").add_to_agent(concierge)
    user = ConversableAgent("user", llm_config=False, human_input_mode="NEVER",
                            is_termination_msg=lambda m: m.get("content") == s.ANSWER)
    register_function(s.weather, caller=concierge, executor=user, name="weather", description="Weather in a city.")
    register_function(s.book_table, caller=concierge, executor=user, name="book_table", description="Book a table.")
    return concierge, user


def script_run(server, *calls: tuple[str, str, str]) -> None:
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(*(calls or (("c1", "weather", s.WEATHER_ARGS),
                                                 ("c2", "book_table", s.BOOKING_ARGS))))),
        Reply(json=openai_completion(s.ANSWER))])


def test_a_chats_tool_calls_are_the_agents_once_and_never_the_users(server, engine):
    concierge, user = agents(server, engine)
    script_run(server)
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
    server.script(OPENAI_CHAT, [Reply(json=openai_completion(s.ANSWER))])
    user.initiate_chat(concierge, message="Thanks!", max_turns=1, silent=True, clear_history=False)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))  # the history holds them: once


async def test_the_async_chat_records_the_same(server, engine):
    concierge, user = agents(server, engine)
    script_run(server)
    await user.a_initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))


def test_arguments_that_are_not_json_are_an_error_kept_as_text(server, engine):
    concierge, user = agents(server, engine)
    script_run(server, ("c1", "weather", s.WEATHER_ARGS), ("c9", "weather", "{city: Oslo"))
    user.initiate_chat(concierge, message=s.REQUEST, max_turns=3, silent=True)
    calls = [m.message.tool_call for m in s.logged_calls(engine, "anna")]
    assert [(c.call_id, c.status, c.arguments) for c in calls] == [
        ("c1", "ok", {"city": "Oslo"}), ("c9", "error", {UNPARSED: "{city: Oslo"})]


def test_in_a_group_chat_the_calls_are_the_callers_only(server, engine):
    concierge, user = agents(server, engine)
    critic = ConversableAgent("critic", llm_config=llm_config(server), human_input_mode="NEVER")
    MemoryCapability(engine, user_id="anna").add_to_agent(critic)
    group = GroupChat([user, concierge, critic], messages=[], max_round=5, speaker_selection_method="round_robin")
    manager = GroupChatManager(group, llm_config=False)
    script_run(server)
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("Looks right."))])
    user.initiate_chat(manager, message=s.REQUEST, silent=True)
    s.check_run(engine, "anna", "concierge", timed=False, call_ids=("c1", "c2"))
    assert engine.tool_stats("critic") == []

