"""Structured output (tolerant JSON parsing, re-ask on failure) and the usage meter."""

from __future__ import annotations

import threading

import pytest

from memoryscope_plugins.errors import ModelError
from memoryscope_plugins.models.base import TokenUsage
from memoryscope_plugins.models.openai_compat import OpenAIChatModel
from memoryscope_plugins.models.retry import RetryPolicy
from memoryscope_plugins.models.structured import (
    JsonParseError,
    UsageMeter,
    achat_json,
    chat_json,
    parse_json_loose,
)
from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply, openai_completion

ASK = [{"role": "system", "content": "Extract facts as JSON with a 'facts' list."},
       {"role": "user", "content": "I live in Hangzhou."}]


def make_chat(server) -> OpenAIChatModel:
    policy = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.002)
    return OpenAIChatModel("fake-chat", base_url=server.url + "/v1", api_key="sk-test",
                           retry_policy=policy)


def answers(*texts: str) -> list[Reply]:
    return [Reply(json=openai_completion(text)) for text in texts]


# -- tolerant parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('  [1, 2, 3]  ', [1, 2, 3]),
    ('```json\n{"a": [1, 2,],}\n```', {"a": [1, 2]}),
    ('Sure! Here it is:\n```\n{"a": "b"}\n```\nAnything else?', {"a": "b"}),
    ('Here\'s the result: {"facts": ["lives in Hangzhou"]} Hope it helps!',
     {"facts": ["lives in Hangzhou"]}),
    ("{'name': 'Anna', 'note': 'it\\'s fine', \"ok\": True, 'x': None}",
     {"name": "Anna", "note": "it's fine", "ok": True, "x": None}),
    ('{"text": "a } brace and a \\" quote", "n": 2}', {"text": 'a } brace and a " quote', "n": 2}),
    ('<think>maybe {"draft": 1}?</think>\n{"final": 2}', {"final": 2}),
    ('{"apostrophe": "don\'t", "list": [1,],}', {"apostrophe": "don't", "list": [1]}),
])
def test_parse_json_loose(text, expected):
    assert parse_json_loose(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "I cannot help with that.", "just a number 42",
                                  '{"pet": 猫}', '{"city": Zürich}', '{"note": é}'])  # a bare non-ASCII word
def test_parse_json_loose_rejects(text):
    with pytest.raises(JsonParseError):
        parse_json_loose(text)


@pytest.mark.parametrize("text", ['{"facts": ["a", "b"', '{"observations": [{"content": "Anna'])
def test_truncated_json_is_never_guessed(text):
    with pytest.raises(JsonParseError):  # a cut-off answer must be asked again, not stored cut off
        parse_json_loose(text)


# -- chat_json -----------------------------------------------------------------------------------


def test_chat_json_parses_prose_wrapped_answer_in_json_mode(server):
    server.script(OPENAI_CHAT, answers('Here you go:\n```json\n{"facts": ["Hangzhou"],}\n```'))
    value, usage = chat_json(make_chat(server), ASK, required_keys=("facts",))
    assert value == {"facts": ["Hangzhou"]}
    assert usage.total_tokens == 18
    request = server.requests_to(OPENAI_CHAT)[0].json
    assert request["response_format"] == {"type": "json_object"}
    assert request["messages"] == ASK  # the prompt already mentions JSON: no hint added


def test_chat_json_adds_a_json_hint_when_the_prompt_lacks_one(server):
    server.script(OPENAI_CHAT, answers('{"ok": true}'))
    chat_json(make_chat(server), [{"role": "user", "content": "hi"}])
    messages = server.requests_to(OPENAI_CHAT)[0].json["messages"]
    assert messages[0]["role"] == "system" and "JSON" in messages[0]["content"]


def test_malformed_then_good_json_on_reask(server):
    server.script(OPENAI_CHAT, answers("Sorry, I am not sure what you mean.", '{"facts": []}'))
    value, usage = chat_json(make_chat(server), ASK, required_keys=("facts",))
    assert value == {"facts": []}
    assert usage == TokenUsage(prompt_tokens=22, completion_tokens=14)
    second = server.requests_to(OPENAI_CHAT)[1].json["messages"]
    assert second[-2] == {"role": "assistant", "content": "Sorry, I am not sure what you mean."}
    assert second[-1]["role"] == "user"
    assert second[-1]["content"].startswith("Your previous answer was not valid JSON: ")
    assert second[-1]["content"].endswith("answer with only the JSON object")


def test_bare_chinese_word_is_asked_again_not_a_crash(server):
    server.script(OPENAI_CHAT, answers('{"facts": [猫]}', '{"facts": ["猫"]}'))
    value, _ = chat_json(make_chat(server), ASK, required_keys=("facts",))
    assert value == {"facts": ["猫"]}
    assert len(server.requests_to(OPENAI_CHAT)) == 2


def test_missing_required_keys_trigger_reask(server):
    server.script(OPENAI_CHAT, answers('{"fact": "x"}', '{"facts": ["x"], "extra": 1}'))
    value, _ = chat_json(make_chat(server), ASK, required_keys=("facts",))
    assert value["facts"] == ["x"]
    reask = server.requests_to(OPENAI_CHAT)[1].json["messages"][-1]["content"]
    assert "missing the required keys: facts" in reask


def test_still_broken_after_repairs_raises_model_error(server):
    server.script(OPENAI_CHAT, answers("no json", "still no json"))
    with pytest.raises(ModelError, match="no usable JSON after 2 attempt"):
        chat_json(make_chat(server), ASK)
    assert len(server.requests_to(OPENAI_CHAT)) == 2


def test_max_repairs_zero_asks_once(server):
    server.script(OPENAI_CHAT, answers("nope"))
    with pytest.raises(ModelError):
        chat_json(make_chat(server), ASK, max_repairs=0)
    assert len(server.requests_to(OPENAI_CHAT)) == 1


def test_chat_json_works_when_json_mode_is_rejected(server):
    server.script(OPENAI_CHAT, [Reply(status=400, json={"error": {
        "message": "response_format json_object is not supported"}})] + answers('{"facts": [1]}'))
    model = make_chat(server)
    value, _ = chat_json(model, ASK)
    assert value == {"facts": [1]} and model.json_mode_supported is False


@pytest.mark.asyncio
async def test_achat_json_reasks(server):
    server.script(OPENAI_CHAT, answers("Let me think about it.", "{'facts': ['a']}"))
    model = make_chat(server)
    value, usage = await achat_json(model, ASK, required_keys=["facts"])
    assert value == {"facts": ["a"]} and usage.total_tokens == 36
    await model.aclose()


# -- usage meter ---------------------------------------------------------------------------------


def test_usage_meter_counts_per_user_and_operation():
    meter = UsageMeter()
    meter.add("anna", "extract", TokenUsage(10, 5))
    meter.add("anna", "extract", TokenUsage(1, 1))
    meter.add("anna", "consolidate", TokenUsage(100, 50))
    meter.add("ben", "extract", TokenUsage(3, 2))
    assert meter.get("anna", "extract") == TokenUsage(11, 6)
    assert meter.get("anna") == TokenUsage(111, 56)
    assert meter.get(operation="extract") == TokenUsage(14, 8)
    assert meter.get().total_tokens == 172
    assert meter.get("nobody") == TokenUsage()
    assert meter.snapshot()["anna"]["extract"] == {
        "prompt_tokens": 11, "completion_tokens": 6, "total_tokens": 17}
    meter.reset()
    assert meter.snapshot() == {}


def test_usage_meter_is_thread_safe():
    meter = UsageMeter()

    def work() -> None:
        for _ in range(1000):
            meter.add("u", "op", TokenUsage(1, 2))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert meter.get("u", "op") == TokenUsage(8000, 16000)


def test_usage_meter_snapshot_is_a_copy():
    meter = UsageMeter()
    meter.add("u", "op", TokenUsage(1, 1))
    snapshot = meter.snapshot()
    meter.add("u", "op", TokenUsage(1, 1))
    assert snapshot["u"]["op"]["total_tokens"] == 2
