"""LangChain 1.x adapters: agent middleware (create_agent), retriever, classic chain memory.

Real LangChain / LangGraph objects with LangChain's own offline fake chat models.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass
from typing import Any

import pytest

MISSING = "LangChain 1.x, LangGraph or langchain-classic is missing (pip install 'memoryscope-plugins[langchain]')"
pytest.importorskip("langchain.agents.middleware", reason=MISSING)
pytest.importorskip("langgraph", reason=MISSING)
pytest.importorskip("langchain_classic", reason=MISSING)

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from memoryscope_plugins.adapters.langchain import MemoryScopeChatMemory, MemoryScopeMiddleware, MemoryScopeRetriever
from tests.support.fakes.broken_store import BrokenStore
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, UNRELATED, record_earlier_session

BLOCK = "<long_term_memory>"
FACT = "My dog is called Biscuit."


class RecordingChatModel(FakeListChatModel):
    """FakeListChatModel that keeps every prompt and accepts tools."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(list(messages))
        return await super()._agenerate(messages, stop, run_manager, **kwargs)

    def bind_tools(self, tools, **kwargs):
        return self


class ToolCallingModel(GenericFakeChatModel):
    """GenericFakeChatModel that keeps every prompt and accepts tools (for tool loops)."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.prompts.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)

    def bind_tools(self, tools, **kwargs):
        return self


def model(*replies: str) -> RecordingChatModel:
    return RecordingChatModel(responses=list(replies), prompts=[])


def agent_with(chat_model: Any, middleware: MemoryScopeMiddleware, **kwargs: Any):
    return create_agent(chat_model, tools=kwargs.pop("tools", []), system_prompt="You are helpful.",
                        middleware=[middleware], checkpointer=InMemorySaver(), **kwargs)


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def thread(name: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": name, **configurable}}


def prompt_text(prompt: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in prompt)


def blocks(messages: list[BaseMessage]) -> int:
    return sum(str(m.content).count(BLOCK) for m in messages)


# -- agent middleware -----------------------------------------------------------------------------------

def test_fact_from_session_one_reaches_a_new_agent_in_session_two(engine):
    agent_with(model("Noted!"), MemoryScopeMiddleware(engine, user_id="anna")).invoke(ask(FACT), thread("one"))
    second = model("Biscuit.")
    out = agent_with(second, MemoryScopeMiddleware(engine, user_id="anna")).invoke(
        ask("What is my dog's name?"), thread("two"))
    assert out["messages"][-1].content == "Biscuit."
    prompt = second.prompts[-1]
    assert isinstance(prompt[0], SystemMessage) and prompt[0].content.startswith("You are helpful.")
    assert blocks(prompt) == 1 and "Biscuit" in prompt[0].content


def test_the_injected_block_dates_resolves_and_shows_the_turn_a_hit_answers(engine):
    from datetime import datetime, timezone
    said = datetime(2023, 5, 8, 12, tzinfo=timezone.utc)  # a Monday
    engine.record("anna", [{"role": "assistant", "content": "Any news this week?", "timestamp": said},
                           {"role": "user", "name": "Anna", "content": "We adopted a puppy yesterday!",
                            "timestamp": said.replace(second=5)}], session_id="old")
    second = model("On 7 May 2023.")
    agent_with(second, MemoryScopeMiddleware(engine, user_id="anna", top_k=1)).invoke(
        ask("When did we adopt the puppy?"), thread("new"))
    system = str(second.prompts[-1][0].content)
    block = system[system.index(BLOCK):]
    assert re.search(r"Today is \d{4}-\d\d-\d\d \w{3}\. Relevant memories", block)  # the day the agent runs
    assert "[2023-05-08 Mon] Anna: We adopted a puppy yesterday (= 2023-05-07 Sun)!" in block
    assert "[2023-05-08 Mon] assistant: Any news this week (= 2023-05-08 Mon – 2023-05-14 Sun)?" in block  # it answers


def test_history_stays_clean_and_every_turn_is_recorded(engine):
    chat_model = model("r1", "r2", "r3", "r4")
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine, user_id="anna"))
    questions = [FACT, "I live in Lisbon.", "What is my dog's name?", "Where do I live?"]
    for number, question in enumerate(questions, start=1):
        out = agent.invoke(ask(question), thread("t"))
        contents = [m.content for m in engine.list("anna")]
        assert len(contents) == 2 * number and question in contents and f"r{number}" in contents
        assert blocks(out["messages"]) == 0
    state = agent.get_state(thread("t")).values
    assert len(state["messages"]) == 2 * len(questions) and blocks(state["messages"]) == 0
    assert all(blocks(p) <= 1 for p in chat_model.prompts)
    assert "Lisbon" in prompt_text(chat_model.prompts[-1])
    assert {m.session_id for m in engine.list("anna")} == {"t"}  # the thread id is the session


def test_a_statement_brings_back_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    chat_model = model("That sounds like a lot.", "Enjoy the sun.")
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine, user_id="anna", top_k=TOP_K))
    agent.invoke(ask(STATEMENT), thread("t"))
    assert REMEMBERED in prompt_text(chat_model.prompts[-1])
    agent.invoke(ask(UNRELATED), thread("t"))
    assert REMEMBERED not in prompt_text(chat_model.prompts[-1])
    assert blocks(agent.get_state(thread("t")).values["messages"]) == 0


async def test_async_agent_injects_and_records(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    chat_model = model("Biscuit.", "You're welcome.")
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine, user_id="anna"))
    await agent.ainvoke(ask("What is my dog's name?"), thread("t"))
    assert "Biscuit" in prompt_text(chat_model.prompts[-1])
    out = await agent.ainvoke(ask("Thanks!"), thread("t"))
    assert blocks(out["messages"]) == 0
    assert {"What is my dog's name?", "Biscuit.", "Thanks!", "You're welcome."} <= {
        m.content for m in await engine.alist("anna")}


def test_tool_loop_records_input_and_final_answer_once(engine):
    @tool
    def lookup_weather(city: str) -> str:
        """Weather for a city."""
        return f"Sunny in {city}"

    engine.record("anna", [{"role": "user", "content": "I live in Lisbon."}])
    chat_model = ToolCallingModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "lookup_weather", "args": {"city": "Lisbon"}, "id": "c1"}]),
        AIMessage(content="It is sunny in Lisbon."),
    ]), prompts=[])
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine, user_id="anna"), tools=[lookup_weather])
    agent.invoke(ask("How is the weather where I live?"), thread("t"))
    assert len(chat_model.prompts) == 2 and all("Lisbon" in prompt_text(p) for p in chat_model.prompts)
    recorded = [m.content for m in engine.list("anna", newest_first=False)]
    assert recorded == ["I live in Lisbon.", "How is the weather where I live?", "It is sunny in Lisbon."]


@dataclass
class Context:
    user_id: str


def test_user_from_context_or_config_and_two_users_never_mix(engine):
    middleware = MemoryScopeMiddleware(engine)  # no fixed user: one agent serves everyone
    chat_model = model("Noted!", "I don't know.", "Biscuit.")
    agent = create_agent(chat_model, tools=[], middleware=[middleware], context_schema=Context,
                         checkpointer=InMemorySaver())
    agent.invoke(ask(FACT), thread("a1"), context=Context(user_id="anna"))
    agent.invoke(ask("What is my dog's name?"), thread("b1"), context=Context(user_id="bob"))
    assert "Biscuit" not in prompt_text(chat_model.prompts[-1])
    assert {m.content for m in engine.list("bob")} == {"What is my dog's name?", "I don't know."}
    plain = create_agent(chat_model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    plain.invoke(ask("What is my dog's name?"), thread("a2", user_id="anna"))  # configurable.user_id
    assert "Biscuit" in prompt_text(chat_model.prompts[-1])
    assert engine.count("anna") == 4 and engine.count("bob") == 2


def test_no_user_means_no_memory_and_one_warning(engine, caplog):
    chat_model = model("a", "b")
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine))
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        agent.invoke(ask(FACT), thread("t"))
        agent.invoke(ask("again"), thread("t"))
    assert engine.users() == []
    assert len([r for r in caplog.records if r.name == "memoryscope_plugins.adapters"]) == 1


def test_failing_backend_degrades_to_no_memory_with_a_warning(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.store = BrokenStore(engine.store)
    chat_model = model("Still here.")
    agent = agent_with(chat_model, MemoryScopeMiddleware(engine, user_id="anna"))
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        out = agent.invoke(ask("What is my secret dog name?"), thread("t"))
    assert out["messages"][-1].content == "Still here."
    assert blocks(chat_model.prompts[-1]) == 0
    messages = [r.getMessage() for r in caplog.records if r.name == "memoryscope_plugins.adapters"]
    assert len(messages) == 2 and all("StoreError" in m for m in messages)
    assert "Biscuit" not in caplog.text and "secret dog" not in caplog.text


async def test_failing_backend_async(engine, caplog):
    engine.store = BrokenStore(engine.store)
    agent = agent_with(model("Still here."), MemoryScopeMiddleware(engine, user_id="anna"))
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        out = await agent.ainvoke(ask("hello"), thread("t"))
    assert out["messages"][-1].content == "Still here."
    assert len([r for r in caplog.records if r.name == "memoryscope_plugins.adapters"]) == 2


# -- retriever ------------------------------------------------------------------------------------------

async def test_retriever_returns_documents_with_metadata(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.add("anna", "Anna is allergic to peanuts.")
    engine.record("bob", [{"role": "user", "content": "My dog is called Rex."}])
    retriever = MemoryScopeRetriever(memory=engine, user_id="anna", top_k=2)
    documents = retriever.invoke("What is my dog called?")
    assert 1 <= len(documents) <= 2 and any("Biscuit" in d.page_content for d in documents)
    assert all("Rex" not in d.page_content for d in documents)
    metadata = next(d.metadata for d in documents if "Biscuit" in d.page_content)
    assert {"id", "type", "score", "created_at"} <= set(metadata) and metadata["type"] == "turn"
    assert (await retriever.ainvoke("peanuts"))[0].metadata["type"] == "custom"
    custom_only = MemoryScopeRetriever(memory=engine, user_id="anna", types=["custom"])
    assert {d.metadata["type"] for d in custom_only.invoke("peanuts and dogs")} == {"custom"}


def test_retriever_finds_for_a_statement_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    documents = MemoryScopeRetriever(memory=engine, user_id="anna", top_k=TOP_K).invoke(STATEMENT)
    assert REMEMBERED in [d.page_content for d in documents]


def test_retriever_degrades_on_failure(engine, caplog):
    engine.store = BrokenStore(engine.store)
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        assert MemoryScopeRetriever(memory=engine, user_id="anna").invoke("dog") == []
    assert "StoreError" in caplog.text


# -- classic chain memory ------------------------------------------------------------------------------

def conversation(chat_model: Any, memory: MemoryScopeChatMemory):
    from langchain_classic.chains import ConversationChain
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return ConversationChain(llm=chat_model, memory=memory)


def test_chat_memory_in_a_conversation_chain(engine):
    conversation(model("Noted!"), MemoryScopeChatMemory(memory=engine, user_id="anna")).invoke({"input": FACT})
    assert {m.content for m in engine.list("anna")} == {FACT, "Noted!"}
    chat_model = model("Biscuit.")
    memory = MemoryScopeChatMemory(memory=engine, user_id="anna")
    result = conversation(chat_model, memory).invoke({"input": "What is my dog's name?"})
    assert result["response"] == "Biscuit."
    assert "Biscuit" in prompt_text(chat_model.prompts[-1]) and blocks(chat_model.prompts[-1]) == 1
    assert engine.count("anna") == 4


def test_chat_memory_brings_back_for_a_statement_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    chat_model = model("That sounds like a lot.", "Enjoy the sun.")
    chain = conversation(chat_model, MemoryScopeChatMemory(memory=engine, user_id="anna", top_k=TOP_K))
    chain.invoke({"input": STATEMENT})
    assert REMEMBERED in prompt_text(chat_model.prompts[-1])
    chain.invoke({"input": UNRELATED})
    assert REMEMBERED not in prompt_text(chat_model.prompts[-1])


async def test_chat_memory_async_and_messages(engine):
    memory = MemoryScopeChatMemory(memory=engine, user_id="anna", return_messages=True, memory_key="memories")
    assert memory.memory_variables == ["memories"]
    assert await memory.aload_memory_variables({"input": "dog?"}) == {"memories": []}
    await memory.asave_context({"input": FACT}, {"output": "Noted!"})
    loaded = await memory.aload_memory_variables({"input": "What is my dog's name?"})
    assert isinstance(loaded["memories"][0], SystemMessage) and "Biscuit" in loaded["memories"][0].content
    sync = memory.load_memory_variables({"input": "What is my dog's name?"})
    assert sync["memories"][0].content == loaded["memories"][0].content


def test_chat_memory_keeps_users_apart_and_clear_keeps_long_term_memory(engine):
    engine.record("bob", [{"role": "user", "content": "Bob has a cat."}])
    memory = MemoryScopeChatMemory(memory=engine, user_id="anna")
    memory.save_context({"input": FACT}, {"output": "Noted!"})
    bob = MemoryScopeChatMemory(memory=engine, user_id="bob")
    assert "Biscuit" not in bob.load_memory_variables({"input": "dog"})["history"]
    memory.clear()  # a new conversation, not a deletion
    assert engine.count("anna") == 2 and engine.count("bob") == 1


async def test_chat_memory_aclear_and_failure(engine, caplog):
    memory = MemoryScopeChatMemory(memory=engine, user_id="anna")
    await memory.asave_context({"input": FACT}, {"output": "Noted!"})
    await memory.aclear()
    assert engine.count("anna") == 2
    engine.store = BrokenStore(engine.store)
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        assert memory.load_memory_variables({"input": "dog"}) == {"history": ""}
        memory.save_context({"input": FACT}, {"output": "Noted!"})
    assert caplog.text.count("StoreError") == 2 and "Biscuit" not in caplog.text
