"""AgentScope 2.x middleware adapter, with a real `agentscope.agent.Agent` and an offline fake chat model."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

MISSING = "AgentScope 2.x is not installed (pip install 'memoryscope-plugins[agentscope]')"
agentscope = pytest.importorskip("agentscope", reason=MISSING)
pytest.importorskip("agentscope.middleware", reason="AgentScope 2.x is required (no agentscope.middleware)")

from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import Toolkit
from pydantic import BaseModel

from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware
from tests.support.fakes.broken_store import BrokenStore
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, UNRELATED, record_earlier_session

BLOCK = "<long_term_memory>"
FACT = "My dog is called Biscuit."


class FakeModel(ChatModelBase):
    """A chat model that replays scripted replies (text, or a tool call given as a dict) and keeps
    the formatted messages of every call."""

    class Parameters(BaseModel):
        pass

    def __init__(self, *replies: str | dict[str, Any]) -> None:
        super().__init__(credential=OpenAICredential(api_key="unused"), model="fake", parameters=self.Parameters(),
                         stream=False, max_retries=0)
        self.formatter = OpenAIChatFormatter()
        self.replies = list(replies)
        self.calls: list[list[dict[str, Any]]] = []

    async def _call_api(self, model_name: str, messages: list, tools: list | None = None, tool_choice: Any = None,
                        **kwargs: Any) -> ChatResponse:
        self.calls.append(await self.formatter.format(messages))
        reply = self.replies.pop(0) if self.replies else "ok"
        if isinstance(reply, dict):
            call = ToolCallBlock(id=f"call{len(self.calls)}", name=reply["name"], input=json.dumps(reply["input"]))
            return ChatResponse(content=[call], is_last=True)
        return ChatResponse(content=[TextBlock(text=reply)], is_last=True)


def make_agent(model: FakeModel, middleware: MemoryScopeMiddleware, toolkit: Toolkit | None = None) -> Agent:
    return Agent(name="Friday", system_prompt="You are Friday.", model=model, toolkit=toolkit,
                 middlewares=[middleware])


def text(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def blocks(messages: list[dict[str, Any]]) -> int:
    return text(messages).count(BLOCK)


async def test_fact_from_session_one_reaches_a_new_agent_in_session_two(engine):
    await make_agent(FakeModel("Noted!"), MemoryScopeMiddleware(engine, user_id="anna")).reply(UserMsg("anna", FACT))
    model = FakeModel("Biscuit.")
    agent = make_agent(model, MemoryScopeMiddleware(engine, user_id="anna"))
    reply = await agent.reply(UserMsg("anna", "What is my dog's name?"))
    assert reply.get_text_content() == "Biscuit."
    prompt = model.calls[-1]
    assert blocks(prompt) == 1 and "Biscuit" in text(prompt)
    question = next(i for i, m in enumerate(prompt) if "What is my dog" in text([m]))
    assert BLOCK in text([prompt[question + 1]])  # right after the user's message


async def test_history_stays_clean_and_every_turn_is_recorded(engine):
    model = FakeModel("r1", "r2", "r3", "r4")
    agent = make_agent(model, MemoryScopeMiddleware(engine, user_id="anna"))
    questions = [FACT, "I live in Lisbon.", "What is my dog's name?", "Where do I live?"]
    for number, question in enumerate(questions, start=1):
        await agent.reply(UserMsg("anna", question))
        contents = [m.content for m in engine.list("anna")]
        assert len(contents) == 2 * number and question in contents and f"r{number}" in contents
    context = agent.state.context
    assert len(context) == 2 * len(questions)
    assert all(m.name != "memory" and BLOCK not in (m.get_text_content() or "") for m in context)
    assert all(blocks(call) <= 1 for call in model.calls)
    assert "Lisbon" in text(model.calls[-1])
    assert {m.agent_id for m in engine.list("anna")} == {"Friday"}


async def test_a_statement_brings_back_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    model = FakeModel("That sounds like a lot.", "Enjoy the sun.")
    agent = make_agent(model, MemoryScopeMiddleware(engine, user_id="anna", top_k=TOP_K))
    await agent.reply(UserMsg("anna", STATEMENT))
    assert REMEMBERED in text(model.calls[-1])
    await agent.reply(UserMsg("anna", UNRELATED))
    assert REMEMBERED not in text(model.calls[-1])
    assert all(m.name != "memory" and BLOCK not in (m.get_text_content() or "") for m in agent.state.context)


async def test_the_memory_tool_finds_for_a_statement_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="agent_control")
    model = FakeModel({"name": "retrieve_from_memory", "input": {"keywords": [STATEMENT], "limit": TOP_K}},
                      "That sounds like a lot.")
    agent = make_agent(model, middleware, Toolkit(tools=await middleware.list_tools()))
    await agent.reply(UserMsg("anna", STATEMENT))
    assert REMEMBERED in text([m for m in model.calls[-1] if m.get("role") == "tool"])


async def test_streaming_reply_is_recorded(engine):
    agent = make_agent(FakeModel("Noted!"), MemoryScopeMiddleware(engine, user_id="anna", agent_id="friday"))
    events = [event async for event in agent.reply_stream(UserMsg("anna", FACT))]
    assert events
    assert {(m.agent_id, m.content) for m in engine.list("anna")} == {("friday", FACT), ("friday", "Noted!")}


async def test_two_users_never_see_each_other(engine):
    await make_agent(FakeModel("Noted!"), MemoryScopeMiddleware(engine, user_id="anna")).reply(UserMsg("anna", FACT))
    model = FakeModel("I don't know.")
    bob = make_agent(model, MemoryScopeMiddleware(engine, user_id="bob"))
    await bob.reply(UserMsg("bob", "What is my dog's name?"))
    assert "Biscuit" not in text(model.calls[-1])
    assert {m.content for m in engine.list("bob")} == {"What is my dog's name?", "I don't know."}
    assert engine.count("anna") == 2


async def test_failing_backend_degrades_to_no_memory_with_a_warning(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.store = BrokenStore(engine.store)
    model = FakeModel("Still here.")
    agent = make_agent(model, MemoryScopeMiddleware(engine, user_id="anna"))
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        reply = await agent.reply(UserMsg("anna", "What is my secret dog name?"))
    assert reply.get_text_content() == "Still here."
    assert blocks(model.calls[-1]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.name == "memoryscope_plugins.adapters"]
    assert len(warnings) == 2 and all("StoreError" in w for w in warnings)
    assert "Biscuit" not in caplog.text and "secret dog" not in caplog.text


async def test_agent_control_tools(engine):
    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="agent_control")
    tools = await middleware.list_tools()
    assert [t.name for t in tools] == ["retrieve_from_memory", "record_to_memory"]
    assert set(tools[0].input_schema["properties"]) == {"keywords", "limit"}
    assert set(tools[1].input_schema["properties"]) == {"thinking", "content"}

    model = FakeModel({"name": "record_to_memory", "input": {"thinking": "a durable fact", "content": [FACT]}},
                      "I'll remember.")
    agent = make_agent(model, middleware, Toolkit(tools=tools))
    await agent.reply(UserMsg("anna", "Please remember: my dog is Biscuit."))
    memories = engine.list("anna")
    assert [(m.type.value, m.content) for m in memories] == [("custom", FACT)]  # no automatic recording
    assert "retrieve_from_memory" in model.calls[0][0]["content"][0]["text"]  # tools advertised
    assert blocks(model.calls[0]) == 0  # no automatic injection

    model = FakeModel({"name": "retrieve_from_memory", "input": {"keywords": ["dog", "pet"], "limit": 3}},
                      "Biscuit.")
    agent = make_agent(model, MemoryScopeMiddleware(engine, user_id="anna", mode="agent_control"),
                       Toolkit(tools=tools))
    reply = await agent.reply(UserMsg("anna", "What is my dog's name?"))
    assert reply.get_text_content() == "Biscuit."
    tool_results = [m for m in model.calls[-1] if m.get("role") == "tool"]
    assert tool_results and "Biscuit" in text(tool_results)
    assert text(tool_results).count(FACT) == 1  # results of both keywords merged


async def test_tools_of_other_users_and_failures(engine):
    engine.add("anna", FACT)
    bob = MemoryScopeMiddleware(engine, user_id="bob", mode="both")
    chunk = await bob.retrieve_from_memory(["dog"])
    assert "Biscuit" not in chunk.content[0].text
    anna = MemoryScopeMiddleware(engine, user_id="anna", mode="agent_control")
    odd_limit: Any = "many"  # a model may send anything
    found = (await anna.retrieve_from_memory(["dog"], limit=odd_limit)).content[0].text
    assert "Biscuit" in found and found.startswith("Today is ")  # the engine's block, dated
    assert "no keywords" in (await anna.retrieve_from_memory([])).content[0].text
    assert (await bob.record_to_memory("why", [])).state.value == "error"
    engine.store = BrokenStore(engine.store)
    failed = await bob.retrieve_from_memory(["dog"])
    assert failed.state.value == "error" and "StoreError" in failed.content[0].text
    assert (await bob.record_to_memory("why", ["Bob has a cat."])).state.value == "error"


async def test_both_mode_injects_records_and_lists_tools(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="both", top_k=2)
    model = FakeModel("Biscuit.")
    agent = make_agent(model, middleware, Toolkit(tools=await middleware.list_tools()))
    await agent.reply(UserMsg("anna", "What is my dog's name?"))
    assert blocks(model.calls[-1]) == 1 and "Biscuit" in text(model.calls[-1])
    assert "record_to_memory" in model.calls[-1][0]["content"][0]["text"]
    assert engine.count("anna") == 3


async def test_static_mode_has_no_tools(engine):
    middleware = MemoryScopeMiddleware(engine, user_id="anna")
    assert await middleware.list_tools() == []
    assert await middleware.on_system_prompt(None, "prompt") == "prompt"


def test_validation(engine):
    with pytest.raises(ValueError):
        MemoryScopeMiddleware(engine, user_id="")
    with pytest.raises(ValueError):
        MemoryScopeMiddleware(engine, user_id="anna", mode="sometimes")


def _booking_agent_asking_first(engine):
    """An agent whose one tool, booking a table, waits for the user's permission (a parked reply)."""
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool

    async def book_table(time: str) -> str:
        """Book a table.

        Args:
            time (str): when
        """
        return f"Table booked for {time}."

    ask_first = PermissionDecision(behavior=PermissionBehavior.ASK, message="book it?")
    model = FakeModel({"name": "book_table", "input": {"time": "8pm"}}, "Your table is booked for 8pm.")
    return make_agent(model, MemoryScopeMiddleware(engine, user_id="anna"),
                      Toolkit(tools=[FunctionTool(book_table, permission=ask_first)]))


async def test_a_reply_parked_for_permission_records_the_real_reply_not_the_placeholder(engine):
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from agentscope.message import Msg
    agent = _booking_agent_asking_first(engine)
    events = [e async for e in agent.reply_stream(UserMsg("anna", "Book a table at 8pm."), yield_final_msg=True)]
    parked = next(e for e in events if isinstance(e, Msg))
    assert "waiting for your permission" in parked.get_text_content()  # AgentScope's placeholder
    assert engine.list("anna") == []  # nothing recorded while the reply waits
    request = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    await agent.reply(UserConfirmResultEvent(reply_id=request.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for call in request.tool_calls]))
    recorded = [m.content for m in engine.list("anna", newest_first=False)]
    assert recorded == ["Book a table at 8pm.", "Your table is booked for 8pm."]


async def test_an_image_sent_while_a_reply_is_parked_does_not_take_the_parked_replys_place(engine):
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from agentscope.message import DataBlock, URLSource
    agent = _booking_agent_asking_first(engine)
    events = [e async for e in agent.reply_stream(UserMsg("anna", "Book a table at 8pm."))]
    request = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    photo = DataBlock(source=URLSource(url="https://example.com/menu.png", media_type="image/png"))
    with pytest.raises(ValueError):  # AgentScope takes no new message while a reply waits for a confirmation
        await agent.reply(UserMsg("anna", [photo]))
    assert engine.list("anna") == []
    await agent.reply(UserConfirmResultEvent(reply_id=request.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for call in request.tool_calls]))
    recorded = [m.content for m in engine.list("anna", newest_first=False)]
    assert recorded == ["Book a table at 8pm.", "Your table is booked for 8pm."]  # the parked reply's own words
    logged = engine.store.recent_messages("anna", "Friday", None, 100)
    calls = [m.message.tool_call for m in logged if m.message.tool_call is not None]
    assert [(c.name, c.status) for c in calls] == [("book_table", "ok")]


async def test_both_mode_scoped_to_the_agent_recalls_what_its_tool_saved(engine):
    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="both", scope_to_agent=True)
    tools = await middleware.list_tools()
    model = FakeModel({"name": "record_to_memory", "input": {"thinking": "durable", "content": [FACT]}}, "Noted.",
                      "Your dog is Biscuit.")
    agent = make_agent(model, middleware, Toolkit(tools=tools))
    await agent.reply(UserMsg("anna", "Please remember my dog's name."))
    saved = [m for m in engine.list("anna") if m.type.value == "custom"]
    assert [(m.agent_id, m.content) for m in saved] == [("Friday", FACT)]  # saved as the agent, not "assistant"
    await agent.reply(UserMsg("anna", "What is my dog's name?"))
    assert FACT in text(model.calls[-1])  # recalled automatically, with the agent filter on
    found = await middleware.retrieve_from_memory(["dog"])
    assert "Biscuit" in found.content[0].text  # the tool searches what the agent may see


async def test_the_tool_block_has_the_second_hop_lines_and_the_present_header(engine):
    from datetime import datetime, timedelta, timezone
    said = datetime(2023, 5, 8, 13, 0, tzinfo=timezone.utc)
    sessions = [
        ["My friend Anna moved to Boston last spring.", "Oh, that's a big change for her!"],
        ["I baked sourdough bread this morning.", "Nice!", "My garden tomatoes are turning red.", "Lovely."],
        ["How are your friends doing?", "Anna works night shifts as a nurse at the children's hospital."],
    ]
    for number, turns in enumerate(sessions):
        start = said + timedelta(days=10 * number)
        engine.record("caro", [{"role": "user" if i % 2 == 0 or number == 2 else "assistant", "content": text,
                                "timestamp": start + timedelta(minutes=i)} for i, text in enumerate(turns)],
                      session_id=f"s{number}")
    engine.settings.retrieval = engine.settings.retrieval.model_copy(update={"context_hop": 3})
    tool = MemoryScopeMiddleware(engine, user_id="caro", mode="agent_control")
    found = (await tool.retrieve_from_memory(["What does the person who moved to Boston do for a living?"],
                                             limit=1)).content[0].text
    assert "Anna works night shifts" in found  # reached only by the second hop (the name Anna)
    assert "the newest is what holds now" not in found
    now = (await tool.retrieve_from_memory(["Where does Anna live now?"], limit=1)).content[0].text
    assert "the newest is what holds now" in now
