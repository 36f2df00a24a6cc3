"""OpenAI-compatible embedder and chat model, with the real `openai` SDK against a local fake."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memoryscope_plugins.errors import ConfigError, ModelAuthError, ModelError, ModelNotFoundError
from memoryscope_plugins.models.base import ChatModel, Embedder
from memoryscope_plugins.models.openai_compat import (
    OpenAIChatModel,
    OpenAIEmbedder,
    resolve_api_key,
)
from memoryscope_plugins.models.retry import RetryPolicy
from tests.support.fakes.fake_model_server import (
    OPENAI_CHAT,
    OPENAI_EMBEDDINGS,
    FakeModelServer,
    Reply,
    fake_vector,
    openai_completion,
)

SECRET = "sk-test-SECRET-0123456789abcdef"
USER = [{"role": "user", "content": "hello there"}]


def fast_policy(**overrides) -> RetryPolicy:
    settings: dict[str, Any] = {"max_attempts": 3, "base_delay": 0.001, "max_delay": 0.005, "max_retry_after": 0.01}
    settings.update(overrides)
    return RetryPolicy(**settings)


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "DASHSCOPE_API_KEY", "SILICONFLOW_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with FakeModelServer(embedding_dim=8) as fake:
        yield fake


def make_embedder(server, **kwargs) -> OpenAIEmbedder:
    kwargs.setdefault("retry_policy", fast_policy())
    return OpenAIEmbedder("fake-embed", base_url=server.url + "/v1", api_key=SECRET, **kwargs)


def make_chat(server, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("retry_policy", fast_policy())
    return OpenAIChatModel("fake-chat", base_url=server.url + "/v1", api_key=SECRET, **kwargs)


def expected_vectors(texts, dim=8) -> np.ndarray:
    raw = np.asarray([fake_vector(text, dim) for text in texts], dtype=np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


# -- embeddings ----------------------------------------------------------------------------------


def test_embed_batches_preserve_order_and_normalise(server):
    embedder = make_embedder(server, batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 8)
    np.testing.assert_allclose(vectors, expected_vectors(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    sent = [request.json["input"] for request in server.requests_to(OPENAI_EMBEDDINGS)]
    assert sent == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(r.json["encoding_format"] == "float" for r in server.requests_to(OPENAI_EMBEDDINGS))
    assert isinstance(embedder, Embedder)


def test_embed_reorders_shuffled_response(server):
    texts = ["one", "two", "three"]
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(texts[i], 8)}
            for i in (2, 0, 1)]
    server.script(OPENAI_EMBEDDINGS, [Reply(json={"object": "list", "data": data, "model": "m",
                                                  "usage": {"prompt_tokens": 3,
                                                            "total_tokens": 3}})])
    vectors = make_embedder(server).embed(texts)
    np.testing.assert_allclose(vectors, expected_vectors(texts), atol=1e-6)


def test_dim_is_probed_lazily_and_named(server):
    embedder = make_embedder(server)
    assert server.requests_to(OPENAI_EMBEDDINGS) == []
    assert embedder.dim == 8
    assert embedder.name == "openai:fake-embed:8"
    assert len(server.requests_to(OPENAI_EMBEDDINGS)) == 1


def test_dimensions_are_sent_and_checked(server):
    embedder = make_embedder(server, dimensions=16)
    assert embedder.name == "openai:fake-embed:16"
    assert embedder.embed(["x"]).shape == (1, 16)
    assert server.requests_to(OPENAI_EMBEDDINGS)[0].json["dimensions"] == 16
    server.script(OPENAI_EMBEDDINGS, [Reply(json={"object": "list", "model": "m", "data": [
        {"object": "embedding", "index": 0, "embedding": [0.1] * 4}]})])
    with pytest.raises(ModelError, match="4-dimensional"):
        embedder.embed(["y"])


def test_empty_input_and_empty_strings(server):
    embedder = make_embedder(server, dimensions=8)
    assert embedder.embed([]).shape == (0, 8)
    assert server.requests_to(OPENAI_EMBEDDINGS) == []
    assert embedder.embed(["", "x"]).shape == (2, 8)
    assert server.requests_to(OPENAI_EMBEDDINGS)[0].json["input"] == [" ", "x"]


@pytest.mark.asyncio
async def test_aembed_matches_sync(server):
    embedder = make_embedder(server, batch_size=2)
    texts = ["a", "b", "c"]
    vectors = await embedder.aembed(texts)
    np.testing.assert_allclose(vectors, embedder.embed(texts), atol=1e-6)
    await embedder.aclose()


def test_embed_retries_429_then_succeeds_honouring_retry_after(server):
    slept: list[float] = []
    embedder = make_embedder(server, retry_policy=fast_policy(max_retry_after=5.0,
                                                              sleep=slept.append))
    server.script(OPENAI_EMBEDDINGS, [Reply(status=429, headers={"Retry-After": "2"},
                                            json={"error": {"message": "slow down"}})])
    assert embedder.embed(["x"]).shape == (1, 8)
    assert slept == [2.0]
    assert len(server.requests_to(OPENAI_EMBEDDINGS)) == 2


# -- chat ----------------------------------------------------------------------------------------


def test_chat_returns_text_model_and_usage(server):
    chat = make_chat(server)
    result = chat.chat(USER)
    assert result.text == "echo: hello there"
    assert result.model == "fake-chat"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 7)
    sent = server.requests_to(OPENAI_CHAT)[0]
    assert sent.json["temperature"] == 0.0 and "response_format" not in sent.json
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert isinstance(chat, ChatModel)


def test_chat_options_and_extra_body(server):
    chat = make_chat(server, max_tokens=64, extra_body={"enable_thinking": False})
    chat.chat(USER, json_mode=True, temperature=0.5, max_tokens=10)
    body = server.requests_to(OPENAI_CHAT)[0].json
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0.5 and body["max_tokens"] == 10
    assert body["enable_thinking"] is False


@pytest.mark.asyncio
async def test_achat(server):
    chat = make_chat(server)
    result = await chat.achat(USER)
    assert result.text == "echo: hello there" and result.usage.total_tokens == 18
    await chat.aclose()


def test_stream_yields_deltas(server):
    chat = make_chat(server)
    pieces = list(chat.stream([{"role": "user", "content": "stream me please"}]))
    assert len(pieces) > 1 and "".join(pieces) == "echo: stream me please"
    assert server.requests_to(OPENAI_CHAT)[0].json["stream"] is True


@pytest.mark.asyncio
async def test_astream_yields_deltas_after_a_500(server):
    server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "boom"}})])
    chat = make_chat(server)
    pieces = [piece async for piece in chat.astream(USER)]
    assert "".join(pieces) == "echo: hello there"
    assert len(server.requests_to(OPENAI_CHAT)) == 2
    await chat.aclose()


def test_chat_500_then_success(server):
    server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "boom"}}),
                                Reply(status=502, body="bad gateway")])
    assert make_chat(server).chat(USER).text == "echo: hello there"
    assert len(server.requests_to(OPENAI_CHAT)) == 3


@pytest.mark.asyncio
async def test_achat_429_then_success_honours_retry_after(server):
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    server.script(OPENAI_CHAT, [Reply(status=429, headers={"Retry-After": "3"},
                                      json={"error": {"message": "rate limited"}})])
    chat = make_chat(server, retry_policy=fast_policy(max_retry_after=10.0, async_sleep=record))
    assert (await chat.achat(USER)).text == "echo: hello there"
    assert slept == [3.0]
    await chat.aclose()


def test_chat_timeout_then_success(server):
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("late"), delay=1.0)])
    chat = make_chat(server, timeout=0.25)
    assert chat.chat(USER).text == "echo: hello there"
    assert len(server.requests_to(OPENAI_CHAT)) == 2


@pytest.mark.asyncio
async def test_achat_timeout_then_success(server):
    server.script(OPENAI_CHAT, [Reply(json=openai_completion("late"), delay=1.0)])
    chat = make_chat(server, timeout=0.25)
    assert (await chat.achat(USER)).text == "echo: hello there"
    await chat.aclose()


def test_exhausted_retries_raise_model_error_with_last_status(server):
    server.script(OPENAI_CHAT, [Reply(status=503, json={"error": {"message": "overloaded"}})] * 3)
    with pytest.raises(ModelError) as caught:
        make_chat(server).chat(USER)
    assert not isinstance(caught.value, (ModelAuthError, ModelNotFoundError))
    assert "last status 503" in str(caught.value) and "3 attempts" in str(caught.value)
    assert len(server.requests_to(OPENAI_CHAT)) == 3


def test_connection_refused_is_retried_then_fails(server):
    url = server.url + "/v1"
    server.stop()
    chat = OpenAIChatModel("fake-chat", base_url=url, api_key=SECRET, retry_policy=fast_policy())
    with pytest.raises(ModelError, match="last error connection"):
        chat.chat(USER)


def test_401_maps_to_auth_error_without_the_key(server):
    server.script(OPENAI_CHAT, [Reply(status=401, json={"error": {
        "message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}})])
    with pytest.raises(ModelAuthError) as caught:
        make_chat(server).chat(USER)
    text = str(caught.value)
    assert SECRET not in text and "SECRET-0123" not in text
    assert "fake-chat" in text and server.url in text and "401" in text
    assert len(server.requests_to(OPENAI_CHAT)) == 1  # never retried


def test_403_on_embeddings_is_auth_error(server):
    server.script(OPENAI_EMBEDDINGS, [Reply(status=403, json={"error": {"message": "denied"}})])
    with pytest.raises(ModelAuthError):
        make_embedder(server, dimensions=8).embed(["x"])


def test_404_model_maps_to_not_found(server):
    server.script(OPENAI_CHAT, [Reply(status=404, json={"error": {
        "message": "The model `nope` does not exist.", "code": "model_not_found"}})])
    with pytest.raises(ModelNotFoundError, match="fake-chat"):
        make_chat(server).chat(USER)
    assert len(server.requests_to(OPENAI_CHAT)) == 1


def test_400_model_not_found_message_maps_to_not_found(server):
    server.script(OPENAI_EMBEDDINGS, [Reply(status=400, json={"error": {
        "message": "model 'nomic' not found, try pulling it first"}})])
    with pytest.raises(ModelNotFoundError):
        make_embedder(server, dimensions=8).embed(["x"])


def test_400_is_not_retried(server):
    server.script(OPENAI_CHAT, [Reply(status=400, json={"error": {"message": "context too long"}})])
    with pytest.raises(ModelError, match="context too long"):
        make_chat(server).chat(USER)
    assert len(server.requests_to(OPENAI_CHAT)) == 1


def test_rejected_response_format_is_dropped_and_remembered(server):
    server.script(OPENAI_CHAT, [Reply(status=400, json={"error": {
        "message": "This model does not support response_format json_object",
        "param": "response_format"}})])
    chat = make_chat(server)
    assert chat.chat(USER, json_mode=True).text == "echo: hello there"
    first, second = server.requests_to(OPENAI_CHAT)
    assert "response_format" in first.json and "response_format" not in second.json
    assert chat.json_mode_supported is False
    chat.chat(USER, json_mode=True)
    assert "response_format" not in server.requests_to(OPENAI_CHAT)[2].json


@pytest.mark.asyncio
async def test_rejected_response_format_async(server):
    server.script(OPENAI_CHAT, [Reply(status=400, json={"error": {
        "message": "'response_format' is not supported"}})])
    chat = make_chat(server)
    assert (await chat.achat(USER, json_mode=True)).text == "echo: hello there"
    assert chat.json_mode_supported is False
    await chat.aclose()


# -- configuration -------------------------------------------------------------------------------


def test_api_key_resolution(monkeypatch):
    assert resolve_api_key("explicit", None) == "explicit"
    assert resolve_api_key(None, "http://localhost:11434/v1") == "not-needed"
    assert resolve_api_key(None, "http://127.0.0.1:8080/v1") == "not-needed"
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_api_key(None, None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert resolve_api_key(None, None) == "sk-from-env"
    # an OpenAI key is never sent to DashScope / SiliconFlow
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        resolve_api_key(None, "https://dashscope.aliyuncs.com/compatible-mode/v1")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-ds")
    assert resolve_api_key(None, "https://dashscope.aliyuncs.com/compatible-mode/v1") == "sk-ds"


def test_missing_key_for_remote_endpoint_is_config_error():
    with pytest.raises(ConfigError):
        OpenAIChatModel("gpt-4o-mini")
