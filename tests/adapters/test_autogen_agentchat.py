"""AutoGen AgentChat 0.7 adapter, with a real AssistantAgent and the offline ReplayChatCompletionClient."""

from __future__ import annotations

import logging
from typing import Any

import pytest

MISSING = "AutoGen AgentChat / autogen-ext is not installed (pip install 'memoryscope-plugins[autogen]')"
pytest.importorskip("autogen_agentchat", reason=MISSING)
pytest.importorskip("autogen_ext.models.replay", reason=MISSING)

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import CancellationToken
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_core.models import SystemMessage
from autogen_ext.models.replay import ReplayChatCompletionClient

from memoryscope_plugins.adapters.autogen_agentchat import (
    MemoryAssistantAgent,
    MemoryScopeMemory,
    run_stream_with_memory,
    run_with_memory,
)
from tests.support.fakes.broken_store import BrokenStore
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, UNRELATED, record_earlier_session

BLOCK = "<long_term_memory>"
FACT = "My dog is called Biscuit."


def client(*replies: str) -> ReplayChatCompletionClient:
    return ReplayChatCompletionClient(list(replies) or ["ok"] * 8)


def last_prompt(model_client: ReplayChatCompletionClient) -> list[Any]:
    return list(model_client.create_calls[-1]["messages"])


def text(messages: list[Any]) -> str:
    return "\n".join(str(m.content) for m in messages)


def blocks(messages: list[Any]) -> int:
    return sum(isinstance(m, SystemMessage) and BLOCK in m.content for m in messages)


async def test_fact_from_session_one_reaches_a_new_agent_in_session_two(engine):
    first = AssistantAgent("assistant", model_client=client("Noted!"),
                           memory=[MemoryScopeMemory(engine, user_id="anna")])
    await run_with_memory(first, FACT)
    second_client = client("Biscuit.")
    second = AssistantAgent("assistant", model_client=second_client, memory=[MemoryScopeMemory(engine, user_id="anna")])
    result = await run_with_memory(second, "What is my dog's name?")
    assert result.messages[-1].content == "Biscuit."
    prompt = last_prompt(second_client)
    assert blocks(prompt) == 1 and "Biscuit" in text(prompt)
    assert isinstance(prompt[0], SystemMessage) and blocks(prompt[1:2]) == 1  # next to the agent's system message
    assert any(type(m).__name__ == "MemoryQueryEvent" for m in result.messages)


async def test_history_stays_clean_and_every_turn_is_recorded(engine):
    model_client = client("r1", "r2", "r3", "r4")
    memory = MemoryScopeMemory(engine, user_id="anna")
    agent = AssistantAgent("assistant", model_client=model_client, memory=[memory])
    questions = [FACT, "I live in Lisbon.", "What is my dog's name?", "Where do I live?"]
    for number, question in enumerate(questions, start=1):
        await run_with_memory(agent, question)
        contents = [m.content for m in engine.list("anna")]
        assert len(contents) == 2 * number and question in contents and f"r{number}" in contents
        assert blocks(await agent.model_context.get_messages()) == 0
    assert len(await agent.model_context.get_messages()) == 2 * len(questions)
    assert all(blocks(call["messages"]) <= 1 for call in model_client.create_calls)
    assert "Lisbon" in text(last_prompt(model_client))
    assert {m.agent_id for m in engine.list("anna")} == {"assistant"}


async def test_bare_assistant_agent_never_piles_up_memory_blocks(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    model_client = client("a", "b", "c")
    agent = AssistantAgent("assistant", model_client=model_client, memory=[MemoryScopeMemory(engine, user_id="anna")])
    for question in ("dog?", "dog name?", "my dog?"):
        await agent.run(task=question)
        assert blocks(await agent.model_context.get_messages()) <= 1
    assert all(blocks(call["messages"]) == 1 for call in model_client.create_calls)


async def test_windowed_context_still_shows_the_block(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    model_client = client("a", "b", "c", "d")
    agent = AssistantAgent("assistant", model_client=model_client, model_context=BufferedChatCompletionContext(2),
                           memory=[MemoryScopeMemory(engine, user_id="anna")])
    for question in ("dog?", "dog name?", "my dog?", "the dog?"):
        await run_with_memory(agent, question)
    assert all(blocks(call["messages"]) == 1 for call in model_client.create_calls)
    assert blocks(await agent.model_context.get_messages()) == 0


async def test_real_openai_client_for_a_model_with_one_system_message(engine):
    """AutoGen's OpenAI client refuses non-consecutive system messages for models it does not know
    (``multiple_system_messages`` unset); the block sits next to the agent's system message, so
    the client merges them. Real SDK, local fake server."""
    openai_client = pytest.importorskip("autogen_ext.models.openai", reason="autogen-ext[openai] is not installed")
    from tests.support.fakes.fake_model_server import OPENAI_CHAT, FakeModelServer

    engine.record("anna", [{"role": "user", "content": FACT}])
    info = {"vision": False, "function_calling": True, "json_output": True, "family": "unknown",
            "structured_output": False}
    with FakeModelServer(chat_text="Biscuit.") as server:
        model_client = openai_client.OpenAIChatCompletionClient(model="qwen-like", api_key="sk-test",
                                                                base_url=server.url + "/v1", model_info=info)
        agent = AssistantAgent("assistant", model_client=model_client,
                               memory=[MemoryScopeMemory(engine, user_id="anna")])
        await run_with_memory(agent, "hello")
        result = await run_with_memory(agent, "What is my dog's name?")
        await model_client.close()
        sent = server.requests_to(OPENAI_CHAT)[-1].json["messages"]
    assert result.messages[-1].content == "Biscuit."
    assert [m["role"] for m in sent].count("system") == 1 and sent[0]["role"] == "system"
    assert "Biscuit" in sent[0]["content"] and BLOCK in sent[0]["content"]


async def test_memory_assistant_agent_records_through_on_messages(engine):
    """`on_messages` stops reading the stream at the Response: recording must happen before it."""
    model_client = client("Noted!", "Biscuit.", "You're welcome.")
    agent = MemoryAssistantAgent("assistant", model_client=model_client,
                                 memory=[MemoryScopeMemory(engine, user_id="anna")])
    await agent.on_messages([TextMessage(content=FACT, source="user")], CancellationToken())
    assert {m.content for m in engine.list("anna")} == {FACT, "Noted!"}
    result = await agent.run(task="What is my dog's name?")
    assert result.messages[-1].content == "Biscuit."
    assert "Biscuit" in text(last_prompt(model_client))
    assert blocks(await agent.model_context.get_messages()) == 0
    assert len(engine.list("anna")) == 4
    await run_with_memory(agent, "Thanks!")  # no double recording when both are used
    assert len(engine.list("anna")) == 6


async def test_memory_assistant_agent_in_a_team(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    model_client = client("Your dog is Biscuit.")
    agent = MemoryAssistantAgent("assistant", model_client=model_client,
                                 memory=[MemoryScopeMemory(engine, user_id="anna")])
    team = RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2))
    await team.run(task="What is my dog's name?")
    assert "Biscuit" in text(last_prompt(model_client))
    assert "Your dog is Biscuit." in [m.content for m in engine.list("anna")]


async def test_in_a_team_only_the_humans_words_are_the_users(engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    writer = MemoryAssistantAgent("writer",
                                  model_client=client("Draft: a walk by the river.", "Final: a walk by the sea."),
                                  memory=[memory])
    critic = AssistantAgent("critic", model_client=client("The river is too cold in May, choose the sea."))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4))
    await team.run(task="Plan a weekend outing for me. I love being near water.")
    recorded = engine.list("anna", newest_first=False)
    said_by = {m.content: (m.role, m.speaker) for m in recorded}
    assert said_by["Plan a weekend outing for me. I love being near water."][0] == "user"
    assert said_by["The river is too cold in May, choose the sea."] == ("assistant", "critic")
    assert said_by["Final: a walk by the sea."] == ("assistant", "writer")
    users = [m.content for m in recorded if m.role == "user"]
    assert users == ["Plan a weekend outing for me. I love being near water."]


async def test_run_with_memory_on_a_team_records_each_speaker_as_who_they_are(engine):
    memory = MemoryScopeMemory(engine, user_id="anna")
    writer = AssistantAgent("writer", model_client=client("Draft: pasta with pesto."))
    critic = AssistantAgent("critic", model_client=client("Pesto has nuts; Anna may be allergic."))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3))
    await run_with_memory(team, "Suggest a dinner for me.", memory)
    said_by = [(m.role, m.speaker, m.content) for m in engine.list("anna", newest_first=False)]
    assert said_by[0][0] == "user" and said_by[0][2] == "Suggest a dinner for me."
    assert ("assistant", "writer", "Draft: pasta with pesto.") in said_by
    assert ("assistant", "critic", "Pesto has nuts; Anna may be allergic.") in said_by
    assert [c for r, _, c in said_by if r == "user"] == ["Suggest a dinner for me."]


async def test_run_stream_records_before_the_task_result(engine):
    model_client = client("Noted!")
    memory = MemoryScopeMemory(engine, user_id="anna")
    agent = AssistantAgent("assistant", model_client=model_client, memory=[memory])
    async for item in run_stream_with_memory(agent, FACT):
        if isinstance(item, TaskResult):
            break  # a consumer that stops at the result loses nothing
    assert {m.content for m in engine.list("anna")} == {FACT, "Noted!"}
    assert blocks(await agent.model_context.get_messages()) == 0


async def test_a_multimodal_message_records_its_text_parts_only(engine):
    from autogen_agentchat.messages import MultiModalMessage
    from autogen_core import Image
    from autogen_core.models import ModelInfo
    from PIL import Image as PILImage

    picture = Image(PILImage.new("RGB", (4, 4)))
    vision = ModelInfo(vision=True, function_calling=False, json_output=False, family="unknown",
                       structured_output=False)
    model_client = ReplayChatCompletionClient(["A black square.", "Nice logo."], model_info=vision)
    agent = AssistantAgent("assistant", model_client=model_client, memory=[MemoryScopeMemory(engine, user_id="anna")])
    await run_with_memory(agent, MultiModalMessage(content=[picture], source="user"))  # an image alone: no words
    await run_with_memory(agent, MultiModalMessage(content=["My new logo:", picture, "do you like it?"], source="user"))
    recorded = [(m.role, m.content) for m in engine.list("anna", newest_first=False)]
    assert recorded == [("assistant", "A black square."), ("user", "My new logo:\ndo you like it?"),
                        ("assistant", "Nice logo.")]


async def test_a_statement_brings_back_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    model_client = client("That sounds like a lot.", "Enjoy the sun.")
    agent = AssistantAgent("assistant", model_client=model_client,
                           memory=[MemoryScopeMemory(engine, user_id="anna", top_k=TOP_K)])
    await run_with_memory(agent, STATEMENT)
    assert REMEMBERED in text(last_prompt(model_client))
    await run_with_memory(agent, UNRELATED)
    assert REMEMBERED not in text(last_prompt(model_client))
    assert blocks(await agent.model_context.get_messages()) == 0


async def test_two_users_never_see_each_other(engine):
    anna_agent = AssistantAgent("assistant", model_client=client("Noted!"),
                                memory=[MemoryScopeMemory(engine, user_id="anna")])
    await run_with_memory(anna_agent, FACT)
    bob_client = client("I don't know.")
    bob_memory = MemoryScopeMemory(engine, user_id="bob")
    bob_agent = AssistantAgent("assistant", model_client=bob_client, memory=[bob_memory])
    await run_with_memory(bob_agent, "What is my dog's name?")
    assert "Biscuit" not in text(last_prompt(bob_client))
    assert all("Biscuit" not in r.content for r in (await bob_memory.query("dog")).results)
    assert {m.content for m in engine.list("bob")} == {"What is my dog's name?", "I don't know."}
    await bob_memory.clear()
    assert engine.count("bob") == 0 and engine.count("anna") == 2


async def test_failing_backend_degrades_to_no_memory_with_a_warning(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.store = BrokenStore(engine.store)
    model_client = client("Still here.")
    agent = AssistantAgent("assistant", model_client=model_client, memory=[MemoryScopeMemory(engine, user_id="anna")])
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        result = await run_with_memory(agent, "What is my secret dog name?")
    assert result.messages[-1].content == "Still here."
    assert blocks(last_prompt(model_client)) == 0
    warnings = [r.getMessage() for r in caplog.records if r.name == "memoryscope_plugins.adapters"]
    assert len(warnings) == 2 and all("StoreError" in w for w in warnings)
    assert "Biscuit" not in caplog.text and "secret dog" not in caplog.text


async def test_query_add_clear(engine):
    memory = MemoryScopeMemory(engine, user_id="anna", top_k=3)
    await memory.add(MemoryContent(content="Anna is allergic to peanuts.", mime_type=MemoryMimeType.TEXT,
                                   metadata={"source": "profile"}))
    await memory.add(MemoryContent(content={"city": "Lisbon"}, mime_type=MemoryMimeType.JSON))
    engine.record("bob", [{"role": "user", "content": "Bob is allergic to cats."}])
    results = (await memory.query("allergies")).results
    assert results and results[0].content == "Anna is allergic to peanuts."
    assert {"id", "type", "score", "created_at"} <= set(results[0].metadata)
    assert results[0].metadata["type"] == "custom"
    assert len((await memory.query(MemoryContent(content="Lisbon", mime_type="text/plain"), top_k=1)).results) == 1
    with pytest.raises(TypeError):
        await memory.add(MemoryContent(content=b"\x00", mime_type=MemoryMimeType.BINARY))
    await memory.clear()
    assert engine.count("anna") == 0 and engine.count("bob") == 1
    await memory.close()  # the engine was passed in: it stays usable
    assert engine.count("bob") == 1


async def test_dump_and_load_component_round_trip(engine, tmp_path):
    memory = MemoryScopeMemory(engine, user_id="anna", agent_id="friday", top_k=4, types=["turn", "custom"],
                               name="long-term")
    engine.record("anna", [{"role": "user", "content": FACT}], agent_id="friday")
    model = memory.dump_component()
    assert model.provider == "memoryscope_plugins.adapters.autogen_agentchat.MemoryScopeMemory"
    dumped = model.model_dump_json()
    assert "api_key" not in dumped and "password" not in dumped
    loaded = Memory.load_component(model.model_dump())
    try:
        assert isinstance(loaded, MemoryScopeMemory)
        assert (loaded.name, loaded.user_id, loaded.agent_id) == ("long-term", "anna", "friday")
        assert loaded._to_config() == memory._to_config()
        assert loaded.engine is not engine
        assert loaded.engine.settings.store.sqlite_path() == engine.settings.store.sqlite_path()
        assert "Biscuit" in (await loaded.query("dog")).results[0].content
    finally:
        await loaded.close()  # it built its engine: close closes it

    # inside an agent's own config
    agent = AssistantAgent("assistant", model_client=client("x"), memory=[memory])
    again = AssistantAgent.load_component(agent.dump_component())
    restored = again._memory[0]
    assert isinstance(restored, MemoryScopeMemory) and restored.user_id == "anna"
    await restored.close()


async def test_component_built_from_a_path(tmp_path, local_embedder):
    memory = MemoryScopeMemory(user_id="anna", path=str(tmp_path / "own.db"))
    try:
        await memory.add(MemoryContent(content=FACT, mime_type="text/plain"))
        config = memory.dump_component().config
        assert config["settings"]["store"]["path"] == str(tmp_path / "own.db")
    finally:
        await memory.close()


def test_config_validation(engine):
    with pytest.raises(ValueError):
        MemoryScopeMemory(engine, user_id="")
    with pytest.raises(ValueError):
        MemoryScopeMemory(engine, user_id="anna", scope_to_agent=True)
    with pytest.raises(ValueError):
        MemoryScopeMemory(engine, user_id="anna", path="elsewhere.db")
