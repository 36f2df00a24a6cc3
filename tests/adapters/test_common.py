"""What the adapters share (adapters/_common.py): finding the user's latest words in a framework's
messages, each framework keeping its own rule of which messages are the user's."""

from __future__ import annotations

import pytest

from memoryscope_plugins.adapters._common import Line, latest_user_index, latest_user_text

CHAT = [Line("system", None, "You are helpful."), Line("user", "anna", "My dog is Biscuit."),
        Line("assistant", "planner", "Noted."), Line("user", "critic", "Add a dessert."),
        Line("user", "anna", "  "), Line("tool", None, "42")]


def test_the_newest_user_line_with_text_is_the_latest():
    assert latest_user_text(CHAT) == "Add a dessert."
    assert latest_user_index(CHAT) == 3
    assert latest_user_text([]) == "" and latest_user_index([]) is None
    assert latest_user_text([Line("assistant", None, "Hi."), Line("user", None, "\n")]) == ""


def test_in_a_group_only_the_humans_words_are_the_users():
    assert latest_user_text(CHAT, {"anna"}) == "My dog is Biscuit."
    assert latest_user_index(CHAT, {"anna"}) == 1
    assert latest_user_text(CHAT, {"bob"}) == ""
    assert latest_user_text([Line("user", None, "Who sent me?")], {"anna"}) == ""  # no sender: not the human's


def test_a_whole_input_gives_every_user_line_oldest_first():
    assert latest_user_text(CHAT, whole_input=True) == "My dog is Biscuit.\nAdd a dessert."
    assert latest_user_text(CHAT, {"anna"}, whole_input=True) == "My dog is Biscuit."


def test_langchain_takes_only_human_messages():
    pytest.importorskip("langchain", reason="pip install 'memoryscope-plugins[langchain]'")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from memoryscope_plugins.adapters.langchain import _latest_human_text

    messages = [SystemMessage("sys"), HumanMessage([{"type": "text", "text": "Where do I live?"}]),
                AIMessage("In Oslo."), HumanMessage("   ")]
    assert _latest_human_text(messages) == "Where do I live?"


def test_autogen_classic_skips_tool_responses_and_other_agents():
    autogen = pytest.importorskip("autogen", reason="pip install 'memoryscope-plugins[autogen]'")
    if not hasattr(autogen, "ConversableAgent"):
        pytest.skip("the installed `autogen` is not classic AutoGen")
    from memoryscope_plugins.adapters.autogen_classic import _latest_user_text

    messages = [{"role": "user", "name": "anna", "content": "Plan a dinner."},
                {"role": "user", "name": "critic", "content": "Add a dessert."},
                {"role": "user", "name": "anna", "content": "42", "tool_responses": [{"content": "42"}]},
                {"role": "assistant", "name": "planner", "content": "Pasta."}]
    assert _latest_user_text(messages) == "Add a dessert."
    assert _latest_user_text(messages, {"anna"}) == "Plan a dinner."
    assert _latest_user_text([{"content": "No role: the interlocutor's."}]) == "No role: the interlocutor's."


def test_agentchat_takes_the_text_parts_of_user_messages():
    pytest.importorskip("autogen_core", reason="pip install 'memoryscope-plugins[autogen]'")
    from autogen_core.models import AssistantMessage, UserMessage

    from memoryscope_plugins.adapters.autogen_agentchat import _line

    lines = [_line(UserMessage(content=["Where", "do I live?"], source="user")),
             _line(AssistantMessage(content="In Oslo.", source="assistant"))]
    assert latest_user_text(lines) == "Where\ndo I live?"


def test_agentscope_joins_the_inputs_user_messages_and_names_the_last():
    pytest.importorskip("agentscope.middleware", reason="pip install 'memoryscope-plugins[agentscope]'")
    from agentscope.message import AssistantMsg, UserMsg

    from memoryscope_plugins.adapters.agentscope import _query_of

    first, reply, second = UserMsg("anna", "My dog is Biscuit."), AssistantMsg("Friday", "Noted."), UserMsg(
        "anna", "What is his name?")
    assert _query_of([first, reply, second, UserMsg("anna", " ")]) == (
        "My dog is Biscuit.\nWhat is his name?", second.id, f"agentscope:{first.id},{second.id}")
    assert _query_of(first) == ("My dog is Biscuit.", first.id, f"agentscope:{first.id}")
    assert _query_of(None) == ("", None, None) and _query_of([reply]) == ("", None, None)


def test_a_failing_memory_is_logged_without_the_users_id(engine, caplog):
    """The bridge and the memory tools log a failure with the user's reference, never the id itself
    (ids are often e-mail addresses)."""
    import logging

    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig
    from memoryscope_plugins.adapters._tools import MemoryTools
    from memoryscope_plugins.log_hygiene import user_ref

    user = "anna@example.com"
    bridge = MemoryBridge(engine, MemoryConfig(user_id=user), "test")
    tools = MemoryTools(engine, user_id=user)
    engine.close()  # every store call now fails
    with caplog.at_level(logging.WARNING):
        assert bridge.retrieve(user, "What do I like?").memories == []
        assert tools.search_memory("What do I like?").startswith("Memory is unavailable")
    failures = [record.getMessage() for record in caplog.records if "failed for user" in record.getMessage()]
    assert len(failures) == 2
    assert all(user_ref(user) in line and user not in line for line in failures)
