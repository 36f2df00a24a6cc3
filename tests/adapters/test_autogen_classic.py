"""Classic AutoGen (`autogen.ConversableAgent`) adapter, with a real agent and an offline fake model client."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.support.fakes.autogen_client import FakeClient

MISSING = "classic AutoGen is not installed (pip install 'memoryscope-plugins[autogen]')"
autogen = pytest.importorskip("autogen", reason=MISSING)
if not hasattr(autogen, "ConversableAgent"):  # `ag2` 1.x or another package owns the name
    pytest.skip("the installed `autogen` is not classic AutoGen (no ConversableAgent)", allow_module_level=True)

from autogen import Agent, ConversableAgent

from memoryscope_plugins.adapters.autogen_classic import MemoryCapability, MemoryConversableAgent
from memoryscope_plugins.errors import StoreError
from tests.support.fakes.broken_store import BrokenStore
from tests.support.statement_recall import REMEMBERED, STATEMENT, TOP_K, UNRELATED, record_earlier_session

BLOCK = "<long_term_memory>"
FACT = "My dog is called Biscuit."


LLM_CONFIG = {"config_list": [{"model": "fake", "model_client_cls": "FakeClient"}], "cache_seed": None}


@pytest.fixture(autouse=True)
def _reset_prompts():
    FakeClient.reset()


def assistant(engine, user_id: Any = "anna", name: str = "assistant", top_k: int | None = None) -> ConversableAgent:
    agent = ConversableAgent(name, llm_config=LLM_CONFIG, human_input_mode="NEVER")
    agent.register_model_client(model_client_cls=FakeClient)  # type: ignore[arg-type]  # autogen types the class as an instance
    MemoryCapability(engine, user_id=user_id, top_k=top_k).add_to_agent(agent)
    return agent


def human(name: str = "user") -> ConversableAgent:
    return ConversableAgent(name, llm_config=False, human_input_mode="NEVER")


def prompt_text(prompt: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in prompt)


def blocks(messages: list[dict[str, Any]]) -> int:
    return sum(BLOCK in str(m.get("content")) for m in messages)


def test_fact_from_session_one_reaches_a_new_agent_in_session_two(engine):
    first = assistant(engine)
    first.generate_reply(messages=[{"role": "user", "content": FACT}])
    second, user = assistant(engine), human()
    user.initiate_chat(second, message="What is my dog's name?", max_turns=1, silent=True)
    prompt = FakeClient.prompts[-1]
    assert "Biscuit" in prompt_text(prompt)
    assert blocks(prompt) == 1 and prompt[1]["role"] == "system"  # right after the agent's system message


def test_history_stays_clean_and_every_turn_is_recorded(engine):
    agent, user = assistant(engine), human()
    questions = [FACT, "I live in Lisbon.", "What is my dog's name?", "Where do I live?"]
    for number, question in enumerate(questions, start=1):
        user.initiate_chat(agent, message=question, max_turns=1, clear_history=number == 1, silent=True)
        contents = [m.content for m in engine.list("anna")]
        assert len(contents) == 2 * number
        assert question in contents and f"reply {number}" in contents
    history = agent.chat_messages[user]
    assert len(history) == 2 * len(questions)
    assert blocks(history) == 0 and all(m["role"] != "system" for m in history)
    assert all(blocks(p) <= 1 for p in FakeClient.prompts)
    assert "Lisbon" in prompt_text(FakeClient.prompts[-1])


async def test_async_chat_injects_and_records(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    agent, user = assistant(engine), human()
    await user.a_initiate_chat(agent, message="Remind me of my dog's name", max_turns=1, silent=True)
    assert "Biscuit" in prompt_text(FakeClient.prompts[-1])
    assert blocks(agent.chat_messages[user]) == 0
    assert "Remind me of my dog's name" in [m.content for m in engine.list("anna")]
    assert len(await engine.alist("anna")) == 3


def test_a_statement_brings_back_what_was_said_in_other_words(engine):
    record_earlier_session(engine)
    agent, user = assistant(engine, top_k=TOP_K), human()
    user.initiate_chat(agent, message=STATEMENT, max_turns=1, silent=True)
    assert REMEMBERED in prompt_text(FakeClient.prompts[-1])
    user.initiate_chat(agent, message=UNRELATED, max_turns=1, clear_history=False, silent=True)
    assert REMEMBERED not in prompt_text(FakeClient.prompts[-1])
    assert blocks(agent.chat_messages[user]) == 0


def test_two_users_never_see_each_other(engine):
    # one agent serving two people: the user id is the sender's name
    agent = assistant(engine, user_id=lambda sender: sender.name if sender is not None else None)
    anna, bob = human("anna"), human("bob")
    anna.initiate_chat(agent, message=FACT, max_turns=1, silent=True)
    bob.initiate_chat(agent, message="What is my dog's name?", max_turns=1, silent=True)
    assert "Biscuit" not in prompt_text(FakeClient.prompts[-1])
    assert {m.content for m in engine.list("bob")} == {"What is my dog's name?", "reply 2"}
    anna.initiate_chat(agent, message="What is my dog's name?", max_turns=1, silent=True)
    assert "Biscuit" in prompt_text(FakeClient.prompts[-1])
    assert "reply 2" not in prompt_text(FakeClient.prompts[-1])


def test_failing_backend_degrades_to_no_memory_with_a_warning(engine, caplog):
    engine.record("anna", [{"role": "user", "content": FACT}])
    engine.store = BrokenStore(engine.store)
    agent = assistant(engine)
    with caplog.at_level(logging.WARNING, logger="memoryscope_plugins.adapters"):
        reply = agent.generate_reply(messages=[{"role": "user", "content": "What is my secret dog name?"}])
    assert reply == "reply 1"
    assert blocks(FakeClient.prompts[-1]) == 0
    warnings = [r for r in caplog.records if r.name == "memoryscope_plugins.adapters"]
    assert {("retrieval" in r.getMessage()) or ("recording" in r.getMessage()) for r in warnings} == {True}
    assert len(warnings) == 2 and all("StoreError" in r.getMessage() for r in warnings)
    assert "Biscuit" not in caplog.text and "secret dog" not in caplog.text


def test_on_error_raise_lets_the_error_through(engine):
    from memoryscope_plugins.adapters._common import MemoryConfig
    engine.store = BrokenStore(engine.store)
    agent = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")
    agent.register_model_client(model_client_cls=FakeClient)
    MemoryCapability(engine, config=MemoryConfig(user_id="anna", on_error="raise")).add_to_agent(agent)
    with pytest.raises(StoreError):
        agent.generate_reply(messages=[{"role": "user", "content": "hello"}])


def test_memory_conversable_agent_subclass(engine):
    engine.record("anna", [{"role": "user", "content": FACT}])
    agent = MemoryConversableAgent("helper", memory=engine, user_id="anna", top_k=3, llm_config=LLM_CONFIG,
                                   human_input_mode="NEVER")
    agent.register_model_client(model_client_cls=FakeClient)
    user = human()
    user.initiate_chat(agent, message="What is my dog's name?", max_turns=1, silent=True)
    assert "Biscuit" in prompt_text(FakeClient.prompts[-1])
    recorded = engine.list("anna", agent_id="helper")  # the agent's name is the default agent id
    assert {(m.speaker, m.content) for m in recorded} == {("anna", "What is my dog's name?"), ("helper", "reply 1")}


def test_other_reply_functions_still_run(engine):
    """A reply function registered by the user (after the capability) still decides the reply,
    and sees the memory too when it comes after the memory wrapper."""
    engine.record("anna", [{"role": "user", "content": FACT}])
    agent = ConversableAgent("assistant", llm_config=False, human_input_mode="NEVER")
    seen: list[list[dict[str, Any]]] = []

    def canned(recipient, messages=None, sender=None, config=None):
        seen.append(messages)
        return True, "canned answer"

    agent.register_reply([autogen.Agent, None], canned)
    MemoryCapability(engine, user_id="anna").add_to_agent(agent)
    assert agent.generate_reply(messages=[{"role": "user", "content": "dog name?"}]) == "canned answer"
    assert "Biscuit" in prompt_text(seen[-1])
    assert "canned answer" in [m.content for m in engine.list("anna")]


def says_bye(message: dict[str, Any]) -> bool:
    return "bye" in str(message.get("content") or "").lower()


def test_a_message_the_agent_does_not_answer_is_recorded_once(engine):
    agent = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER", is_termination_msg=says_bye)
    agent.register_model_client(model_client_cls=FakeClient)
    MemoryCapability(engine, user_id="anna").add_to_agent(agent)
    user = human()
    user.initiate_chat(agent, message=FACT, max_turns=1, silent=True)
    user.initiate_chat(agent, message="Thanks, bye!", max_turns=1, clear_history=False, silent=True)  # no reply
    user.initiate_chat(agent, message="Hi again, what is my dog called?", max_turns=1, clear_history=False,
                       silent=True)
    recorded = [m.content for m in engine.list("anna", newest_first=False)]
    assert recorded == [FACT, "reply 1", "Thanks, bye!", "Hi again, what is my dog called?", "reply 2"]
    user.initiate_chat(agent, message="Thanks, bye!", max_turns=1, silent=True)  # a new chat: another message
    assert [m.content for m in engine.list("anna")].count("Thanks, bye!") == 2


async def test_a_message_the_agent_does_not_answer_is_recorded_once_in_an_async_chat(engine):
    agent = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER", is_termination_msg=says_bye)
    agent.register_model_client(model_client_cls=FakeClient)
    MemoryCapability(engine, user_id="anna").add_to_agent(agent)
    user = human()
    await user.a_initiate_chat(agent, message="Bye for now.", max_turns=1, silent=True)
    await user.a_initiate_chat(agent, message=FACT, max_turns=1, clear_history=False, silent=True)
    recorded = [m.content for m in engine.list("anna", newest_first=False)]
    assert recorded == ["Bye for now.", FACT, "reply 1"]


def test_capability_needs_a_user(engine):
    with pytest.raises(ValueError):
        MemoryCapability(engine)


def test_group_chat_records_each_speaker_as_who_they_are(engine):
    from autogen import GroupChat, GroupChatManager

    anna = human("anna")  # the human's proxy starts the chat
    writer = ConversableAgent("writer", llm_config=LLM_CONFIG, human_input_mode="NEVER")
    writer.register_model_client(model_client_cls=FakeClient)
    MemoryCapability(engine, user_id=lambda sender: sender.name if sender else None).add_to_agent(writer)
    critic = ConversableAgent("critic", llm_config=False, human_input_mode="NEVER")
    critic.register_reply([Agent, None], lambda *a, **k: (True, "Too salty; Anna is on a low-salt diet."))
    chat = GroupChat(agents=[anna, writer, critic], messages=[], max_round=5, speaker_selection_method="round_robin")
    manager = GroupChatManager(groupchat=chat, llm_config=False)
    anna.initiate_chat(manager, message="Plan a dinner for me.", silent=True)
    assert engine.users() == ["anna"]  # filed under the human, not under "chat_manager"
    said = [(m.role, m.speaker, m.content) for m in engine.list("anna", newest_first=False)]
    assert [c for r, _, c in said if r == "user"] == ["Plan a dinner for me."]  # the human's request, once
    assert ("assistant", "critic", "Too salty; Anna is on a low-salt diet.") in said
    assert any(r == "assistant" and s == "writer" for r, s, _ in said)
