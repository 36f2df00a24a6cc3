"""Who said what, in teams, group chats and pipelines: each adapter with the real framework and a fake
model client. Only the human's words are the user's; every agent's words are that agent's."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.fakes.autogen_client import FakeClient

REQUEST = "Plan a vegetarian dinner for my sister's birthday."
CRITIC = "The plan lacks a dessert; add one."


def rows(engine, user_id: str = "anna") -> list[tuple[str, str | None, str | None, str]]:
    """(content, role, speaker, agent_id) of every turn memory of a user, oldest first."""
    return [(m.content, m.role, m.speaker, m.agent_id)
            for m in engine.list(user_id, types=["turn"], newest_first=False)]


def user_words(engine, user_id: str = "anna") -> list[str]:
    return [content for content, role, _, _ in rows(engine, user_id) if role == "user"]


# -- AutoGen AgentChat -------------------------------------------------------------------------------

def _agentchat():
    pytest.importorskip("autogen_agentchat", reason="pip install 'memoryscope-plugins[autogen]'")
    pytest.importorskip("autogen_ext.models.replay", reason="pip install 'memoryscope-plugins[autogen]'")


async def test_agentchat_round_robin_member_records_the_critic_as_the_critic(engine):
    _agentchat()
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryAssistantAgent, MemoryScopeMemory

    planner = MemoryAssistantAgent("planner", model_client=ReplayChatCompletionClient(["Pasta.", "Pasta and cake."]),
                                   memory=[MemoryScopeMemory(engine, user_id="anna")])
    critic = AssistantAgent("critic", model_client=ReplayChatCompletionClient([CRITIC]))
    team = RoundRobinGroupChat([planner, critic], termination_condition=MaxMessageTermination(4))
    await team.run(task=REQUEST)
    assert user_words(engine) == [REQUEST]
    recorded = rows(engine)
    assert (CRITIC, "assistant", "critic", "planner") in recorded
    assert ("Pasta and cake.", "assistant", "planner", "planner") in recorded


async def test_agentchat_run_with_memory_on_a_team_records_every_speaker(engine):
    _agentchat()
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory, run_with_memory

    planner = AssistantAgent("planner", model_client=ReplayChatCompletionClient(["Pasta."]))
    critic = AssistantAgent("critic", model_client=ReplayChatCompletionClient([CRITIC]))
    team = RoundRobinGroupChat([planner, critic], termination_condition=MaxMessageTermination(3))
    await run_with_memory(team, REQUEST, MemoryScopeMemory(engine, user_id="anna"))
    assert rows(engine) == [(REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
                            (CRITIC, "assistant", "critic", "critic")]


async def test_agentchat_query_honours_limit(engine):
    _agentchat()
    from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory
    for fact in ("I like tea.", "I like green tea.", "I drink tea daily.", "Tea is my favourite."):
        engine.add("anna", fact)
    memory = MemoryScopeMemory(engine, user_id="anna")
    assert len((await memory.query("tea", limit=2)).results) == 2
    with pytest.raises(ValueError):
        await memory.query("tea", limit=0)


# -- classic AutoGen ----------------------------------------------------------------------------------

def test_classic_group_chat_reads_the_speaker_from_the_message(engine):
    autogen = pytest.importorskip("autogen", reason="pip install 'memoryscope-plugins[autogen]'")
    if not hasattr(autogen, "GroupChat"):
        pytest.skip("the installed `autogen` is not classic AutoGen")
    from autogen import ConversableAgent, GroupChat, GroupChatManager, UserProxyAgent

    from memoryscope_plugins.adapters.autogen_classic import MemoryCapability

    FakeClient.replies = [CRITIC, "Pasta and cake."]
    config = {"config_list": [{"model": "fake", "model_client_cls": "FakeClient"}], "cache_seed": None}

    def agent(name: str) -> ConversableAgent:
        made = ConversableAgent(name, llm_config=config, human_input_mode="NEVER")
        made.register_model_client(model_client_cls=FakeClient)  # type: ignore[arg-type]  # autogen types the class as an instance
        return made

    human = UserProxyAgent("anna", human_input_mode="NEVER", code_execution_config=False)
    critic, planner = agent("critic"), agent("planner")
    # the documented callable: the id comes from the human agent, never from "chat_manager"
    MemoryCapability(engine, user_id=lambda who: who.name if who is not None else None).add_to_agent(planner)
    chat = GroupChat([human, critic, planner], messages=[], max_round=3, speaker_selection_method="round_robin")
    manager = GroupChatManager(chat, llm_config=False)
    human.initiate_chat(manager, message=REQUEST, silent=True)
    assert "chat_manager" not in engine.users()
    assert user_words(engine) == [REQUEST]
    recorded = rows(engine)
    assert (CRITIC, "assistant", "critic", "planner") in recorded
    assert ("Pasta and cake.", "assistant", "planner", "planner") in recorded


def test_classic_capability_takes_the_shared_options(engine):
    autogen = pytest.importorskip("autogen", reason="pip install 'memoryscope-plugins[autogen]'")
    if not hasattr(autogen, "ConversableAgent"):
        pytest.skip("the installed `autogen` is not classic AutoGen")
    from memoryscope_plugins.adapters.autogen_classic import MemoryCapability
    capability = MemoryCapability(engine, user_id="anna", template="<m>{context}</m>", scope_to_agent=True,
                                  on_error="raise", min_relevance=0.5)
    assert (capability.config.template, capability.config.scope_to_agent, capability.config.on_error,
            capability.config.min_relevance) == ("<m>{context}</m>", True, "raise", 0.5)
    with pytest.raises(ValueError):
        MemoryCapability(engine, user_id="anna", template="no placeholder")


# -- AgentScope ----------------------------------------------------------------------------------------

def _agentscope():
    pytest.importorskip("agentscope.middleware", reason="pip install 'memoryscope-plugins[agentscope]'")
    from tests.adapters.test_agentscope import FakeModel
    return FakeModel


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_agentscope_team_pipeline_records_the_leader_as_the_leader_and_no_placeholder(engine):
    FakeModel = _agentscope()
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.pipeline import TeamMember, TeamPipeline
    from agentscope.tool import Toolkit

    from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware

    instruction = "Write a vegetarian dinner menu for a birthday."
    leader = Agent(name="Lead", system_prompt="You lead.", toolkit=Toolkit(),
                   model=FakeModel({"name": "TeamAssign", "input": {"member": "Chef", "prompt": instruction}},
                                   "Here is the menu: pasta and cake."),
                   middlewares=[MemoryScopeMiddleware(engine, user_id="anna")])
    chef = Agent(name="Chef", system_prompt="You cook.", model=FakeModel("Menu: pasta and cake."),
                 middlewares=[MemoryScopeMiddleware(engine, user_id="anna")])
    pipeline = TeamPipeline(leader, [TeamMember(agent=chef, description="cooks")])
    await _drain(pipeline.reply_stream(UserMsg(name="user", content=REQUEST)))
    recorded = rows(engine)
    assert user_words(engine) == [REQUEST]
    assert (instruction, "assistant", "Lead", "Chef") in recorded
    assert ("Menu: pasta and cake.", "assistant", "Chef", "Chef") in recorded
    assert ("Here is the menu: pasta and cake.", "assistant", "Lead", "Lead") in recorded
    assert not any("waiting for your permission" in content for content, *_ in recorded)


async def test_agentscope_both_mode_recalls_what_the_tool_saved_when_scoped(engine):
    FakeModel = _agentscope()
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit

    from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware

    middleware = MemoryScopeMiddleware(engine, user_id="anna", mode="both", scope_to_agent=True)
    save = {"name": "record_to_memory", "input": {"thinking": "durable", "content": ["Anna's dog is Biscuit."]}}
    agent = Agent(name="Friday", system_prompt="Hi.", model=FakeModel(save, "Noted."),
                  toolkit=Toolkit(tools=await middleware.list_tools()), middlewares=[middleware])
    await agent.reply(UserMsg(name="user", content="Remember my dog Biscuit."))
    assert {m.agent_id for m in engine.list("anna", types=["custom"])} == {"Friday"}
    model = FakeModel("Biscuit.")
    again = Agent(name="Friday", system_prompt="Hi.", model=model, toolkit=Toolkit(tools=await middleware.list_tools()),
                  middlewares=[middleware])
    await again.reply(UserMsg(name="user", content="What is my dog called?"))
    assert "Anna's dog is Biscuit." in json.dumps(model.calls[-1])


# -- LangChain -----------------------------------------------------------------------------------------

def _langchain():
    pytest.importorskip("langchain.agents", reason="pip install 'memoryscope-plugins[langchain]'")


def test_langchain_run_ending_on_a_return_direct_tool_records_this_request(engine):
    _langchain()
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware
    from tests.adapters.test_langchain import ToolCallingModel

    @tool(return_direct=True)
    def book_table(day: str) -> str:
        """Book a table."""
        return f"Table booked for {day}."

    model = ToolCallingModel(messages=iter([AIMessage(content="Hello Anna."),
                                     AIMessage(content="", tool_calls=[{"name": "book_table", "args": {"day": "Friday"},
                                                                        "id": "c1"}])]))
    agent = create_agent(model, [book_table], middleware=[MemoryScopeMiddleware(engine, user_id="anna")])
    agent.invoke({"messages": [{"role": "user", "content": "Hi!"}]})
    agent.invoke({"messages": [{"role": "user", "content": "Book a table for Friday."}]})
    assert [content for content, *_ in rows(engine)] == ["Hi!", "Hello Anna.", "Book a table for Friday.",
                                                         "Table booked for Friday."]


def test_langchain_create_agent_name_is_the_agent_id(engine):
    _langchain()
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware

    agent = create_agent(FakeListChatModel(responses=["Soup."]), [], name="chef",
                         middleware=[MemoryScopeMiddleware(engine, user_id="anna")])
    agent.invoke({"messages": [{"role": "user", "content": "What's for dinner?"}]})
    assert {(role, speaker, agent_id) for _, role, speaker, agent_id in rows(engine)} == {
        ("user", "anna", "chef"), ("assistant", "chef", "chef")}


def test_langchain_chat_memory_clear_keeps_long_term_memory(engine):
    _langchain()
    from langchain_classic.memory import CombinedMemory, ConversationBufferMemory

    from memoryscope_plugins.adapters.langchain import MemoryScopeChatMemory

    long_term = MemoryScopeChatMemory(memory=engine, user_id="anna", memory_key="long_term", input_key="input")
    long_term.save_context({"input": "My dog is Biscuit."}, {"output": "Noted."})
    before = engine.count("anna")
    CombinedMemory(memories=[ConversationBufferMemory(memory_key="history", input_key="input"), long_term]).clear()
    long_term.clear()
    assert before == 2 and engine.count("anna") == before


# -- several members with memory for one user: each message recorded once ---------------------------

def _planner_and_critic(planner_engine, critic_engine, planner_replies: list[str], messages: int):
    """A round-robin AgentChat team of a planner and a critic, each with memory of anna (on its own
    engine object, or both on one), stopping after `messages` messages."""
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryAssistantAgent, MemoryScopeMemory

    planner = MemoryAssistantAgent("planner", model_client=ReplayChatCompletionClient(planner_replies),
                                   memory=[MemoryScopeMemory(planner_engine, user_id="anna")])
    critic = MemoryAssistantAgent("critic", model_client=ReplayChatCompletionClient([CRITIC]),
                                  memory=[MemoryScopeMemory(critic_engine, user_id="anna")])
    return RoundRobinGroupChat([planner, critic], termination_condition=MaxMessageTermination(messages))


async def test_agentchat_members_with_memory_record_each_message_once(engine):
    _agentchat()
    team = _planner_and_critic(engine, engine, ["Pasta.", "Pasta and cake."], 4)
    await team.run(task=REQUEST)
    assert rows(engine) == [(REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
                            (CRITIC, "assistant", "critic", "critic"),
                            ("Pasta and cake.", "assistant", "planner", "planner")]


async def test_agentchat_members_on_two_engines_over_one_store_record_each_message_once(tmp_path, local_embedder):
    """Members that do not share an engine object (as in two processes): the store keeps each key once."""
    _agentchat()
    from memoryscope_plugins import MemoryScope

    with MemoryScope(path=tmp_path / "team.db", embedder=local_embedder) as one, \
            MemoryScope(path=tmp_path / "team.db", embedder=local_embedder) as other:
        await _planner_and_critic(one, other, ["Pasta."], 3).run(task=REQUEST)
        assert rows(one) == [(REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
                             (CRITIC, "assistant", "critic", "critic")]


async def test_agentchat_members_scoped_to_themselves_each_keep_their_own_copy(engine):
    _agentchat()
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.replay import ReplayChatCompletionClient

    from memoryscope_plugins.adapters.autogen_agentchat import MemoryAssistantAgent, MemoryScopeMemory

    def member(name: str, replies: list[str]) -> MemoryAssistantAgent:
        return MemoryAssistantAgent(name, model_client=ReplayChatCompletionClient(replies),
                                    memory=[MemoryScopeMemory(engine, user_id="anna", agent_id=name,
                                                              scope_to_agent=True)])

    team = RoundRobinGroupChat([member("planner", ["Pasta."]), member("critic", [CRITIC])],
                               termination_condition=MaxMessageTermination(3))
    await team.run(task=REQUEST)
    # each reads only what it recorded itself, so each holds the request and the other's reply
    assert sorted(rows(engine)) == sorted([
        (REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
        (REQUEST, "user", "anna", "critic"), ("Pasta.", "assistant", "planner", "critic"),
        (CRITIC, "assistant", "critic", "critic")])


def _classic_group_chat(engine, replies: list[str], max_round: int):
    """(the human, a round-robin `GroupChat` of the human, a critic and a planner with memory for anna),
    the members answering `replies` in turn."""
    autogen = pytest.importorskip("autogen", reason="pip install 'memoryscope-plugins[autogen]'")
    if not hasattr(autogen, "GroupChat"):
        pytest.skip("the installed `autogen` is not classic AutoGen")
    from autogen import ConversableAgent, GroupChat, UserProxyAgent

    from memoryscope_plugins.adapters.autogen_classic import MemoryCapability

    FakeClient.replies = replies
    config = {"config_list": [{"model": "fake", "model_client_cls": "FakeClient"}], "cache_seed": None}

    def agent(name: str) -> ConversableAgent:
        made = ConversableAgent(name, llm_config=config, human_input_mode="NEVER")
        made.register_model_client(model_client_cls=FakeClient)  # type: ignore[arg-type]  # autogen types the class as an instance
        MemoryCapability(engine, user_id="anna").add_to_agent(made)
        return made

    human = UserProxyAgent("anna", human_input_mode="NEVER", code_execution_config=False, default_auto_reply="Go on.")
    return human, GroupChat([human, agent("critic"), agent("planner")], messages=[], max_round=max_round,
                            speaker_selection_method="round_robin")


def test_classic_group_members_with_memory_record_each_message_once_and_repeats_twice(engine):
    # critic, planner, critic, planner: the critic says the same words twice, at two places of the chat
    human, chat = _classic_group_chat(engine, ["Noted.", "Pasta.", "Noted.", "Pasta and cake."], max_round=6)
    from autogen import GroupChatManager

    human.initiate_chat(GroupChatManager(chat, llm_config=False), message=REQUEST, silent=True)
    assert [content for content, *_ in rows(engine)] == [REQUEST, "Noted.", "Pasta.", "Go on.", "Noted.",
                                                         "Pasta and cake."]
    assert [(role, speaker) for _, role, speaker, _ in rows(engine)] == [
        ("user", "anna"), ("assistant", "critic"), ("assistant", "planner"), ("user", "anna"),
        ("assistant", "critic"), ("assistant", "planner")]


def test_classic_group_chat_run_again_after_reset_is_recorded_again(engine):
    human, chat = _classic_group_chat(engine, ["Noted.", "Pasta."] * 2, max_round=3)
    from autogen import GroupChatManager

    manager = GroupChatManager(chat, llm_config=False)
    human.initiate_chat(manager, message=REQUEST, silent=True)
    chat.reset()  # the same words at the same places of the log: another chat, recorded again
    human.initiate_chat(manager, message=REQUEST, silent=True)
    assert [content for content, *_ in rows(engine)] == [REQUEST, "Noted.", "Pasta."] * 2


async def test_agentscope_one_input_handed_to_two_agents_is_recorded_once(engine):
    FakeModel = _agentscope()
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    from memoryscope_plugins.adapters.agentscope import MemoryScopeMiddleware

    def member(name: str, answer: str) -> Agent:
        return Agent(name=name, system_prompt="You help.", model=FakeModel(answer),
                     middlewares=[MemoryScopeMiddleware(engine, user_id="anna")])

    request = UserMsg(name="user", content=REQUEST)
    for agent in (member("Chef", "Pasta."), member("Baker", "Cake.")):  # a fan-out: one input, two agents
        await _drain(agent.reply_stream(request))
    assert user_words(engine) == [REQUEST]
    assert [(content, agent_id) for content, role, _, agent_id in rows(engine) if role == "assistant"] == [
        ("Pasta.", "Chef"), ("Cake.", "Baker")]


def test_langchain_agent_handed_the_state_records_only_its_own_answer(engine):
    _langchain()
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware

    def member(name: str, answer: str):
        return create_agent(FakeListChatModel(responses=[answer]), [], name=name,
                            middleware=[MemoryScopeMiddleware(engine, user_id="anna")])

    state = member("planner", "Pasta.").invoke({"messages": [{"role": "user", "content": REQUEST}]})
    member("critic", CRITIC).invoke(state)  # a hand-off: the next agent takes the conversation as it is
    assert rows(engine) == [(REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
                            (CRITIC, "assistant", "critic", "critic")]


def test_langchain_the_same_message_id_in_two_threads_is_two_messages(engine):
    """Ids an application gives its messages repeat from one thread to the next: the same words under
    the same id in another thread are said again, and recorded again."""
    _langchain()
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from memoryscope_plugins.adapters.langchain import MemoryScopeMiddleware

    agent = create_agent(FakeListChatModel(responses=["Booked.", "Booked."]), [], name="planner",
                         middleware=[MemoryScopeMiddleware(engine, user_id="anna")], checkpointer=InMemorySaver())
    for thread in ("monday", "friday"):
        agent.invoke({"messages": [HumanMessage("Book the usual table.", id="1")]},
                     {"configurable": {"thread_id": thread}})
    assert [content for content, *_ in rows(engine)] == ["Book the usual table.", "Booked."] * 2


def test_a_failed_recording_leaves_the_message_to_the_next_member(engine, monkeypatch):
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig, turn

    first, second = (MemoryBridge(engine, MemoryConfig(user_id="anna"), "test") for _ in range(2))
    said = turn(REQUEST, "Pasta.", agent_name="planner", user_key="m1", reply_key="m2")

    def refuse(*args, **kwargs):
        raise RuntimeError("the store is down")

    monkeypatch.setattr(engine, "record", refuse)
    assert first.record("anna", said, agent_id="planner") == []
    monkeypatch.undo()
    assert len(second.record("anna", said, agent_id="critic")) == 2
    assert second.record("anna", said, agent_id="critic") == []  # recorded now: not again
    assert len(first.record("bob", said, agent_id="planner")) == 2  # another user's keys are their own
    assert [content for content, *_ in rows(engine)] == [REQUEST, "Pasta."]
    # one message twice in a turn is one message; a message without a key is always recorded
    again = turn("Thanks!", None, user_key="m3")
    assert len(first.record("anna", [*again, *again, *turn("Bye.", None)], agent_id="planner")) == 2
    assert len(second.record("anna", turn("Bye.", None), agent_id="critic")) == 1


async def test_agentchat_team_run_with_memory_and_members_with_memory_record_each_message_once(engine):
    _agentchat()
    from memoryscope_plugins.adapters.autogen_agentchat import MemoryScopeMemory, run_with_memory

    team = _planner_and_critic(engine, engine, ["Pasta."], 3)
    await run_with_memory(team, REQUEST, MemoryScopeMemory(engine, user_id="anna"))
    assert rows(engine) == [(REQUEST, "user", "anna", "planner"), ("Pasta.", "assistant", "planner", "planner"),
                            (CRITIC, "assistant", "critic", "critic")]


def _recording_in_another_thread(engine, monkeypatch, outcome: str):
    """A member's recording of REQUEST held under way (its engine call blocks until released),
    then ending with `outcome` ("fails" or "records"); returns (its thread, the release, an event
    set once another member waits for it)."""
    import threading

    from memoryscope_plugins.adapters import _team_keys
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig, turn

    entered, release, waited = threading.Event(), threading.Event(), threading.Event()
    real_record, real_wait = engine.record, _team_keys.Claim.wait

    def held(user_id, messages, **kwargs):
        if threading.current_thread().name == "first-member":
            entered.set()
            release.wait(30)
            if outcome == "fails":
                raise RuntimeError("the store is down")
        return real_record(user_id, messages, **kwargs)

    def wait(claim, timeout=_team_keys.WAIT_S):
        waited.set()
        return real_wait(claim, timeout)

    monkeypatch.setattr(engine, "record", held)
    monkeypatch.setattr(_team_keys.Claim, "wait", wait)
    first = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
    thread = threading.Thread(name="first-member", target=first.record, args=(
        "anna", turn(REQUEST, "Pasta.", agent_name="planner", user_key="m1", reply_key="m2")),
        kwargs={"agent_id": "planner"})
    thread.start()
    assert entered.wait(30)
    return thread, release, waited


@pytest.mark.parametrize("outcome", ["fails", "records"])
def test_a_member_waits_for_another_recording_the_same_message(engine, monkeypatch, outcome):
    import threading

    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig, turn

    thread, release, waited = _recording_in_another_thread(engine, monkeypatch, outcome)
    second = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
    done: list[list[str]] = []
    member = threading.Thread(target=lambda: done.append(second.record(
        "anna", turn(REQUEST, CRITIC, agent_name="critic", user_key="m1", reply_key="m3"), agent_id="critic")))
    member.start()
    assert waited.wait(30)  # the second member waits for the first one's recording of the request
    release.set()
    thread.join(30)
    member.join(30)
    if outcome == "records":
        assert [content for content, *_ in rows(engine)] == [REQUEST, "Pasta.", CRITIC] and len(done[0]) == 1
    else:  # the first member's turn is lost to its failure, as before; the request is not
        assert [content for content, *_ in rows(engine)] == [REQUEST, CRITIC] and len(done[0]) == 2


def test_a_recording_that_hangs_past_the_wait_loses_nothing_and_the_store_keeps_it_once(engine, monkeypatch):
    from memoryscope_plugins.adapters import _team_keys
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig, turn

    monkeypatch.setattr(_team_keys, "WAIT_S", 0.2)
    thread, release, waited = _recording_in_another_thread(engine, monkeypatch, "records")
    second = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
    try:  # the first member's recording stays under way until the second gave up waiting
        assert len(second.record("anna", turn(REQUEST, None, user_key="m1"), agent_id="critic")) == 1
        assert waited.is_set()
    finally:
        release.set()
        thread.join(30)
    # the second member recorded the request; the first one's write, once it went on, left it out
    assert [content for content, *_ in rows(engine)] == [REQUEST, "Pasta."]


async def test_the_async_twin_waits_off_the_event_loop(engine, monkeypatch):
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig, turn

    thread, release, waited = _recording_in_another_thread(engine, monkeypatch, "fails")
    second = MemoryBridge(engine, MemoryConfig(user_id="anna"), "test")
    pending = asyncio.ensure_future(second.arecord("anna", turn(REQUEST, None, user_key="m1"), agent_id="critic"))
    assert await asyncio.to_thread(waited.wait, 30)  # the loop runs on while the member waits
    assert not pending.done()
    release.set()
    assert len(await pending) == 1
    thread.join(30)
    assert [content for content, *_ in rows(engine)] == [REQUEST]


def test_keys_beyond_the_bound_are_forgotten_oldest_first_and_a_waiter_is_let_go(engine, monkeypatch):
    from memoryscope_plugins.adapters import _team_keys

    monkeypatch.setattr(_team_keys, "MAX_KEYS", 2)
    rows = [{"role": "user", "content": f"line {i}", _team_keys.KEY: f"k{i}"} for i in range(3)]
    kept, claim = _team_keys.unrecorded(engine, "anna", None, rows[:1])  # k0 under way
    _, other = _team_keys.unrecorded(engine, "anna", None, rows[:1])
    assert len(kept) == 1 and len(other.waiting) == 1 and not other.waiting[0].is_set()
    _team_keys.unrecorded(engine, "anna", None, rows[1:])[1].finish(recorded=True)  # k1, k2: k0 forgotten
    assert other.waiting[0].is_set()  # whoever waited for k0 asks again, and records it
    kept, again = _team_keys.unrecorded(engine, "anna", None, rows[:1])
    assert [row["content"] for row in kept] == ["line 0"]
    assert again.keys == {kept[0][_team_keys.KEY]} == {_team_keys.message_key(None, "k0", "line 0")}
    claim.finish(recorded=True)  # the forgotten recording ends: nothing of the new claim is touched
    assert _team_keys.unrecorded(engine, "anna", None, rows[:1])[1].waiting
