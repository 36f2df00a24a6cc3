"""DashScope-native embedder, chat model and reranker, with the real `dashscope` SDK against a
local fake of its HTTP API."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from memoryscope_plugins.errors import ConfigError, ModelAuthError, ModelError, ModelNotFoundError
from memoryscope_plugins.models.base import ChatModel, Embedder, Reranker
from memoryscope_plugins.models.dashscope_native import (
    DashScopeChatModel,
    DashScopeEmbedder,
    DashScopeReranker,
)
from memoryscope_plugins.models.retry import RetryPolicy
from tests.support.fakes.fake_model_server import (
    DASHSCOPE_EMBEDDINGS,
    DASHSCOPE_GENERATION,
    DASHSCOPE_RERANK,
    FakeModelServer,
    Reply,
    dashscope_error,
    dashscope_message,
    fake_vector,
)

SECRET = "sk-dashscope-SECRET-9876543210"
USER = [{"role": "user", "content": "hello qwen"}]


def fast_policy(**overrides) -> RetryPolicy:
    settings: dict[str, Any] = {"max_attempts": 3, "base_delay": 0.001, "max_delay": 0.005, "max_retry_after": 0.01}
    settings.update(overrides)
    return RetryPolicy(**settings)


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)


@pytest.fixture
def server():
    with FakeModelServer(embedding_dim=8) as fake:
        yield fake


def base(server) -> str:
    return server.url + "/api/v1"


def make_embedder(server, **kwargs) -> DashScopeEmbedder:
    kwargs.setdefault("retry_policy", fast_policy())
    kwargs.setdefault("dimensions", 8)
    return DashScopeEmbedder(api_key=SECRET, base_url=base(server), **kwargs)


def make_chat(server, **kwargs) -> DashScopeChatModel:
    kwargs.setdefault("retry_policy", fast_policy())
    return DashScopeChatModel(api_key=SECRET, base_url=base(server), **kwargs)


def make_reranker(server, **kwargs) -> DashScopeReranker:
    kwargs.setdefault("retry_policy", fast_policy())
    return DashScopeReranker(api_key=SECRET, base_url=base(server), **kwargs)


# -- embeddings ----------------------------------------------------------------------------------


def test_embed_batches_of_ten_in_order(server):
    embedder = make_embedder(server, batch_size=50)  # capped at 10 for text-embedding-v3
    texts = [f"text number {i}" for i in range(23)]
    vectors = embedder.embed(texts, kind="query")
    raw = np.asarray([fake_vector(t, 8) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True),
                               atol=1e-6)
    batches = server.requests_to(DASHSCOPE_EMBEDDINGS)
    assert [len(r.json["input"]["texts"]) for r in batches] == [10, 10, 3]
    params = batches[0].json["parameters"]
    assert params["text_type"] == "query" and params["dimension"] == 8
    assert batches[0].headers["authorization"] == f"Bearer {SECRET}"
    assert embedder.name == "dashscope:text-embedding-v3:8"
    assert isinstance(embedder, Embedder)


def test_v2_batches_of_25_and_known_dim(server):
    embedder = DashScopeEmbedder("text-embedding-v2", api_key=SECRET, base_url=base(server),
                                 batch_size=100, retry_policy=fast_policy())
    assert embedder.batch_size == 25 and embedder.dim == 1536
    assert server.requests == []  # known dimension: no probe


@pytest.mark.asyncio
async def test_aembed(server):
    vectors = await make_embedder(server).aembed(["a", "b"])
    assert vectors.shape == (2, 8)


def test_embed_throttled_then_success(server):
    slept: list[float] = []
    server.script(DASHSCOPE_EMBEDDINGS, [Reply(
        status=429, headers={"Retry-After": "1"},
        json=dashscope_error("Throttling.RateQuota", "Requests rate limit exceeded"))])
    embedder = make_embedder(server, retry_policy=fast_policy(max_retry_after=5,
                                                              sleep=slept.append))
    assert embedder.embed(["x"]).shape == (1, 8)
    assert slept == [1.0]


def test_invalid_api_key_maps_to_auth_error(server):
    server.script(DASHSCOPE_EMBEDDINGS, [Reply(status=401, json=dashscope_error(
        "InvalidApiKey", f"Invalid API-key provided: {SECRET}"))])
    with pytest.raises(ModelAuthError) as caught:
        make_embedder(server).embed(["x"])
    assert SECRET not in str(caught.value)
    assert "text-embedding-v3" in str(caught.value) and "401" in str(caught.value)
    assert len(server.requests_to(DASHSCOPE_EMBEDDINGS)) == 1


def test_missing_key_is_config_error(monkeypatch):
    import dashscope

    monkeypatch.setattr(dashscope, "api_key", None)
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        DashScopeEmbedder()


# -- chat ----------------------------------------------------------------------------------------


def test_chat_uses_message_format_and_counts_usage(server):
    chat = make_chat(server, max_tokens=100)
    result = chat.chat(USER, json_mode=True, temperature=0.3)
    assert result.text == "echo: hello qwen" and result.model == "qwen-plus"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (13, 5)
    body = server.requests_to(DASHSCOPE_GENERATION)[0].json
    assert body["input"]["messages"] == USER
    params = body["parameters"]
    assert params["result_format"] == "message" and params["temperature"] == 0.3
    assert params["max_tokens"] == 100 and params["response_format"] == {"type": "json_object"}
    assert isinstance(chat, ChatModel)


@pytest.mark.asyncio
async def test_achat(server):
    chat = make_chat(server)
    result = await chat.achat(USER)
    assert result.text == "echo: hello qwen" and result.usage.total_tokens == 18
    await chat.aclose()


def test_chat_500_then_success(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=500, json=dashscope_error(
        "InternalError", "An internal error has occured, please try again later"))])
    assert make_chat(server).chat(USER).text == "echo: hello qwen"
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 2


def test_chat_timeout_then_success(server):
    server.script(DASHSCOPE_GENERATION, [Reply(json=dashscope_message("late"), delay=1.0)])
    assert make_chat(server, timeout=0.25).chat(USER).text == "echo: hello qwen"
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 2


@pytest.mark.asyncio
async def test_achat_timeout_then_success(server):
    server.script(DASHSCOPE_GENERATION, [Reply(json=dashscope_message("late"), delay=1.0)])
    chat = make_chat(server, timeout=0.25)
    assert (await chat.achat(USER)).text == "echo: hello qwen"
    await chat.aclose()


def test_exhausted_retries(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=503, json=dashscope_error(
        "ServiceUnavailable", "busy"))] * 3)
    with pytest.raises(ModelError, match="last status 503"):
        make_chat(server).chat(USER)
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 3


def test_model_not_exist_maps_to_not_found(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=400, json=dashscope_error(
        "InvalidParameter", "Model not exist."))])
    with pytest.raises(ModelNotFoundError, match="qwen-plus"):
        make_chat(server).chat(USER)


def test_data_inspection_failure_is_not_retried(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=400, json=dashscope_error(
        "DataInspectionFailed", "Input data may contain inappropriate content."))])
    with pytest.raises(ModelError, match="DataInspectionFailed") as caught:
        make_chat(server).chat(USER)
    assert not isinstance(caught.value, (ModelAuthError, ModelNotFoundError))
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 1


def test_access_denied_maps_to_auth_error(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=403, json=dashscope_error(
        "AccessDenied", "Access denied."))])
    with pytest.raises(ModelAuthError):
        make_chat(server).chat(USER)


def test_rejected_response_format_is_dropped(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=400, json=dashscope_error(
        "InvalidParameter", "response_format is not supported for this model"))])
    chat = make_chat(server)
    assert chat.chat(USER, json_mode=True).text == "echo: hello qwen"
    first, second = server.requests_to(DASHSCOPE_GENERATION)
    assert "response_format" in first.json["parameters"]
    assert "response_format" not in second.json["parameters"]
    assert chat.json_mode_supported is False


def test_stream_incremental(server):
    chat = make_chat(server)
    pieces = list(chat.stream([{"role": "user", "content": "tell me a story"}]))
    assert len(pieces) > 1 and "".join(pieces) == "echo: tell me a story"
    request = server.requests_to(DASHSCOPE_GENERATION)[0]
    assert request.json["parameters"]["incremental_output"] is True
    assert request.headers["x-dashscope-sse"] == "enable"


def test_stream_retries_a_throttled_start(server):
    server.script(DASHSCOPE_GENERATION, [Reply(status=429, json=dashscope_error(
        "Throttling", "Requests throttling triggered."))])
    assert "".join(make_chat(server).stream(USER)) == "echo: hello qwen"
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 2


def test_stream_error_event_mid_stream_raises_model_error(server):
    first = json.dumps(dashscope_message("partial", finish_reason="null"))
    error = json.dumps(dashscope_error("InternalError", "stream broke"))
    raw = (f"id:1\nevent:result\n:HTTP_STATUS/200\ndata:{first}\n\n"
           f"id:2\nevent:error\n:HTTP_STATUS/500\ndata:{error}\n\n")
    server.script(DASHSCOPE_GENERATION, [Reply(body=raw, content_type="text/event-stream")])
    received = []
    with pytest.raises(ModelError, match="stream broke"):
        for piece in make_chat(server).stream(USER):
            received.append(piece)
    assert received == ["partial"]
    assert len(server.requests_to(DASHSCOPE_GENERATION)) == 1  # a started stream is not retried


@pytest.mark.asyncio
async def test_astream(server):
    chat = make_chat(server)
    pieces = [piece async for piece in chat.astream([{"role": "user", "content": "a b c"}])]
    assert "".join(pieces) == "echo: a b c"
    await chat.aclose()


# -- rerank --------------------------------------------------------------------------------------


def test_rerank_scores_align_with_input(server):
    reranker = make_reranker(server)
    documents = ["a dog", "the cat sat", "cats and a cat"]
    scores = reranker.rerank("cat", documents)
    assert scores == pytest.approx([0.0, 1 / 4, 1 / 5], abs=1e-5)
    body = server.requests_to(DASHSCOPE_RERANK)[0].json
    assert body["input"] == {"query": "cat", "documents": documents}
    assert body["parameters"]["top_n"] == 3
    assert isinstance(reranker, Reranker) and reranker.name == "dashscope:gte-rerank"


@pytest.mark.asyncio
async def test_arerank_after_500(server):
    server.script(DASHSCOPE_RERANK, [Reply(status=500, json=dashscope_error("InternalError", "x"))])
    reranker = make_reranker(server)
    scores = await reranker.arerank("cat", ["cat", "dog"])
    assert scores[0] > scores[1]
    assert len(server.requests_to(DASHSCOPE_RERANK)) == 2
    await reranker.aclose()


def test_rerank_empty_documents(server):
    assert make_reranker(server).rerank("q", []) == []
    assert server.requests == []


def test_rerank_auth_error(server):
    server.script(DASHSCOPE_RERANK, [Reply(status=401, json=dashscope_error(
        "InvalidApiKey", "Invalid API-key provided."))])
    with pytest.raises(ModelAuthError):
        make_reranker(server).rerank("q", ["d"])
