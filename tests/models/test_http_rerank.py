"""HttpReranker (Jina / SiliconFlow / vLLM ``/rerank`` shape) on httpx, against a local fake."""

from __future__ import annotations

from typing import Any

import pytest

from memoryscope_plugins.errors import ConfigError, ModelAuthError, ModelError, ModelNotFoundError
from memoryscope_plugins.models.base import Reranker
from memoryscope_plugins.models.http_rerank import HttpReranker
from memoryscope_plugins.models.retry import RetryPolicy
from tests.support.fakes.fake_model_server import RERANK, Reply

SECRET = "jina_SECRET_abcdef0123456789"
DOCS = ["a dog in the park", "the cat sat on the mat", "cat", "nothing relevant here"]


def fast_policy(**overrides) -> RetryPolicy:
    settings: dict[str, Any] = {"max_attempts": 3, "base_delay": 0.001, "max_delay": 0.005, "max_retry_after": 0.01}
    settings.update(overrides)
    return RetryPolicy(**settings)


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    monkeypatch.delenv("RERANK_API_KEY", raising=False)


def make_reranker(server, **kwargs) -> HttpReranker:
    kwargs.setdefault("retry_policy", fast_policy())
    kwargs.setdefault("api_key", SECRET)
    return HttpReranker("fake-rerank", server.url + "/v1", **kwargs)


def test_scores_are_aligned_with_input_order(server):
    reranker = make_reranker(server)
    scores = reranker.rerank("cat", DOCS)
    assert len(scores) == 4
    assert scores[2] > scores[1] > scores[0] == scores[3] == 0.0
    request = server.requests_to(RERANK)[0]
    assert request.json == {"model": "fake-rerank", "query": "cat", "documents": DOCS, "top_n": 4}
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert isinstance(reranker, Reranker) and reranker.name == "http-rerank:fake-rerank"


def test_missing_results_rank_below_returned_ones(server):
    server.script(RERANK, [Reply(json={"results": [{"index": 2, "relevance_score": 0.9},
                                                   {"index": 0, "relevance_score": 0.2}]})])
    scores = make_reranker(server).rerank("q", ["a", "b", "c"])
    assert scores[2] == 0.9 and scores[0] == 0.2 and scores[1] < 0.2


def test_score_key_variant_and_full_rerank_url(server):
    server.script(RERANK, [Reply(json={"results": [{"index": 1, "score": 0.7},
                                                   {"index": 0, "score": 0.1}]})])
    reranker = HttpReranker("m", server.url + "/v1/rerank", retry_policy=fast_policy())
    assert reranker.rerank("q", ["a", "b"]) == [0.1, 0.7]
    assert "authorization" not in server.requests_to(RERANK)[0].headers  # no key: no header


def test_env_key_fallback(server, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", "env-key-123456")
    HttpReranker("m", server.url + "/v1", retry_policy=fast_policy()).rerank("q", ["a"])
    assert server.requests_to(RERANK)[0].headers["authorization"] == "Bearer env-key-123456"


@pytest.mark.asyncio
async def test_arerank_matches_sync(server):
    reranker = make_reranker(server)
    assert await reranker.arerank("cat", DOCS) == reranker.rerank("cat", DOCS)
    await reranker.aclose()


def test_empty_documents_make_no_request(server):
    assert make_reranker(server).rerank("q", []) == []
    assert server.requests == []


def test_429_then_success_honours_retry_after(server):
    slept: list[float] = []
    server.script(RERANK, [Reply(status=429, headers={"Retry-After": "4"},
                                 json={"detail": "rate limited"})])
    reranker = make_reranker(server, retry_policy=fast_policy(max_retry_after=30,
                                                              sleep=slept.append))
    assert len(reranker.rerank("cat", DOCS)) == 4
    assert slept == [4.0]


@pytest.mark.asyncio
async def test_500_then_success_async(server):
    server.script(RERANK, [Reply(status=500, body="Internal Server Error")])
    reranker = make_reranker(server)
    assert len(await reranker.arerank("cat", DOCS)) == 4
    assert len(server.requests_to(RERANK)) == 2
    await reranker.aclose()


def test_timeout_then_success(server):
    server.script(RERANK, [Reply(json={"results": []}, delay=1.0)])
    scores = make_reranker(server, timeout=0.25).rerank("cat", DOCS)
    assert scores[2] > 0
    assert len(server.requests_to(RERANK)) == 2


@pytest.mark.asyncio
async def test_timeout_then_success_async(server):
    server.script(RERANK, [Reply(json={"results": []}, delay=1.0)])
    reranker = make_reranker(server, timeout=0.25)
    assert (await reranker.arerank("cat", DOCS))[2] > 0
    await reranker.aclose()


def test_exhausted_retries(server):
    server.script(RERANK, [Reply(status=502, body="bad gateway")] * 3)
    with pytest.raises(ModelError, match="last status 502"):
        make_reranker(server).rerank("q", ["a"])
    assert len(server.requests_to(RERANK)) == 3


def test_401_is_auth_error_without_key(server):
    server.script(RERANK, [Reply(status=401, json={"detail": f"Invalid key {SECRET}"})])
    with pytest.raises(ModelAuthError) as caught:
        make_reranker(server).rerank("q", ["a"])
    assert SECRET not in str(caught.value) and "fake-rerank" in str(caught.value)
    assert len(server.requests_to(RERANK)) == 1


def test_404_is_model_not_found(server):
    server.script(RERANK, [Reply(status=404, json={"error": {"message": "model not found"}})])
    with pytest.raises(ModelNotFoundError):
        make_reranker(server).rerank("q", ["a"])


def test_malformed_response(server):
    server.script(RERANK, [Reply(json={"data": []}),
                           Reply(json={"results": [{"index": 5, "relevance_score": 1.0}]})])
    reranker = make_reranker(server)
    with pytest.raises(ModelError, match="results"):
        reranker.rerank("q", ["a"])
    with pytest.raises(ModelError, match="out of range"):
        reranker.rerank("q", ["a"])


def test_base_url_required():
    with pytest.raises(ConfigError):
        HttpReranker("m", "")
