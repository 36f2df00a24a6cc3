"""ag2 1.x (`ag2.Agent`) adapter, with real ag2 agents scripted by ag2's own offline model
(`ag2.testing.TestConfig`, wrapped in `TrackingConfig` to see each model call's prompt), and the
real embedded store."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

ag2 = pytest.importorskip("ag2", reason="ag2 1.x is not installed (pip install 'memoryscope-plugins[ag2]')")
if not hasattr(ag2, "Agent") or not hasattr(ag2, "Middleware"):
    pytest.skip("the installed `ag2` is not ag2 1.x", allow_module_level=True)

from ag2 import Agent, Context
from ag2.events import ModelMessage, ModelResponse, ToolCallEvent, ToolResultEvent
from ag2.testing import TestConfig, TrackingConfig

from memoryscope_plugins.adapters._common import MemoryConfig
from memoryscope_plugins.adapters.ag2 import (
    SPEAKER_VARIABLE,
    MemoryScopeMiddleware,
    MemoryScopePlugin,
    memory_tools,
)
from memoryscope_plugins.errors import StoreError
from tests.support.fakes.broken_store import BrokenStore
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, UNRELATED, record_earlier_session

BLOCK = "<long_term_memory>"
FACT = "My dog is called Biscuit."


def scripted(*turns: Any) -> TrackingConfig:
    """ag2's offline model, answering `turns` in order, keeping every call's prompt."""
    return TrackingConfig(TestConfig(*turns))


def call(name: str, **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(name=name, arguments=json.dumps(arguments))


def rows(engine, user_id: str = "anna") -> list[tuple[str, str | None, str | None, str]]:
    """(content, role, speaker, agent_id) of every turn memory of a user, oldest first."""
    return [(m.content, m.role, m.speaker, m.agent_id)
            for m in engine.list(user_id, types=["turn"], newest_first=False)]


def prompt_of(config: TrackingConfig, index: int = -1) -> str:
    return "\n".join(config.calls[index].prompt)


async def test_recall_reaches_a_new_agent_and_stays_out_of_the_history(engine):
    first = Agent("helper", "You help.", config=scripted("Noted."), plugins=[MemoryScopePlugin(engine, user_id="anna")])
    await first.ask(FACT)
    config = scripted(call("weather", city="Lisbon"), "Your dog is Biscuit.", "It is 4.")

    def weather(city: str) -> str:
        return f"sunny in {city}"

    agent = Agent("helper", "You help.", config=config, tools=[weather],
                  plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await agent.ask("What is my dog's name?")
    assert reply.body == "Your dog is Biscuit."
    for index in (0, 1):  # every model call of the turn (the tool loop too), in the system prompt
        prompt = config.calls[index].prompt
        assert prompt[0] == "You help." and BLOCK in prompt[-1] and "Biscuit" in prompt[-1]
    history = await reply.history.get_events()
    assert not any(BLOCK in str(event) for event in history)  # the stream never holds the block
    assert list(reply.context.prompt) == ["You help."]  # restored after each call
    second = await reply.ask("What is 2 + 2?")  # next turn of the same conversation: nothing relevant
    assert second.body == "It is 4." and BLOCK not in prompt_of(config)


async def test_a_statement_brings_back_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    config = scripted("That sounds like a lot.", "Enjoy the sun.")
    agent = Agent("helper", "You help.", config=config,
                  plugins=[MemoryScopePlugin(engine, user_id="anna", top_k=TOP_K)])
    reply = await agent.ask(STATEMENT)
    assert REMEMBERED in prompt_of(config)
    reply = await reply.ask(UNRELATED)
    assert REMEMBERED not in prompt_of(config)
    assert not any(BLOCK in str(event) for event in await reply.history.get_events())
    assert list(reply.context.prompt) == ["You help."]


async def test_the_search_tool_finds_for_a_statement_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    config = scripted(call("search_memory", query=STATEMENT, limit=TOP_K), "That sounds like a lot.")
    agent = Agent("helper", config=config,
                  plugins=[MemoryScopePlugin(engine, user_id="anna", tools=True, automatic=False)])
    reply = await agent.ask(STATEMENT)
    results = [event for event in await reply.history.get_events() if isinstance(event, ToolResultEvent)]
    assert len(results) == 1 and REMEMBERED in " ".join(str(part.content) for part in results[0].result.parts)


async def test_both_sides_recorded_as_who_said_them_and_tool_plumbing_is_not(engine):
    config = scripted(ModelResponse(ModelMessage("Let me check."), tool_calls=_calls(call("lookup", key="x"))),
                      "Your order ships Monday.", "You're welcome.")

    def lookup(key: str) -> str:
        return "ships Monday"

    agent = Agent("shop", config=config, tools=[lookup], plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await agent.ask("When does my order ship?")
    await reply.ask("Thanks!")
    assert rows(engine) == [("When does my order ship?", "user", "anna", "shop"),
                            ("Your order ships Monday.", "assistant", "shop", "shop"),
                            ("Thanks!", "user", "anna", "shop"),
                            ("You're welcome.", "assistant", "shop", "shop")]
    sessions = {m.session_id for m in engine.list("anna")}
    assert sessions == {str(reply.context.stream.id)}  # one conversation, one session


async def test_a_turn_ending_on_tool_calls_records_the_request_but_no_answer(engine):
    # the model asks for a client-side tool nobody here runs: the turn ends waiting on it
    from ag2.tools.final import ClientTool
    config = scripted(call("pick_date"))
    picker = ClientTool({"function": {"name": "pick_date", "description": "Ask the UI for a date.",
                                      "parameters": {"type": "object", "properties": {}}}})
    agent = Agent("planner", config=config, tools=[picker], plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await agent.ask("Book me a table.")
    assert reply.response.tool_calls  # the turn ended waiting on the client
    assert rows(engine) == [("Book me a table.", "user", "anna", "planner")]
    assert engine.tool_stats("planner") == []  # a call with no result yet is not recorded


async def test_a_turn_resumed_with_the_client_tools_result_recalls_and_records_the_answer(engine):
    from ag2.events import ToolResultsEvent
    from ag2.tools.final import ClientTool
    engine.record("anna", [{"role": "user", "content": "I always book a table by the window."}])
    picker = ClientTool({"function": {"name": "pick_date", "description": "Ask the UI for a date.",
                                      "parameters": {"type": "object", "properties": {}}}})
    first = Agent("planner", config=scripted(call("pick_date")), tools=[picker],
                  plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await first.ask("Book me a table.")
    pending = reply.response.tool_calls.calls[0]
    history = await reply.history.get_events()
    config = scripted("Booked a window table for Friday.")
    resumed = Agent("planner", config=config, tools=[picker], plugins=[MemoryScopePlugin(engine, user_id="anna")])
    answer = await resumed.resume(*history, ToolResultsEvent([ToolResultEvent.from_call(pending, "Friday")]))
    assert answer.body == "Booked a window table for Friday."
    assert "by the window" in prompt_of(config)  # searched for the request the resumed turn answers
    assert rows(engine)[1:] == [("Book me a table.", "user", "anna", "planner"),
                                ("Booked a window table for Friday.", "assistant", "planner", "planner")]


async def test_a_final_tool_result_is_the_answer(engine):
    from ag2 import ToolResult

    def confirm() -> ToolResult:
        return ToolResult("Table booked for 8pm.", final=True)

    agent = Agent("planner", config=scripted(call("confirm")), tools=[confirm],
                  plugins=[MemoryScopePlugin(engine, user_id="anna")])
    await agent.ask("Book me a table.")
    assert rows(engine) == [("Book me a table.", "user", "anna", "planner"),
                            ("Table booked for 8pm.", "assistant", "planner", "planner")]


async def test_a_delegated_agent_records_its_task_as_the_delegating_agents_words(engine):
    worker = Agent("researcher", config=scripted("Lisbon has 3 vegetarian places."),
                   plugins=[MemoryScopePlugin(engine, user_id="anna")])
    lead = Agent("lead", config=scripted(call("task_researcher", objective="Find vegetarian places in Lisbon."),
                                         "Here are 3 places."),
                 tools=[worker.as_tool(description="Researches things.")],
                 plugins=[MemoryScopePlugin(engine, user_id="anna")])
    await lead.ask("Plan a vegetarian dinner in Lisbon.")
    recorded = rows(engine)
    assert [content for content, role, _, _ in recorded if role == "user"] == ["Plan a vegetarian dinner in Lisbon."]
    assert ("Find vegetarian places in Lisbon.", "assistant", "lead", "researcher") in recorded
    assert ("Lisbon has 3 vegetarian places.", "assistant", "researcher", "researcher") in recorded
    assert ("Here are 3 places.", "assistant", "lead", "lead") in recorded
    # after the turn the marker is gone: the human's next message is the human's again
    assert SPEAKER_VARIABLE not in (await lead.ask("thanks", variables={})).context.variables


async def test_speaker_variable_and_human_names(engine):
    # each ask starts the scripted model afresh: one answer serves both
    agent = Agent("critic", config=scripted("Noted."),
                  plugins=[MemoryScopePlugin(engine, user_id="anna", human_names=["anna"])])
    await agent.ask("Here is my plan: pasta.", variables={SPEAKER_VARIABLE: "planner"})
    await agent.ask("I agree, add cake.", variables={SPEAKER_VARIABLE: "anna"})
    assert rows(engine) == [("Here is my plan: pasta.", "assistant", "planner", "critic"),
                            ("Noted.", "assistant", "critic", "critic"),
                            ("I agree, add cake.", "user", "anna", "critic"),
                            ("Noted.", "assistant", "critic", "critic")]


async def test_questions_put_to_the_human_mid_turn_are_recorded_approvals_are_not(engine):
    async def budget(ctx: Context) -> str:
        return f"budget: {await ctx.input('What is your budget?')}"

    agent = Agent("planner", config=scripted(call("budget"), "Dinner for 50 euros, booked."), tools=[budget],
                  hitl_hook=lambda event: "50 euros",
                  plugins=[MemoryScopePlugin(engine, user_id="anna")])
    await agent.ask("Book a dinner.")
    assert rows(engine) == [("Book a dinner.", "user", "anna", "planner"),
                            ("What is your budget?", "assistant", "planner", "planner"),
                            ("50 euros", "user", "anna", "planner"),
                            ("Dinner for 50 euros, booked.", "assistant", "planner", "planner")]


async def test_memory_tools_are_scoped_to_the_turns_user(engine):
    bob_fact = engine.add("bob", "Bob's dog is Rex.")
    config = scripted(call("add_memory", content="Anna's dog is Biscuit."), "Saved.",
                      call("search_memory", query="dog"), "Found it.",
                      call("update_memory", memory_id=bob_fact.id, content="hacked"), "Done.",
                      call("delete_memory", memory_id=bob_fact.id), "Done.")
    agent = Agent("helper", config=config, tools=memory_tools(engine))
    reply = await agent.ask("Remember my dog.", variables={"user_id": "anna"})
    for question in ("What's my dog?", "Fix that.", "Forget that."):  # one conversation, one scripted model
        reply = await reply.ask(question)
    results = [str(event) for event in await reply.history.get_events() if type(event).__name__ == "ToolResultEvent"]
    assert sum(f"No memory '{bob_fact.id}' found" in text for text in results) == 2
    assert engine.get("bob", bob_fact.id).content == "Bob's dog is Rex."  # anna's turn never reaches bob's
    assert [m.content for m in engine.list("anna")] == ["Anna's dog is Biscuit."]
    found = json.dumps([call_.prompt for call_ in config.calls])  # the search result went back to the model
    assert "Rex" not in found
    search_results = await _tool_results(agent, engine, "search_memory", {"query": "dog"}, "anna")
    assert "Biscuit" in search_results and "Rex" not in search_results
    assert "Rex" in await _tool_results(agent, engine, "search_memory", {"query": "dog"}, "bob")
    assert "unavailable" in await _tool_results(agent, engine, "search_memory", {"query": "dog"}, None)


async def _tool_results(agent: Agent, engine, name: str, arguments: dict[str, Any], user: str | None) -> str:
    tools = {t.name: t for t in memory_tools(engine)}
    probe = Agent("helper", config=scripted(call(name, **arguments), "ok"), tools=[tools[name]])
    reply = await probe.ask("go", variables={"user_id": user} if user else {})
    events = await reply.history.get_events()
    return " ".join(str(event) for event in events if type(event).__name__ == "ToolResultEvent")


async def test_plugin_with_tools_gives_tools_and_instructions(engine):
    config = scripted(call("add_memory", content="I am vegetarian."), "Saved.")
    agent = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine, user_id="anna", tools=True)])
    await agent.ask("Remember I'm vegetarian.")
    names = [schema.function.name for schema in config.calls[0].tools]
    assert names == ["search_memory", "recall_entity", "add_memory", "update_memory", "delete_memory"]
    assert "search_memory" in prompt_of(config, 0)
    custom = [m for m in engine.list("anna") if m.type == "custom"]
    assert [(m.content, m.agent_id) for m in custom] == [("I am vegetarian.", "helper")]
    tools_only = MemoryScopePlugin(engine, user_id="anna", tools=True, automatic=False)
    assert tools_only._middleware == [] and len(tools_only._tools) == 5


async def test_relevance_floor(engine):
    for fact in (FACT, "I live in Lisbon."):
        engine.record("anna", [{"role": "user", "content": fact}])
    config = scripted("4.", "Biscuit.", "4.")
    agent = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine, user_id="anna")])
    await agent.ask("What is 2 + 2?")
    assert BLOCK not in prompt_of(config)
    await agent.ask("What is my dog's name?")
    assert "Biscuit" in prompt_of(config)
    off = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine, user_id="anna", min_relevance=-1)])
    await off.ask("What is 2 + 2?")
    assert "Lisbon" in prompt_of(config) and "Biscuit" in prompt_of(config)


async def test_user_from_the_turn_or_a_callable_and_none_skips_memory(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    config = scripted("a", "b", "c")
    by_variable = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine)])
    await by_variable.ask("What is my dog's name?", variables={"user_id": "anna"})
    assert "Biscuit" in prompt_of(config)
    await by_variable.ask("What is my dog's name?", variables={"user_id": "bob"})
    assert BLOCK not in prompt_of(config)  # bob never sees anna's memories
    assert [c for c, role, _, _ in rows(engine, "bob") if role == "user"] == ["What is my dog's name?"]
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        await by_variable.ask("What is my dog's name?")
    assert "no user" in caplog.text and engine.users() == ["anna", "bob"]
    by_callable = Agent("helper", config=scripted("d"),
                        plugins=[MemoryScopePlugin(engine, user_id=lambda ctx: ctx.variables.get("person"))])
    await by_callable.ask("hello there", variables={"person": "carol"})
    assert rows(engine, "carol")[0][:3] == ("hello there", "user", "carol")


async def test_failing_backend_degrades_to_no_memory_with_a_warning(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.store = BrokenStore(engine.store)
    config = scripted("I don't know.")
    agent = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine, user_id="anna")])
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        reply = await agent.ask("What is my secret dog name?")
    assert reply.body == "I don't know." and BLOCK not in prompt_of(config)
    warnings = [r.getMessage() for r in caplog.records if r.name == "memoryscope_plugins.adapters"]
    assert len(warnings) == 2 and all("StoreError" in w for w in warnings)
    assert any("retrieval" in w for w in warnings) and any("recording" in w for w in warnings)
    assert "Biscuit" not in caplog.text and "secret dog" not in caplog.text


async def test_on_error_raise_lets_the_error_through(engine):
    engine.store = BrokenStore(engine.store)
    agent = Agent("helper", config=scripted("hi"),
                  plugins=[MemoryScopePlugin(engine, user_id="anna", on_error="raise")])
    with pytest.raises(StoreError):
        await agent.ask("hello")


async def test_shared_options_template_and_scope_to_agent(engine):
    engine.record("anna", [{"role": "user", "content": FACT}], agent_id="vet")
    engine.record("anna", [{"role": "user", "content": "My dog loves the beach."}], agent_id="helper")
    config = scripted("a", "b")
    mw = MemoryScopeMiddleware(engine, user_id="anna", template="<mem>{context}</mem>", scope_to_agent=True, top_k=5)
    agent = Agent("helper", config=config, middleware=[mw])
    await agent.ask("Tell me about my dog.")
    prompt = prompt_of(config)
    assert "<mem>" in prompt and BLOCK not in prompt
    assert "beach" in prompt and "Biscuit" not in prompt  # only what this agent recorded
    described = agent.middleware[0].middleware.describe()
    assert described.config["scope_to_agent"] is True and described.config["top_k"] == 5
    with_config = Agent("helper", config=config,
                        middleware=[MemoryScopeMiddleware(engine, config=MemoryConfig(user_id="anna", agent_id="vet",
                                                                                      scope_to_agent=True))])
    await with_config.ask("Tell me about my dog.")
    assert "Biscuit" in prompt_of(config) and "beach" not in prompt_of(config)


def test_input_validation(engine):
    with pytest.raises(TypeError):
        MemoryScopePlugin(object(), user_id="anna")
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="  ")
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="anna", top_k=0)
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="anna", template="no placeholder")
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="anna", on_error="ignore")
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="anna", min_relevance=2)
    with pytest.raises(ValueError):
        MemoryScopePlugin(engine, user_id="anna", automatic=False)
    with pytest.raises(TypeError):
        MemoryScopeMiddleware(engine, config={"user_id": "anna"})
    with pytest.raises(TypeError):
        MemoryScopePlugin(engine, user_id=42)
    with pytest.raises(TypeError):
        memory_tools("not an engine")


async def test_empty_and_oversized_messages_do_not_break_the_turn(engine):
    config = scripted("ok", "fine")
    agent = Agent("helper", config=config, plugins=[MemoryScopePlugin(engine, user_id="anna")])
    reply = await agent.ask("   ")
    assert [c for c, *_ in rows(engine)] == ["ok"]
    huge = "x " * (engine.settings.max_content_chars + 10)
    reply = await reply.ask(huge)
    assert reply.body == "fine" and [c for c, *_ in rows(engine)] == ["ok", "fine"]


def _calls(*events: ToolCallEvent):
    from ag2.events import ToolCallsEvent
    return ToolCallsEvent(list(events))


# -- ag2.network: a hub in this process, a human and agents talking in channels -------------------------

class _OneScript(TestConfig):
    """ag2's offline model with one script for every turn (TestConfig restarts it at each `ask`)."""

    def create(self):
        if not hasattr(self, "_client"):
            self._client = super().create()
        return self._client


async def _hub():
    from ag2.knowledge import MemoryKnowledgeStore
    from ag2.network import Hub, HubClient
    from ag2.network.transport.local import LocalLink
    hub = await Hub.open(MemoryKnowledgeStore(), expectation_sweep_interval=0)
    client = HubClient(LocalLink(hub))
    await client.open()
    return hub, client


async def _texts_from(client, channel_id: str, sender_id: str, count: int) -> list[str]:
    import asyncio

    from ag2.network import EV_TEXT
    for _ in range(200):
        texts = [e.event_data["text"] for e in await client.read_wal(channel_id)
                 if e.event_type == EV_TEXT and e.sender_id == sender_id]
        if len(texts) >= count:
            return texts
        await asyncio.sleep(0.05)
    raise AssertionError("no reply in the channel")


async def test_network_channel_with_a_human_records_the_human_as_the_user(engine):
    from ag2.network import Passport
    hub, client = await _hub()
    try:
        script = _OneScript("Lisbon is lovely.", call("add_memory", content="Anna loves ramen."), "Noted, ramen.")
        assistant = Agent("assistant", config=script,
                          plugins=[MemoryScopePlugin(engine, tools=True)])  # the user: the channel's human
        registered = await client.register(assistant, Passport(name="assistant"), attach_plugin=False)
        anna = await client.register_human(Passport(name="anna"))
        channel = await anna.open(type="conversation", target="assistant")
        await anna.send(channel.channel_id, "I live in Lisbon.")
        await _texts_from(client, channel.channel_id, registered.agent_id, 1)
        await anna.send(channel.channel_id, "My favourite food is ramen.")
        await _texts_from(client, channel.channel_id, registered.agent_id, 2)
    finally:
        await client.close()
        await hub.close()
    assert rows(engine) == [("I live in Lisbon.", "user", "anna", "assistant"),
                            ("Lisbon is lovely.", "assistant", "assistant", "assistant"),
                            ("My favourite food is ramen.", "user", "anna", "assistant"),
                            ("Noted, ramen.", "assistant", "assistant", "assistant")]
    assert [m.content for m in engine.list("anna", types=["custom"])] == ["Anna loves ramen."]  # the tool's user too


@pytest.mark.parametrize("planner_memory", [False, True])
async def test_network_channel_between_agents_records_each_agent_as_itself_once(engine, planner_memory):
    from ag2.network import Passport
    hub, client = await _hub()
    try:
        assistant = Agent("assistant", config=_OneScript("Pasta, then cake."),
                          plugins=[MemoryScopePlugin(engine, user_id="anna")])
        registered = await client.register(assistant, Passport(name="assistant"), attach_plugin=False)
        # without memory the planner has nothing more to say after its request; with memory it thanks,
        # reading the assistant's answer, which the assistant recorded already
        planner_agent = (Agent("planner", config=_OneScript("Thanks, noted."),
                               plugins=[MemoryScopePlugin(engine, user_id="anna")]) if planner_memory
                         else Agent("planner", config=_OneScript()))
        planner = await client.register(planner_agent, Passport(name="planner"), attach_plugin=False)
        channel = await planner.open(type="conversation", target="assistant")
        await channel.send("Suggest a menu for Anna's dinner.")
        await _texts_from(client, channel.channel_id, registered.agent_id, 1)
        if planner_memory:
            await _texts_from(client, channel.channel_id, planner.agent_id, 2)  # its request, then its thanks
    finally:
        await client.close()
        await hub.close()
    expected = [("Suggest a menu for Anna's dinner.", "assistant", "planner", "assistant"),
                ("Pasta, then cake.", "assistant", "assistant", "assistant")]
    if planner_memory:
        expected.append(("Thanks, noted.", "assistant", "planner", "planner"))
    assert rows(engine) == expected


async def test_network_discussion_records_the_humans_words_once_without_the_channels_label(engine):
    from ag2.network import Passport
    hub, client = await _hub()
    try:
        members = []
        for name, answer in (("chef", "Pasta."), ("baker", "Cake.")):  # both with memory for anna
            agent = Agent(name, config=_OneScript(answer), plugins=[MemoryScopePlugin(engine, user_id="anna")])
            members.append(await client.register(agent, Passport(name=name), attach_plugin=False))
        anna = await client.register_human(Passport(name="anna"))
        channel = await anna.open(type="discussion", target=["chef", "baker"])  # shows "[anna]: ..." to each
        await anna.send(channel.channel_id, "Plan my dinner.")
        for member in members:
            await _texts_from(client, channel.channel_id, member.agent_id, 1)
    finally:
        await client.close()
        await hub.close()
    recorded = rows(engine)
    # under whichever member recorded it first (the two answer at once)
    assert [row[:3] for row in recorded if row[1] == "user"] == [("Plan my dinner.", "user", "anna")]
    assert sorted(row for row in recorded if row[1] == "assistant") == [
        ("Cake.", "assistant", "baker", "baker"), ("Pasta.", "assistant", "chef", "chef")]


def test_a_missing_ag2_names_the_extra(monkeypatch):
    import importlib.util
    import sys

    import memoryscope_plugins.adapters.ag2 as adapter
    monkeypatch.setitem(sys.modules, "ag2", None)  # as if ag2 1.x were not installed
    spec = importlib.util.spec_from_file_location("_ag2_adapter_without_ag2", adapter.__file__)
    with pytest.raises(ImportError, match=r"memoryscope-plugins\[ag2\]"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
