"""LangChain 1.x: each agent run ends with the outcome LangChain gave (issue 43), with a real
``create_agent`` tool loop and ``ChatOpenAI`` talking to the fake model server over HTTP; the
procedures the middleware's retrievals returned are passed along. The classic chain memory ends
each exchange as "unknown"."""

from __future__ import annotations

import warnings

import openai
import pytest

pytest.importorskip("langchain.agents.middleware", reason="LangChain 1.x is missing")
pytest.importorskip("langchain_openai", reason="langchain-openai is missing")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from memoryscope_plugins.adapters.langchain import MemoryScopeChatMemory, MemoryScopeMiddleware
from tests.support import run_outcomes as ro, tool_scenario as s
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion, openai_tool_calls

AGENT = "concierge"
CONFIG = {"configurable": {"thread_id": "t1"}}


@pytest.fixture
def engine(tmp_path, local_embedder):
    memory = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    yield memory
    memory.close()


def handled_booking(restaurant: str, day: str) -> str:
    """Book a table at a restaurant."""
    raise ToolException(s.FULL)


def make_agent(server, engine, *, handled: bool = True, name: str = AGENT, scope_to_agent: bool = True):
    model = ChatOpenAI(model="fake", base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    booking = (StructuredTool.from_function(handled_booking, name="book_table", handle_tool_error=True) if handled
               else StructuredTool.from_function(s.book_table, name="book_table"))
    return create_agent(model, tools=[StructuredTool.from_function(s.weather, name="weather"), booking], name=name,
                        checkpointer=InMemorySaver(),
                        middleware=[MemoryScopeMiddleware(engine, user_id="anna", scope_to_agent=scope_to_agent)])


def ask(agent, text: str) -> dict:
    return agent.invoke({"messages": [{"role": "user", "content": text}]}, CONFIG)


def test_an_unrecovered_tool_error_fails_the_run_and_counts_the_procedures_used(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER))])
    ask(make_agent(server, engine), s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]


def test_with_the_default_scope_each_agent_gets_and_weighs_its_own_procedures(server, engine):
    # scope_to_agent=False reads every memory of the user, but the procedures are the recording agent's
    used = ro.seed_two_agents(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS))),
        Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Looks right."))])
    ask(make_agent(server, engine, scope_to_agent=False), s.REQUEST)
    ask(make_agent(server, engine, name="critic", scope_to_agent=False), s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    assert ro.outcomes(engine, "anna", "critic") == [("unknown", [])]  # not the concierge's, nor "assistant"'s


async def test_tools_that_succeeded_succeed_a_plain_reply_is_unknown_a_cut_off_one_failed(server, engine):
    cut = openai_completion("It will be clear in Oslo and")
    cut["choices"][0]["finish_reason"] = "length"
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(json=openai_completion(s.ANSWER)), Reply(json=openai_completion("Hello!")),
                                Reply(json=cut)])
    agent = make_agent(server, engine)
    for text in (s.REQUEST, "Hi there", "And tomorrow?"):
        await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, CONFIG)
    assert [o for o, _ in ro.outcomes(engine, "anna", AGENT)] == ["succeeded", "unknown", "failed"]


def test_a_tool_that_raises_through_fails_the_run_with_that_call_as_an_error(server, engine):
    used = ro.seed_procedure(engine, "anna", AGENT)
    server.script(OPENAI_CHAT, [
        Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS), ("c2", "book_table", s.BOOKING_ARGS)))])
    agent = make_agent(server, engine, handled=False)
    with pytest.raises(RuntimeError, match=s.FULL):
        ask(agent, s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [used])]
    logged = {m.message.tool_call.call_id: m.message.tool_call for m in s.logged_calls(engine, "anna")}
    booking, weather = logged["c2"], logged["c1"]
    assert (booking.status, booking.error) == ("error", f"RuntimeError: {s.FULL}")
    # the weather call's answer never reached the state: made, its outcome unseen
    assert (weather.status, weather.result, weather.error) == ("unknown", None, None)
    assert [(t.tool, t.calls, t.failures, t.unknown) for t in engine.tool_stats(AGENT)] == [
        ("book_table", 1, 1, 0), ("weather", 1, 0, 1)]
    assert engine.list("anna") == []  # no answer: the user's words are not recorded


def test_a_model_call_that_raises_fails_the_run_and_a_resumed_run_records_no_call_twice(server, engine):
    server.script(OPENAI_CHAT, [Reply(json=openai_tool_calls(("c1", "weather", s.WEATHER_ARGS))),
                                Reply(status=400, json={"error": {"message": "bad request", "type": "invalid"}})])
    agent = make_agent(server, engine)
    with pytest.raises(openai.BadRequestError):
        ask(agent, s.REQUEST)
    assert ro.outcomes(engine, "anna", AGENT) == [("failed", [])]
    server.script(OPENAI_CHAT, [Reply(json=openai_completion(s.ANSWER))])
    agent.invoke(None, CONFIG)  # resumed from the checkpoint: the weather call is in the state again
    assert [m.message.tool_call.call_id for m in s.logged_calls(engine, "anna")] == ["c1"]
    # the resumed run made no call of its own: unknown
    assert [o for o, _ in ro.outcomes(engine, "anna", AGENT)] == ["failed", "unknown"]


def test_the_chain_memory_ends_each_exchange_as_unknown_with_the_procedures_it_loaded(engine):
    from langchain_classic.chains import ConversationChain
    used = ro.seed_procedure(engine, "anna", "assistant")
    memory = MemoryScopeChatMemory(memory=engine, user_id="anna")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        chain = ConversationChain(llm=FakeListChatModel(responses=["Done."]), memory=memory)
    chain.invoke({"input": s.REQUEST})
    assert ro.outcomes(engine, "anna", "assistant") == [("unknown", [used])]
