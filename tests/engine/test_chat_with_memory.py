"""chat_with_memory and its async / streaming twins, against the fake model over HTTP."""

from __future__ import annotations

import pytest

from memoryscope_plugins import MemoryScope
from memoryscope_plugins.chat import (
    ChatTurn,
    achat_with_memory,
    astream_chat_with_memory,
    chat_with_memory,
    stream_chat_with_memory,
)
from memoryscope_plugins.errors import ConfigError, ModelError, ValidationError
from tests.support.consolidation_helpers import (
    OPENAI_CHAT,
    Brain,
    Reply,
    at,
    fast_policy,
    make_engine,
    make_settings,
    user_msg,
)
from tests.support.fakes.fake_model_server import DASHSCOPE_GENERATION

NOW = at(20, hour=19)


@pytest.fixture
def brain(brain):
    def reply(prompt):
        system = prompt.messages[0]["content"]
        return "Skip the peanuts, Anna." if "allergic to peanuts" in system else "Tell me more."
    brain.reply = reply
    return brain


@pytest.fixture
def engine(tmp_path, server, brain, local_embedder):
    memory = make_engine(tmp_path, server, local_embedder)
    memory.record("anna", [user_msg("I'm allergic to peanuts.", at(1)),
                           user_msg("My sister Clara lives in Porto.", at(2))])
    yield memory
    memory.close()


def turns(engine, user="anna"):
    return sorted(engine.list(user, types=["turn"]), key=lambda m: (m.created_at, m.role != "user"))


def test_reply_uses_the_memories_and_records_the_turn(engine, brain):
    turn = chat_with_memory(engine, "anna", "What snack should I bring to the party?", now=NOW)
    assert isinstance(turn, ChatTurn)
    assert turn.answer == "Skip the peanuts, Anna."
    assert any(m.memory.content == "I'm allergic to peanuts." for m in turn.memories)
    assert "I'm allergic to peanuts." in turn.context and turn.consolidation is None
    sent = brain.prompts[-1].messages
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "Today is 2026-05-20 Wed." in sent[0]["content"]
    assert sent[-1]["content"] == "What snack should I bring to the party?"
    recorded = turns(engine)[-2:]
    assert [(m.role, m.content) for m in recorded] == [("user", "What snack should I bring to the party?"),
                                                       ("assistant", "Skip the peanuts, Anna.")]
    assert all(m.created_at == NOW for m in recorded)
    # the next turn can recall the reply
    assert "Skip the peanuts" in engine.retrieve("anna", "party snack advice").context


def test_system_prompt_history_top_k_and_session(engine, brain):
    history = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello Anna."}]
    turn = chat_with_memory(engine, "anna", "Where does Clara live?", system_prompt="You are Max, a chef.",
                            top_k=1, history=history, session_id="s1", agent_id="max", now=NOW)
    assert len(turn.memories) == 1
    sent = brain.prompts[-1].messages
    assert sent[0]["content"].startswith("You are Max, a chef.")
    assert [m["content"] for m in sent[1:3]] == ["Hi!", "Hello Anna."]
    recorded = [m for m in engine.list("anna", types=["turn"]) if m.session_id == "s1"]
    assert len(recorded) == 2 and {m.agent_id for m in recorded} == {"max"}
    with pytest.raises(ValidationError):
        chat_with_memory(engine, "anna", "x", history=[{"role": "robot", "content": "?"}])


@pytest.mark.parametrize("history", [5, True, "Hi!", b"Hi!", {"role": "user", "content": "Hi!"}, object()])
def test_a_history_that_is_not_a_list_is_refused_before_anything_runs(engine, brain, history):
    calls, recorded = len(brain.prompts), len(turns(engine))
    with pytest.raises(ValidationError, match="history must be a list"):
        chat_with_memory(engine, "anna", "Where does Clara live?", history=history, now=NOW)
    assert len(brain.prompts) == calls and len(turns(engine)) == recorded  # no model call, nothing recorded


def test_show_consolidation_returns_what_the_turn_became(engine, brain):
    turn = chat_with_memory(engine, "anna", "I'm vegetarian now.", now=NOW, show_consolidation=True,
                            user_name="Anna")
    assert turn.consolidation is not None
    assert "Anna is vegetarian." in turn.consolidation.added


def test_without_a_model_it_says_replies_need_one(tmp_path, local_embedder):
    memory = MemoryScope(make_settings(tmp_path), embedder=local_embedder)
    try:
        with pytest.raises(ConfigError, match="replies need a model: set llm.provider"):
            chat_with_memory(memory, "anna", "hello")
        with pytest.raises(ConfigError):
            next(stream_chat_with_memory(memory, "anna", "hello"))
        assert memory.list("anna") == []
    finally:
        memory.close()


def test_a_failed_reply_records_nothing(engine, server):
    server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "down"}})] * 2)
    before = len(turns(engine))
    with pytest.raises(ModelError):
        chat_with_memory(engine, "anna", "Anything?", now=NOW)
    assert len(turns(engine)) == before


def test_streaming_yields_chunks_then_records(engine, brain):
    result = ChatTurn(answer="")
    chunks = list(stream_chat_with_memory(engine, "anna", "Snack ideas?", now=NOW, turn=result))
    assert len(chunks) > 1 and "".join(chunks) == "Skip the peanuts, Anna." == result.answer
    assert result.memories
    assert [m.content for m in turns(engine)[-2:]] == ["Snack ideas?", "Skip the peanuts, Anna."]


def test_a_stream_closed_early_keeps_only_the_user_message(engine, brain):
    stream = stream_chat_with_memory(engine, "anna", "Snack ideas?", now=NOW)
    next(stream)
    stream.close()
    assert [m.content for m in turns(engine)[-1:]] == ["Snack ideas?"]
    assert all(m.content != "Skip the peanuts, Anna." for m in turns(engine))


async def test_async_twins(engine, brain):
    turn = await achat_with_memory(engine, "anna", "Snack ideas?", now=NOW, show_consolidation=True)
    assert turn.answer == "Skip the peanuts, Anna." and turn.consolidation is not None
    result = ChatTurn(answer="")
    chunks = [c async for c in astream_chat_with_memory(engine, "anna", "More snack ideas?", now=at(21),
                                                         turn=result)]
    assert "".join(chunks) == "Skip the peanuts, Anna." == result.answer
    assert [m.content for m in turns(engine)[-2:]] == ["More snack ideas?", "Skip the peanuts, Anna."]


def test_chinese_messages_get_the_chinese_system_prompt(engine, brain):
    chat_with_memory(engine, "anna", "我该带什么零食去聚会？", now=NOW)
    assert "你是一个乐于助人的助手" in brain.prompts[-1].messages[0]["content"]
    assert "今天是2026年5月20日 周三" in brain.prompts[-1].messages[0]["content"]


def test_dashscope_native_model(tmp_path, server, local_embedder):
    from memoryscope_plugins.models.dashscope_native import DashScopeChatModel
    brain = Brain()
    brain.reply = lambda prompt: "你好，小王！"
    server.route(DASHSCOPE_GENERATION, brain.dashscope)
    llm = DashScopeChatModel("qwen-plus", api_key="sk-dash-0123456789", base_url=server.url + "/api/v1",
                             retry_policy=fast_policy())
    memory = MemoryScope(make_settings(tmp_path), embedder=local_embedder, llm=llm)
    try:
        turn = chat_with_memory(memory, "xw", "你好", now=NOW)
        assert turn.answer == "你好，小王！"
        assert [m.content for m in memory.list("xw", newest_first=False)] == ["你好", "你好，小王！"]
    finally:
        memory.close()


def test_the_prompt_shows_the_procedures_of_the_agent_that_chats(tmp_path, server, brain, local_embedder):
    from memoryscope_plugins import Settings
    from memoryscope_plugins.models.openai_compat import OpenAIChatModel
    from tests.support import run_outcomes as ro
    llm = OpenAIChatModel("fake-llm", base_url=server.url + "/v1", api_key="sk-test-0123456789",
                          retry_policy=fast_policy(2))
    settings = Settings(store={"path": tmp_path / "memory.db"}, procedures={"enabled": True},
                        consolidation={"worker": "none"})
    with MemoryScope(settings, embedder=local_embedder, llm=llm, start_worker=False) as engine:
        ro.seed_procedure(engine, "anna", "max")
        request = "Book me a table at Rosa and tell me the weather in Oslo."
        turn = chat_with_memory(engine, "anna", request, agent_id="max", now=NOW)
        assert "What worked before" in turn.context and ro.PROCEDURE in brain.prompts[-1].messages[0]["content"]
        # another agent of the same user gets none of max's
        other = chat_with_memory(engine, "anna", request, now=NOW)
        assert ro.PROCEDURE not in other.context and ro.PROCEDURE not in brain.prompts[-1].messages[0]["content"]
