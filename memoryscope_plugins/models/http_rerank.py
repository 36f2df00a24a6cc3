"""Reranker for Cohere/Jina-style ``POST {base_url}/rerank`` endpoints, on `httpx`.

Works with Jina (``https://api.jina.ai/v1``), SiliconFlow (``https://api.siliconflow.cn/v1``),
vLLM (``http://host:8000/v1``) and any server speaking the same shape::

    request:  {"model": ..., "query": ..., "documents": [...], "top_n": n}
    response: {"results": [{"index": i, "relevance_score": s}, ...]}

Sync calls use ``httpx.Client``, async calls ``httpx.AsyncClient`` (one per event loop); both
share request building and response parsing, and retry through `RetryPolicy`.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import httpx

from ..errors import ConfigError, ModelError
from .retry import (
    CallTarget,
    Failure,
    LoopLocal,
    RemoteFailure,
    RetryPolicy,
    error_text,
    parse_retry_after,
)


class HttpReranker:
    """Scores documents against a query through an HTTP rerank endpoint.

    ``api_key`` falls back to the ``RERANK_API_KEY`` env var; with neither, no
    ``Authorization`` header is sent (fine for a local vLLM). ``base_url`` may also be the full
    ``.../rerank`` URL.
    """

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 timeout: float = 30.0, max_retries: int = 4, *,
                 retry_policy: RetryPolicy | None = None) -> None:
        if not model:
            raise ConfigError("model name is required")
        if not base_url:
            raise ConfigError("base_url is required, e.g. https://api.jina.ai/v1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url if self.base_url.endswith("/rerank") else self.base_url + "/rerank"
        key = api_key or os.environ.get("RERANK_API_KEY") or ""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(timeout=timeout, headers=headers)
        self._aclients: LoopLocal[httpx.AsyncClient] = LoopLocal(
            lambda: httpx.AsyncClient(timeout=timeout, headers=headers))
        self._policy = retry_policy or RetryPolicy.from_max_retries(max_retries)
        self._target = CallTarget(provider="http reranker", model=model, base_url=self.base_url,
                                  secrets=(key,) if key else ())

    @property
    def name(self) -> str:
        return f"http-rerank:{self.model}"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Scores aligned with ``documents`` (higher is more relevant)."""
        if not documents:
            return []
        body = self._body(query, documents)
        payload = self._policy.call(lambda: self._parse(self._client.post(self.url, json=body)),
                                    classify=classify_httpx, target=self._target)
        return self._scores(payload, len(documents))

    async def arerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Async twin of `rerank`, on ``httpx.AsyncClient``."""
        if not documents:
            return []
        body = self._body(query, documents)
        client = self._aclients.get()

        async def attempt() -> Any:
            return self._parse(await client.post(self.url, json=body))

        payload = await self._policy.acall(attempt, classify=classify_httpx, target=self._target)
        return self._scores(payload, len(documents))

    def close(self) -> None:
        """Close the sync HTTP client."""
        self._client.close()

    async def aclose(self) -> None:
        """Close the async HTTP client of the running event loop."""
        client = self._aclients.pop_current()
        if client is not None:
            await client.aclose()

    def _body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {"model": self.model, "query": query, "documents": list(documents),
                "top_n": len(documents)}

    def _parse(self, response: httpx.Response) -> Any:
        """The JSON body of a 2xx response; a `RemoteFailure` for any other status."""
        if response.status_code >= 400:
            code, message = error_text(_json_or_text(response))
            raise RemoteFailure(Failure("status", status=response.status_code, code=code,
                                        retry_after=parse_retry_after(response.headers),
                                        detail=message))
        try:
            return response.json()
        except ValueError as exc:
            raise ModelError(f"{self._target.describe()}: response is not JSON") from exc

    def _scores(self, payload: Any, count: int) -> list[float]:
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise ModelError(f"{self._target.describe()}: response has no 'results' list")
        return aligned_scores(results, count, self._target)


def classify_httpx(exc: BaseException) -> Failure | None:
    """Map httpx transport exceptions to a `Failure`."""
    if isinstance(exc, httpx.TimeoutException):
        return Failure("timeout")
    if isinstance(exc, httpx.TransportError):
        return Failure("connection")
    return None


def _json_or_text(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


def aligned_scores(results: Sequence[Any], count: int, target: CallTarget) -> list[float]:
    """Scores in input order from ``[{"index", "relevance_score"}]`` results.

    A document the endpoint left out scores 1.0 below the lowest returned score, so it ranks
    last without producing infinities.
    """
    scores: list[float | None] = [None] * count
    for item in results:
        try:
            index = int(item["index"])
            value = item.get("relevance_score", item.get("score"))
            score = float(value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(f"{target.describe()}: malformed rerank result") from exc
        if not 0 <= index < count:
            raise ModelError(f"{target.describe()}: result index {index} out of range")
        scores[index] = score
    present = [score for score in scores if score is not None]
    floor = (min(present) if present else 0.0) - 1.0
    return [floor if score is None else score for score in scores]
