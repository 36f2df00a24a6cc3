"""Memory tools in each framework (search / add / update / delete), scoped to one user, run by the
framework's own tool machinery with fake model clients."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from memoryscope_plugins import Entity, EntityKind
from memoryscope_plugins.errors import StoreError
from memoryscope_plugins.storage.base import LedgerChanges
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, record_earlier_session


def test_tools_are_scoped_to_the_user_and_report_failures(engine, caplog):
    from memoryscope_plugins.adapters._tools import MemoryTools
    bob_fact = engine.add("bob", "Bob's dog is Rex.")
    tools = MemoryTools(engine, user_id="anna")
    assert tools.add_memory("Anna's dog is Biscuit.").startswith("Saved as memory ")
    found = tools.search_memory("dog")
    assert "Biscuit" in found and "Rex" not in found
    assert "not found" in tools.update_memory(bob_fact.id, "hacked").lower().replace("no memory", "not found")
    assert "not found" in tools.delete_memory(bob_fact.id).lower().replace("no memory", "not found")
    assert engine.get("bob", bob_fact.id).content == "Bob's dog is Rex."
    anna_id = engine.list("anna")[0].id
    assert tools.update_memory(anna_id, "Anna's dog is Pretzel.") == f"Memory {anna_id} updated."
    assert "Pretzel" in tools.search_memory("dog")
    assert tools.delete_memory(anna_id) == f"Memory {anna_id} deleted." and engine.count("anna") == 0
    assert tools.search_memory("What is 2 + 2?") == "No relevant memories found."
    assert tools.add_memory("  ") == "Nothing to save: content is empty."

    class Broken:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any, **kwargs: Any) -> Any:
                raise StoreError("down")
            return fail
    real, engine.store = engine.store, Broken()
    try:
        assert "unavailable" in tools.search_memory("dog") and "unavailable" in tools.add_memory("x")
    finally:
        engine.store = real
    assert "Biscuit" not in caplog.text


def test_recall_entity_tells_what_is_known_about_someone(engine):
    from memoryscope_plugins.adapters._tools import MemoryTools
    engine.record("anna", [{"role": "user", "name": "Anna", "content": "I live in Porto."}])
    engine.add_alias("anna", "Anna", "安娜")
    melanie = Entity(id="mel", user_id="anna", name="Melanie", kind=EntityKind.PERSON, aliases=["Mel"])
    engine.store.put_ledger(LedgerChanges(user_id="anna", entities=[melanie]))
    engine.record("anna", [{"role": "user", "content": "Mel opened a clothing shop."}])
    engine.record("bob", [{"role": "user", "content": "Mel is my boss."}])
    engine.set_profile("anna", "home", "Porto")
    tools = MemoryTools(engine, user_id="anna")
    told = tools.recall_entity("mel")
    assert told.startswith("Melanie (person; also called Mel): mentioned 1 time(s), first ")
    assert "clothing shop" in told and "boss" not in told
    assert "home: Porto" in tools.recall_entity("me") and "住址：Porto" in tools.recall_entity("我")
    assert "home: Porto" in tools.recall_entity("Anna")
    missing = tools.recall_entity("Lisbon")
    assert missing.startswith("Nothing called 'Lisbon' is known")
    assert tools.recall_entity("x" * 300).startswith("Cannot recall")  # over the name limit: said, not raised
    assert tools.recall_entity("  ") == "No name given: nothing to recall."
    spoofed = tools.recall_entity("Me\u202el")  # a name that displays as another
    assert spoofed.startswith("Cannot recall 'Me\\u202el': name holds U+202E, a format character")
    assert tools.recall_entity("Mel\n").startswith("Cannot recall 'Mel\\n': name holds U+000A")  # not read as "Mel"
    assert "Melanie" not in MemoryTools(engine, user_id="bob").recall_entity("Mel")


def _agentchat_calling(engine, tool: str, arguments: dict[str, Any], answer: str) -> tuple[Any, Any, list[Any]]:
    """An AgentChat `AssistantAgent` with anna's memory tools, whose replayed model calls `tool` with
    `arguments`, then reads the result and answers `answer`: (agent, model client, tools)."""
    pytest.importorskip("autogen_ext.models.replay", reason="pip install 'memoryscope-plugins[autogen]'")
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory, memory_tools

    tools = memory_tools(MemoryScopeMemory(engine, user_id="anna"))
    usage = RequestUsage(prompt_tokens=0, completion_tokens=0)
    call = FunctionCall(id="1", name=tool, arguments=json.dumps(arguments))
    client = ReplayChatCompletionClient(
        [CreateResult(finish_reason="function_calls", content=[call], usage=usage, cached=False), answer],
        model_info={"vision": False, "function_calling": True, "json_output": False, "family": "unknown",
                    "structured_output": False})
    return AssistantAgent("assistant", model_client=client, tools=tools, reflect_on_tool_use=True), client, tools


async def test_agentchat_assistant_uses_the_memory_tools(engine):
    agent, _, tools = _agentchat_calling(engine, "add_memory", {"content": "Anna's dog is Biscuit."}, "Saved.")
    assert [t.name for t in tools] == ["search_memory", "recall_entity", "add_memory", "update_memory", "delete_memory"]
    await agent.run(task="Remember that my dog is Biscuit.")
    assert [m.content for m in engine.list("anna")] == ["Anna's dog is Biscuit."]
    found = await tools[0].run_json({"query": "dog", "limit": 3}, cancellation_token=None)
    assert "Biscuit" in str(found)


async def test_agentchat_search_tool_finds_for_a_statement_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    agent, client, _ = _agentchat_calling(engine, "search_memory", {"query": STATEMENT, "limit": TOP_K},
                                          "That sounds like a lot.")
    await agent.run(task=STATEMENT)
    assert REMEMBERED in str(client.create_calls[-1]["messages"])  # the tool's result, read by the model


class FakeClient:
    replies: ClassVar[list[Any]] = []

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        self.config = config

    def create(self, params: dict[str, Any]) -> Any:
        reply = FakeClient.replies.pop(0) if FakeClient.replies else "TERMINATE"
        calls = None
        text = reply
        if isinstance(reply, dict):
            calls = [SimpleNamespace(id="call1", type="function", function=SimpleNamespace(
                name=reply["name"], arguments=json.dumps(reply["args"])))]
            text = None
        message = SimpleNamespace(content=text, role="assistant", tool_calls=calls, function_call=None)
        return SimpleNamespace(id=f"r{len(FakeClient.replies)}-{id(message)}",
                               choices=[SimpleNamespace(message=message)], model="fake", cost=0.0, usage=None)

    def message_retrieval(self, response: Any) -> list[Any]:
        message = response.choices[0].message
        if message.tool_calls:
            return [{"content": None, "role": "assistant", "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}}
                for c in message.tool_calls]}]
        return [message.content]

    def cost(self, response: Any) -> float:
        return 0.0

    @staticmethod
    def get_usage(response: Any) -> dict[str, Any]:
        return {}


def _classic_agents_with_memory_tools(engine) -> tuple[Any, Any, list[str]]:
    """A classic AutoGen assistant (the scripted `FakeClient`) calling anna's memory tools, which the
    human's proxy runs: (assistant, human, tool names)."""
    autogen = pytest.importorskip("autogen", reason="pip install 'memoryscope-plugins[autogen]'")
    if not hasattr(autogen, "ConversableAgent"):
        pytest.skip("the installed `autogen` is not classic AutoGen")
    from autogen import ConversableAgent, UserProxyAgent

    from memoryscope_plugins.adapters.autogen_classic import register_memory_tools

    config = {"config_list": [{"model": "fake", "model_client_cls": "FakeClient"}], "cache_seed": None}
    assistant = ConversableAgent("assistant", llm_config=config, human_input_mode="NEVER")
    human = UserProxyAgent("anna", human_input_mode="NEVER", code_execution_config=False,
                           is_termination_msg=lambda m: "TERMINATE" in (m.get("content") or ""))
    names = register_memory_tools(engine, caller=assistant, executor=human, user_id="anna")
    # AutoGen rebuilds its client on new tools; it types the class it takes as an instance
    assistant.register_model_client(model_client_cls=FakeClient)  # type: ignore[arg-type]
    return assistant, human, names


def test_classic_register_memory_tools(engine):
    assistant, human, names = _classic_agents_with_memory_tools(engine)
    FakeClient.replies = [{"name": "add_memory", "args": {"content": "Anna's dog is Biscuit."}}, "TERMINATE"]
    assert names == ["search_memory", "recall_entity", "add_memory", "update_memory", "delete_memory"]
    from memoryscope_plugins.adapters._tools import tool_spec
    assert [t["function"]["description"] for t in assistant.llm_config["tools"]] == [
        tool_spec(name).description for name in names]
    human.initiate_chat(assistant, message="Remember my dog is Biscuit.", max_turns=2, silent=True)
    assert [m.content for m in engine.list("anna")] == ["Anna's dog is Biscuit."]
    assert engine.list("anna")[0].agent_id == "assistant"


def test_classic_search_tool_finds_for_a_statement_what_was_said_in_other_words(engine):
    assistant, human, _ = _classic_agents_with_memory_tools(engine)
    record_earlier_session(engine)
    FakeClient.replies = [{"name": "search_memory", "args": {"query": STATEMENT, "limit": TOP_K}}, "TERMINATE"]
    human.initiate_chat(assistant, message=STATEMENT, max_turns=2, silent=True)
    results = [m for m in assistant.chat_messages[human] if m.get("role") == "tool"]
    assert len(results) == 1 and REMEMBERED in str(results[0])


async def test_agentscope_memory_tool_set(engine):
    pytest.importorskip("agentscope.middleware", reason="pip install 'memoryscope-plugins[agentscope]'")
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit

    from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware
    from tests.adapters.test_agentscope import FakeModel

    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="agent_control", tool_set="memory")
    tools = await middleware.list_tools()
    assert [t.name for t in tools] == ["search_memory", "recall_entity", "add_memory", "update_memory", "delete_memory"]
    model = FakeModel({"name": "add_memory", "input": {"content": "Anna's dog is Biscuit."}},
                      {"name": "search_memory", "input": {"query": "dog"}}, "Biscuit.")
    agent = Agent(name="Friday", system_prompt="Hi.", model=model, toolkit=Toolkit(tools=tools),
                  middlewares=[middleware])
    await agent.reply(UserMsg(name="user", content="Remember my dog Biscuit, then tell me his name."))
    assert [(m.content, m.agent_id) for m in engine.list("anna")] == [("Anna's dog is Biscuit.", "Friday")]
    assert "Biscuit" in json.dumps(model.calls[-1]) and "search_memory" in json.dumps(model.calls[0])


def test_tool_specs_come_from_the_tools_docstrings():
    from memoryscope_plugins.adapters._tools import TOOL_NAMES, clamp_limit, tool_names, tool_spec
    assert tool_names() == list(TOOL_NAMES)
    assert tool_names(update=False) == ["search_memory", "recall_entity", "add_memory", "delete_memory"]
    assert tool_names(update=False, delete=False) == ["search_memory", "recall_entity", "add_memory"]
    search = tool_spec("search_memory")
    assert list(search.arguments) == ["query", "limit"] and "\n" not in tool_spec("add_memory").description
    assert search.parameters == {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string", "description": search.arguments["query"]},
        "limit": {"type": "integer", "description": search.arguments["limit"], "default": 5}}}
    assert tool_spec("update_memory").parameters["required"] == ["memory_id", "content"]
    with pytest.raises(ValueError):
        tool_spec("forget_everything")
    assert (clamp_limit("7", 5), clamp_limit(0, 5), clamp_limit(500, 5), clamp_limit("many", 5)) == (7, 1, 50, 5)


async def test_every_framework_tells_the_model_the_same_about_the_tools(engine):
    """The names, descriptions and argument descriptions are written once, in _tools."""
    pytest.importorskip("autogen_agentchat", reason="pip install 'memoryscope-plugins[autogen]'")
    pytest.importorskip("ag2", reason="pip install 'memoryscope-plugins[ag2]'")
    pytest.importorskip("agentscope.middleware", reason="pip install 'memoryscope-plugins[agentscope]'")
    from memoryscope_plugins.adapters import ag2, agentscope, autogen_agentchat
    from memoryscope_plugins.adapters._tools import TOOL_NAMES, tool_spec

    def described(pairs: list[tuple[str, str]]) -> None:
        assert [name for name, _ in pairs] == list(TOOL_NAMES)
        assert all(text == tool_spec(name).description for name, text in pairs)

    chat = autogen_agentchat.memory_tools(autogen_agentchat.MemoryScopeMemory(engine, user_id="anna"))
    described([(t.name, t.description) for t in chat])
    given = ag2.memory_tools(engine, user_id="anna")
    described([(t.name, t.schema.function.description) for t in given])
    for made in given:
        properties = made.schema.function.parameters["properties"]
        assert {k: v["description"] for k, v in properties.items()} == tool_spec(made.name).arguments
    scope = await agentscope.MemoryScopeMiddleware(engine, user_id="anna", mode="both", tool_set="memory").list_tools()
    described([(t.name, t.description) for t in scope])
    assert all(t.input_schema == tool_spec(t.name).parameters for t in scope)
