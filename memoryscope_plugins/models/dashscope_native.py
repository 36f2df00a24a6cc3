"""Embedder, chat model and reranker on Alibaba Cloud's native `dashscope` SDK.

The SDK reports HTTP errors in the response object (``status_code``, ``code``, ``message``)
rather than raising, and raises only on transport problems; both are turned into a `Failure`
and go through the shared `RetryPolicy`, so behaviour matches the OpenAI-compatible clients.

``base_url`` (default: the SDK's ``dashscope.base_http_api_url``, which honours the
``DASHSCOPE_HTTP_BASE_URL`` env var) selects the region, e.g.
``https://dashscope-intl.aliyuncs.com/api/v1``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence

import numpy as np

from .. import metrics
from ..errors import ConfigError, ModelError, ValidationError
from .base import (
    ChatMessages,
    ChatResult,
    EmbedKind,
    JsonSchema,
    ThreadedAsyncMixin,
    TokenUsage,
    l2_normalise,
)
from .http_rerank import aligned_scores
from .response_format import FormatLadder, StructuredMode, endpoint_key
from .retry import (
    CallTarget,
    Failure,
    RemoteFailure,
    RetryPolicy,
    parse_retry_after,
    to_model_error,
)

logger = logging.getLogger(__name__)

DEFAULT_DASHSCOPE_URL = "https://dashscope.aliyuncs.com/api/v1"
# Largest batch each embedding model accepts, and its default dimension.
_EMBED_LIMITS = {"text-embedding-v1": 25, "text-embedding-v2": 25}
_EMBED_DEFAULT_LIMIT = 10
_KNOWN_DIMS = {"text-embedding-v1": 1536, "text-embedding-v2": 1536,
               "text-embedding-v3": 1024, "text-embedding-v4": 1024}


def _import_dashscope() -> Any:
    try:
        import dashscope
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("the DashScope models need the `dashscope` package: "
                          "pip install 'memoryscope-plugins[dashscope]'") from exc
    return dashscope


def _resolve_key(api_key: str | None, dashscope: Any) -> str:
    key = api_key or os.environ.get("DASHSCOPE_API_KEY") or getattr(dashscope, "api_key", None)
    if not key:
        raise ConfigError("no DashScope API key: pass api_key= or set DASHSCOPE_API_KEY")
    return key


def classify_transport(exc: BaseException) -> Failure | None:
    """Map the SDK's transport exceptions (requests / aiohttp) to a `Failure`."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Failure("timeout")
    try:
        import requests
    except ImportError:  # pragma: no cover
        pass
    else:
        if isinstance(exc, requests.exceptions.Timeout):
            return Failure("timeout")
        if isinstance(exc, (requests.exceptions.ConnectionError,
                            requests.exceptions.ChunkedEncodingError)):
            return Failure("connection")
    try:
        import aiohttp
    except ImportError:  # pragma: no cover
        pass
    else:
        if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
            return Failure("connection")
    if isinstance(exc, ConnectionError):
        return Failure("connection")
    return None


def response_failure(response: Any) -> Failure | None:
    """A `Failure` for a DashScope response whose status is not 200, else None."""
    status = int(getattr(response, "status_code", 0) or 0)
    if status == 200:
        return None
    headers = getattr(response, "headers", None) or {}
    return Failure("status", status=status or None, code=getattr(response, "code", None) or None,
                   retry_after=parse_retry_after(headers),
                   detail=str(getattr(response, "message", "") or ""))


def _checked(response: Any) -> Any:
    failure = response_failure(response)
    if failure is not None:
        raise RemoteFailure(failure)
    return response


def _output(response: Any) -> dict:
    output = getattr(response, "output", None)
    return output if isinstance(output, dict) else {}


class _DashScopeBase:
    _kind = "model"

    def __init__(self, model: str, api_key: str | None, base_url: str | None, timeout: float,
                 max_retries: int, retry_policy: RetryPolicy | None) -> None:
        if not model:
            raise ConfigError("model name is required")
        self._dashscope = _import_dashscope()
        self.model = model
        self.base_url = base_url
        self._api_key = _resolve_key(api_key, self._dashscope)
        self.timeout = timeout
        self._policy = retry_policy or RetryPolicy.from_max_retries(max_retries)
        shown_url = base_url or getattr(self._dashscope, "base_http_api_url", DEFAULT_DASHSCOPE_URL)
        self._target = CallTarget(provider=f"dashscope {self._kind}", model=model,
                                  base_url=str(shown_url), secrets=(self._api_key,))

    def _common_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"api_key": self._api_key, "request_timeout": self.timeout}
        if self.base_url:
            kwargs["base_address"] = self.base_url
        return kwargs

    def _call(self, fn: Callable[[], Any]) -> Any:
        return self._policy.call(fn, classify=classify_transport, target=self._target)

    async def _acall(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await self._policy.acall(fn, classify=classify_transport, target=self._target)

    async def aclose(self) -> None:
        """Close the SDK's shared aiohttp session of the running event loop."""
        close = getattr(self._dashscope, "close_shared_aio_session", None)
        if close is not None:
            await close()

    def _stream_error(self, failure: Failure | None, exc: Exception | None = None) -> Exception:
        if failure is None and exc is not None:
            failure = classify_transport(exc)
        if failure is None:
            return exc or ModelError(f"{self._target.describe()}: stream failed")
        return to_model_error(failure, self._target)


# ---------------------------------------------------------------------------------------------
# Embeddings


class DashScopeEmbedder(_DashScopeBase, ThreadedAsyncMixin):
    """``dashscope.TextEmbedding`` (text-embedding-v1..v4), L2-normalised float32 vectors.

    ``batch_size`` is capped at what the model accepts (10 for v3/v4, 25 for v1/v2).
    ``kind`` is sent as ``text_type`` ("query" or "document"). ``aembed`` runs in a thread:
    the SDK has no async text-embedding call.
    """

    _kind = "embedder"

    def __init__(self, model: str = "text-embedding-v3", api_key: str | None = None,
                 dimensions: int | None = None, batch_size: int = 10, timeout: float = 30.0,
                 max_retries: int = 4, base_url: str | None = None, *,
                 retry_policy: RetryPolicy | None = None) -> None:
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        super().__init__(model, api_key, base_url, timeout, max_retries, retry_policy)
        self.dimensions = dimensions
        self.batch_size = min(batch_size, _EMBED_LIMITS.get(model, _EMBED_DEFAULT_LIMIT))
        self._dim: int | None = dimensions or _KNOWN_DIMS.get(model)

    @property
    def dim(self) -> int:
        """Vector dimension (may embed one probe text on first access)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @property
    def name(self) -> str:
        """Identity of the vector space, e.g. ``dashscope:text-embedding-v3:1024``."""
        return f"dashscope:{self.model}:{self.dim}"

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """Embed ``texts`` (order preserved) into an ``(n, dim)`` float32 array."""
        if isinstance(texts, str):
            raise ValidationError("embed() takes a sequence of strings, not a single string")
        cleaned = [text if text.strip() else " " for text in texts]
        if not cleaned:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._embed_batch(cleaned[start:start + self.batch_size], kind)
                 for start in range(0, len(cleaned), self.batch_size)]
        vectors = np.concatenate(parts, axis=0)
        self._check_dim(vectors.shape[1])
        return l2_normalise(vectors)

    def _embed_batch(self, batch: list[str], kind: EmbedKind) -> np.ndarray:
        kwargs = self._common_kwargs()
        kwargs["text_type"] = kind
        if self.dimensions is not None:
            kwargs["dimension"] = self.dimensions
        call = self._dashscope.TextEmbedding.call
        response = self._call(lambda: _checked(call(model=self.model, input=batch, **kwargs)))
        items = sorted(_output(response).get("embeddings") or [],
                       key=lambda item: item.get("text_index", 0))
        if len(items) != len(batch):
            raise ModelError(f"{self._target.describe()}: asked for {len(batch)} embeddings, "
                             f"got {len(items)}")
        return np.asarray([item["embedding"] for item in items], dtype=np.float32)

    def _check_dim(self, got: int) -> None:
        if self._dim is None:
            self._dim = got
        elif got != self._dim:
            raise ModelError(f"{self._target.describe()}: returned {got}-dimensional vectors, "
                             f"expected {self._dim}; set dimensions= accordingly")


# ---------------------------------------------------------------------------------------------
# Chat


class DashScopeChatModel(_DashScopeBase):
    """``dashscope.Generation`` chat (qwen-plus, qwen-max, qwen-turbo, ...).

    Uses ``result_format="message"``; streaming uses ``incremental_output=True``. Async calls use
    ``dashscope.AioGeneration`` when the installed SDK has it, else a worker thread.
    ``json_mode`` sends ``response_format={"type": "json_object"}``; ``schema=`` asks for that JSON
    schema the strongest way the endpoint accepts. Like the OpenAI client, a rejected format is
    stepped down for good (`FormatLadder`). ``extra_params`` go into every request (e.g.
    ``{"enable_thinking": False}``, ``{"repetition_penalty": 1.05}``). The answer's
    ``finish_reason`` is kept.
    """

    _kind = "chat model"

    def __init__(self, model: str = "qwen-plus", api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 4, temperature: float = 0.0,
                 max_tokens: int | None = None, base_url: str | None = None,
                 extra_params: dict[str, Any] | None = None, *, structured_output: StructuredMode = "auto",
                 retry_policy: RetryPolicy | None = None) -> None:
        super().__init__(model, api_key, base_url, timeout, max_retries, retry_policy)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_params = dict(extra_params or {})
        self.formats = FormatLadder(structured_output, endpoint_key("dashscope", self._target.base_url, model))

    @property
    def json_mode_supported(self) -> bool:
        """False once the endpoint rejected plain JSON mode."""
        return self.formats.mode in ("json_schema", "json_object_schema", "json_object")

    @property
    def name(self) -> str:
        return f"dashscope:{self.model}"

    def chat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
             max_tokens: int | None = None, schema: JsonSchema | None = None) -> ChatResult:
        """One completion; returns the text, the model, the token usage and the finish reason."""
        request = self._request(messages, json_mode, temperature, max_tokens, stream=False, schema=schema)
        return self._parse(self._call(lambda: self._generate(request, json_mode, schema)))

    async def achat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
                    max_tokens: int | None = None, schema: JsonSchema | None = None) -> ChatResult:
        """Async twin of `chat` (``AioGeneration`` when available)."""
        aio = getattr(self._dashscope, "AioGeneration", None)
        if aio is None:
            return await asyncio.to_thread(self.chat, messages, json_mode=json_mode,
                                           temperature=temperature, max_tokens=max_tokens, schema=schema)
        request = self._request(messages, json_mode, temperature, max_tokens, stream=False, schema=schema)
        return self._parse(await self._acall(lambda: self._agenerate(aio, request, json_mode, schema)))

    def stream(self, messages: ChatMessages, *, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[str]:
        """Yield text deltas (the connection is retried, not a stream that already started)."""
        request = self._request(messages, False, temperature, max_tokens, stream=True)
        call = self._dashscope.Generation.call

        def attempt() -> tuple[Any, Iterator[Any]]:
            responses = iter(call(**request))
            return _checked(self._first(next(responses, None))), responses

        first, rest = self._call(attempt)
        if text := _message_text(first):
            yield text
        try:
            for response in rest:
                failure = response_failure(response)
                if failure is not None:
                    raise self._stream_error(failure)
                if text := _message_text(response):
                    yield text
        except ModelError:
            raise
        except Exception as exc:
            raise self._stream_error(None, exc) from None

    async def astream(self, messages: ChatMessages, *, temperature: float | None = None,
                      max_tokens: int | None = None) -> AsyncIterator[str]:
        """Async twin of `stream` (``AioGeneration`` when available, else a thread)."""
        aio = getattr(self._dashscope, "AioGeneration", None)
        if aio is None:
            for text in await asyncio.to_thread(
                    lambda: list(self.stream(messages, temperature=temperature,
                                             max_tokens=max_tokens))):
                yield text
            return
        request = self._request(messages, False, temperature, max_tokens, stream=True)

        async def attempt() -> tuple[Any, Any]:
            responses = await aio.call(**request)
            return _checked(self._first(await anext(responses, None))), responses

        first, rest = await self._acall(attempt)
        if text := _message_text(first):
            yield text
        try:
            async for response in rest:
                failure = response_failure(response)
                if failure is not None:
                    raise self._stream_error(failure)
                if text := _message_text(response):
                    yield text
        except ModelError:
            raise
        except Exception as exc:
            raise self._stream_error(None, exc) from None

    # -- shared request building / parsing ----------------------------------------------------

    def _request(self, messages: ChatMessages, json_mode: bool, temperature: float | None,
                 max_tokens: int | None, *, stream: bool, schema: JsonSchema | None = None) -> dict[str, Any]:
        if not messages:
            raise ValidationError("chat() needs at least one message")
        request: dict[str, Any] = {
            **self.extra_params,
            **self._common_kwargs(),
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "result_format": "message",
            "temperature": self.temperature if temperature is None else temperature,
        }
        limit = self.max_tokens if max_tokens is None else max_tokens
        if limit is not None:
            request["max_tokens"] = limit
        response_format = self.formats.response_format(json_mode, schema)
        if response_format is not None:
            request["response_format"] = response_format
        if stream:
            request["stream"] = True
            request["incremental_output"] = True
        return request

    def _first(self, response: Any) -> Any:
        if response is None:
            raise ModelError(f"{self._target.describe()}: the stream ended before any output")
        return response

    def _refused_format(self, request: dict[str, Any], response: Any, json_mode: bool,
                        schema: JsonSchema | None) -> bool:
        """If a 400 is about ``response_format``, step down the ladder and rewrite the request
        (now and for later calls)."""
        failure = response_failure(response)
        if failure is None:
            return False
        return self.formats.refused(request, failure.status, f"{failure.code or ''} {failure.detail}", json_mode,
                                    schema, self._target.describe())

    def _generate(self, request: dict[str, Any], json_mode: bool = False, schema: JsonSchema | None = None) -> Any:
        call = self._dashscope.Generation.call
        response = call(**request)
        while self._refused_format(request, response, json_mode, schema):
            response = call(**request)
        return _checked(response)

    async def _agenerate(self, aio: Any, request: dict[str, Any], json_mode: bool = False,
                         schema: JsonSchema | None = None) -> Any:
        response = await aio.call(**request)
        while self._refused_format(request, response, json_mode, schema):
            response = await aio.call(**request)
        return _checked(response)

    def _parse(self, response: Any) -> ChatResult:
        usage = getattr(response, "usage", None) or {}
        return ChatResult(
            text=_message_text(response), model=self.model,
            usage=metrics.count_tokens(self.model, TokenUsage(
                prompt_tokens=int(usage.get("input_tokens", 0) or 0),
                completion_tokens=int(usage.get("output_tokens", 0) or 0))),
            finish_reason=_finish_reason(response))


def _finish_reason(response: Any) -> str | None:
    output = _output(response)
    choices = output.get("choices") or []
    reason = choices[0].get("finish_reason") if choices else output.get("finish_reason")
    return None if reason in (None, "null", "") else str(reason)


def _message_text(response: Any) -> str:
    output = _output(response)
    choices = output.get("choices") or []
    if choices:
        message = choices[0].get("message") or {}
        content = message.get("content")
        if isinstance(content, list):  # multimodal-style [{"text": ...}]
            return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return str(content or "")
    return str(output.get("text") or "")


# ---------------------------------------------------------------------------------------------
# Rerank


class DashScopeReranker(_DashScopeBase):
    """``dashscope.TextReRank`` (gte-rerank, gte-rerank-v2, qwen3-rerank).

    Returns one relevance score per input document, in input order.
    """

    _kind = "reranker"

    def __init__(self, model: str = "gte-rerank", api_key: str | None = None,
                 timeout: float = 30.0, max_retries: int = 4, base_url: str | None = None, *,
                 retry_policy: RetryPolicy | None = None) -> None:
        super().__init__(model, api_key, base_url, timeout, max_retries, retry_policy)

    @property
    def name(self) -> str:
        return f"dashscope:{self.model}"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Scores aligned with ``documents`` (higher is more relevant)."""
        if not documents:
            return []
        request = self._request(query, documents)
        call = self._dashscope.TextReRank.call
        response = self._call(lambda: _checked(call(**request)))
        return aligned_scores(_output(response).get("results") or [], len(documents),
                              self._target)

    async def arerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Async twin of `rerank` (``AioTextReRank`` when available, else a thread)."""
        if not documents:
            return []
        aio = getattr(self._dashscope, "AioTextReRank", None)
        if aio is None:
            return await asyncio.to_thread(self.rerank, query, documents)
        request = self._request(query, documents)

        async def attempt() -> Any:
            return _checked(await aio.call(**request))

        response = await self._acall(attempt)
        return aligned_scores(_output(response).get("results") or [], len(documents),
                              self._target)

    def _request(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        return {**self._common_kwargs(), "model": self.model, "query": query,
                "documents": list(documents), "top_n": len(documents),
                "return_documents": False}
