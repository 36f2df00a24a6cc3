"""LangChain 1.x middleware: what a run records when other parts of LangChain shape it: the
conversation summary of ``SummarizationMiddleware``, message ids an application numbers itself
(no checkpointer), and structured output (``response_format=ToolStrategy(...)``).

Real ``create_agent`` graphs with LangChain's offline fake chat models and the embedded store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware", reason="LangChain 1.x is missing")

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware
from tests.adapters.test_langchain import ToolCallingModel, ask, model, thread
from tests.support import run_outcomes as ro
from tests.support.tool_scenario import logged_calls

SUMMARY = "SUMMARY: the assistant was told about a dog and a city."


def rows(engine: Any, user_id: str = "anna") -> list[tuple[str, str | None]]:
    """(content, role) of every turn memory of a user, oldest first."""
    return [(m.content, m.role) for m in engine.list(user_id, types=["turn"], newest_first=False)]


def spy_queries(middleware: MemoryScopeMiddleware) -> list[str]:
    """The query of every retrieval the middleware makes."""
    queries: list[str] = []
    retrieve = middleware.bridge.retrieve

    def spy(user_id: Any, query: str, **kwargs: Any) -> Any:
        queries.append(query)
        return retrieve(user_id, query, **kwargs)

    middleware.bridge.retrieve = spy
    return queries


# -- SummarizationMiddleware ------------------------------------------------------------------------

def test_a_conversation_summary_is_neither_the_users_words_nor_the_query(engine):
    memory = MemoryScopeMiddleware(engine, user_id="anna")
    queries = spy_queries(memory)
    summarizer = SummarizationMiddleware(model=model(SUMMARY), trigger=("messages", 4), keep=("messages", 1))
    agent = create_agent(model("Noted, Biscuit.", "Lisbon is lovely.", "You live in Lisbon."), [],
                         checkpointer=InMemorySaver(), middleware=[summarizer, memory])
    for text in ("My dog is called Biscuit.", "I live in Lisbon.", "Where do I live?"):
        agent.invoke(ask(text), thread("t1"))
    state = agent.get_state(thread("t1")).values["messages"]
    assert state[0].additional_kwargs.get("lc_source") == "summarization"  # LangChain summarized
    assert rows(engine) == [("My dog is called Biscuit.", "user"), ("Noted, Biscuit.", "assistant"),
                            ("I live in Lisbon.", "user"), ("Lisbon is lovely.", "assistant"),
                            ("Where do I live?", "user"), ("You live in Lisbon.", "assistant")]
    assert queries[-1] == "Where do I live?"
    assert not any(SUMMARY in query for query in queries)


def test_an_input_summarized_away_during_the_run_is_still_the_users_words(engine):
    @tool
    def lookup_weather(city: str) -> str:
        """Weather for a city."""
        return f"Sunny in {city}"

    chat = ToolCallingModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "lookup_weather", "args": {"city": "Lisbon"}, "id": "c1"}]),
        AIMessage(content="It is sunny in Lisbon.")]), prompts=[])
    memory = MemoryScopeMiddleware(engine, user_id="anna")
    queries = spy_queries(memory)
    # the tool loop passes the trigger: the user's message is summarized away before the answer
    agent = create_agent(chat, [lookup_weather], middleware=[
        SummarizationMiddleware(model=model(SUMMARY), trigger=("messages", 3), keep=("messages", 1)), memory])
    out = agent.invoke(ask("How is the weather in Lisbon?"))
    assert out["messages"][0].additional_kwargs.get("lc_source") == "summarization"
    assert not any(isinstance(m, HumanMessage) and "weather" in m.content for m in out["messages"])
    assert rows(engine) == [("How is the weather in Lisbon?", "user"), ("It is sunny in Lisbon.", "assistant")]
    assert [c.message.tool_call.name for c in logged_calls(engine, "anna")] == ["lookup_weather"]
    assert queries == ["How is the weather in Lisbon?"] * 2


# -- message ids without a checkpointer -------------------------------------------------------------

def test_without_a_thread_an_id_the_app_numbers_never_drops_a_later_conversations_message(engine):
    agent = create_agent(model("Booked for Monday.", "Booked for Friday."), [], name="planner",
                         middleware=[MemoryScopeMiddleware(engine, user_id="anna")])
    for _ in ("monday", "friday"):  # two conversations of a stateless app, its ids numbered per conversation
        agent.invoke({"messages": [HumanMessage("Book the usual table.", id="1")]})
    assert rows(engine) == [("Book the usual table.", "user"), ("Booked for Monday.", "assistant"),
                            ("Book the usual table.", "user"), ("Booked for Friday.", "assistant")]


def test_without_a_thread_ids_langgraph_gives_still_record_a_handed_over_input_once(engine):
    def member(name: str, answer: str):
        return create_agent(model(answer), [], name=name, middleware=[MemoryScopeMiddleware(engine, user_id="anna")])

    state = member("planner", "Pasta.").invoke(ask("Plan a dinner for four."))  # the input gets a uuid id
    member("critic", "Add a salad.").invoke(state)
    assert rows(engine) == [("Plan a dinner for four.", "user"), ("Pasta.", "assistant"),
                            ("Add a salad.", "assistant")]


# -- structured output ----------------------------------------------------------------------------------

class Booking(BaseModel):
    day: str
    people: int


def structured_agent(engine: Any, *replies: AIMessage, tools: list[Any] | None = None):
    chat = ToolCallingModel(messages=iter(replies), prompts=[])
    return create_agent(chat, tools or [], name="concierge", response_format=ToolStrategy(Booking),
                        checkpointer=InMemorySaver(), middleware=[MemoryScopeMiddleware(engine, user_id="anna")])


def booking_call(call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "Booking", "args": args, "id": call_id}])


def test_the_structured_response_is_the_answer_and_its_tool_call_none_of_the_agents(tmp_path, local_embedder):
    engine = ro.procedures_engine(tmp_path / "memory.db", local_embedder)
    try:
        agent = structured_agent(engine, booking_call("s1", day="Friday", people=2))
        out = agent.invoke(ask("Book a table for two on Friday."), thread("t1"))
        assert out["structured_response"] == Booking(day="Friday", people=2)
        assert rows(engine) == [("Book a table for two on Friday.", "user"),
                                (json.dumps({"day": "Friday", "people": 2}), "assistant")]
        assert logged_calls(engine, "anna") == []
        assert [o for o, _ in ro.outcomes(engine, "anna", "concierge")] == ["unknown"]  # no tool ran
    finally:
        engine.close()


async def test_a_structured_output_retried_and_the_agents_real_tools_are_told_apart(engine):
    @tool
    def free_days(restaurant: str) -> str:
        """The days a restaurant has a table free."""
        return "Friday"

    agent = structured_agent(
        engine,
        AIMessage(content="", tool_calls=[{"name": "free_days", "args": {"restaurant": "Rosa"}, "id": "c1"}]),
        booking_call("s1", day="Friday", people="two"),  # not an int: LangChain asks the model again
        booking_call("s2", day="Friday", people=2), tools=[free_days])
    out = await agent.ainvoke(ask("Book Rosa for two when it is free."), thread("t1"))
    assert out["structured_response"] == Booking(day="Friday", people=2)
    assert [(c.message.tool_call.name, c.message.tool_call.status) for c in logged_calls(engine, "anna")] == [
        ("free_days", "ok")]
    assert rows(engine)[-1] == ('{"day": "Friday", "people": 2}', "assistant")
