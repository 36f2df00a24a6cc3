"""Embedder and chat model for any OpenAI-compatible endpoint, on the official `openai` package.

One class serves OpenAI, DashScope compatible mode, SiliconFlow, vLLM, Ollama (``/v1``) and the
llama.cpp server: only ``base_url`` (and the key) change. The SDK's own retries are switched off
and every call goes through `RetryPolicy`, so retries behave the same for every provider.

Sync methods use ``openai.OpenAI``; async methods use ``openai.AsyncOpenAI`` (one per event
loop). Request building and response parsing are shared between the two.
"""

from __future__ import annotations

import logging
import os
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypeVar
from urllib.parse import urlparse

import numpy as np

from .. import metrics
from ..errors import ConfigError, ModelError, ValidationError
from ..settings import is_local_url
from .base import ChatMessages, ChatResult, EmbedKind, JsonSchema, TokenUsage, l2_normalise
from .response_format import FormatLadder, StructuredMode, endpoint_key
from .retry import (
    CallTarget,
    Failure,
    LoopLocal,
    RetryPolicy,
    error_text,
    parse_retry_after,
    to_model_error,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")

LOCAL_PLACEHOLDER_KEY = "not-needed"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Hosts whose own key variable is used, and for which OPENAI_API_KEY is never sent.
_HOST_KEY_ENV = {
    "dashscope": "DASHSCOPE_API_KEY",
    "siliconflow": "SILICONFLOW_API_KEY",
}
# Dimensions of well-known embedding models, so `dim` needs no probe request.
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "text-embedding-v1": 1536,
    "text-embedding-v2": 1536,
    "text-embedding-v3": 1024,
    "text-embedding-v4": 1024,
}
_PROBE_TEXT = "dimension probe"


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the OpenAI-compatible models need the `openai` package: "
            "pip install 'memoryscope-plugins[openai]'") from exc
    return openai


def resolve_api_key(api_key: str | None, base_url: str | None) -> str:
    """The key to send: explicit > provider env var > ``OPENAI_API_KEY`` > local placeholder.

    ``OPENAI_API_KEY`` is never sent to a host that has its own variable (DashScope,
    SiliconFlow). A loopback / private-network endpoint with no key gets a placeholder, since
    Ollama, vLLM and llama.cpp do not check it; any other endpoint without a key is a
    `ConfigError`.
    """
    if api_key:
        return api_key
    host = (urlparse(base_url).hostname or "").lower() if base_url else "api.openai.com"
    for fragment, env_name in _HOST_KEY_ENV.items():
        if fragment in host:
            key = os.environ.get(env_name)
            if key:
                return key
            raise ConfigError(f"no API key for {base_url}: pass api_key= or set {env_name}")
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if is_local_url(base_url):
        return LOCAL_PLACEHOLDER_KEY
    raise ConfigError(
        f"no API key for {base_url or OPENAI_DEFAULT_BASE_URL}: pass api_key= or set OPENAI_API_KEY")


class _OpenAIClientBase:
    """Holds the sync client, the per-loop async clients, the target and the retry policy."""

    _kind = "model"

    def __init__(self, model: str, base_url: str | None, api_key: str | None, timeout: float,
                 max_retries: int, retry_policy: RetryPolicy | None) -> None:
        if not model:
            raise ConfigError("model name is required")
        self._openai = _import_openai()
        self.model = model
        self.base_url = base_url
        key = resolve_api_key(api_key, base_url)
        client_kwargs: dict[str, Any] = {
            "api_key": key, "base_url": base_url, "timeout": timeout, "max_retries": 0}
        self._client = self._openai.OpenAI(**client_kwargs)
        self._aclients: LoopLocal[Any] = LoopLocal(
            lambda: self._openai.AsyncOpenAI(**client_kwargs))
        self._policy = retry_policy or RetryPolicy.from_max_retries(max_retries)
        self._target = CallTarget(
            provider=f"openai-compatible {self._kind}", model=model,
            base_url=str(self._client.base_url).rstrip("/"), secrets=(key,))

    def _classify(self, exc: BaseException) -> Failure | None:
        """Turn an `openai` exception into a provider-neutral `Failure` (None: not ours)."""
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            return Failure("timeout")
        if isinstance(exc, openai.APIConnectionError):
            return Failure("connection")
        if isinstance(exc, openai.APIStatusError):
            code, message = error_text(exc.body)
            return Failure("status", status=exc.status_code, code=code or exc.code,
                           retry_after=parse_retry_after(exc.response.headers),
                           detail=message or str(exc.message))
        if isinstance(exc, openai.APIError):  # e.g. a response that fails validation
            return Failure("protocol", detail=str(getattr(exc, "message", "")))
        return None

    def _call(self, fn: Callable[[], T]) -> T:
        return self._policy.call(fn, classify=self._classify, target=self._target)

    async def _acall(self, fn: Callable[[], Awaitable[T]]) -> T:
        return await self._policy.acall(fn, classify=self._classify, target=self._target)

    def _stream_error(self, exc: Exception) -> Exception:
        """The error to raise when a stream breaks after it started (never retried)."""
        failure = self._classify(exc)
        if failure is None:
            return exc
        return to_model_error(failure, self._target)

    def close(self) -> None:
        """Close the sync HTTP client (async clients are closed with `aclose`)."""
        self._client.close()

    async def aclose(self) -> None:
        """Close the async HTTP client of the running event loop."""
        client = self._aclients.pop_current()
        if client is not None:
            await client.close()


# ---------------------------------------------------------------------------------------------
# Embeddings


class OpenAIEmbedder(_OpenAIClientBase):
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    Texts are sent in batches of ``batch_size``; the result keeps the input order and is an
    L2-normalised float32 array of shape ``(len(texts), dim)``. ``dim`` is ``dimensions`` when
    given, a known default for well-known models, or else discovered by embedding one probe text
    the first time it is needed. ``kind`` is accepted for the protocol; the OpenAI API has no
    query/document distinction.
    """

    _kind = "embedder"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 dimensions: int | None = None, batch_size: int = 64, timeout: float = 30.0,
                 max_retries: int = 4, *, retry_policy: RetryPolicy | None = None) -> None:
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        if dimensions is not None and dimensions < 1:
            raise ConfigError("dimensions must be >= 1")
        super().__init__(model, base_url, api_key, timeout, max_retries, retry_policy)
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._dim: int | None = dimensions or _KNOWN_DIMS.get(model)

    @property
    def dim(self) -> int:
        """Vector dimension (may embed one probe text on first access)."""
        if self._dim is None:
            self.embed([_PROBE_TEXT])
        assert self._dim is not None
        return self._dim

    @property
    def name(self) -> str:
        """Identity of the vector space, e.g. ``openai:text-embedding-3-small:1536``."""
        return f"openai:{self.model}:{self.dim}"

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """Embed ``texts`` (order preserved) into an ``(n, dim)`` float32 array."""
        batches = _batches(_clean_texts(texts), self.batch_size)
        if not batches:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._embed_batch(batch) for batch in batches]
        return self._finish(parts)

    async def aembed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        """Async twin of `embed`, on the SDK's async client."""
        batches = _batches(_clean_texts(texts), self.batch_size)
        if not batches:
            if self._dim is None:
                await self.aembed([_PROBE_TEXT])
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [await self._aembed_batch(batch) for batch in batches]
        return self._finish(parts)

    def _request(self, batch: list[str]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            request["dimensions"] = self.dimensions
        return request

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        request = self._request(batch)
        response = self._call(lambda: self._client.embeddings.create(**request))
        return self._parse(response, len(batch))

    async def _aembed_batch(self, batch: list[str]) -> np.ndarray:
        request = self._request(batch)
        client = self._aclients.get()
        response = await self._acall(lambda: client.embeddings.create(**request))
        return self._parse(response, len(batch))

    def _parse(self, response: Any, expected: int) -> np.ndarray:
        data = sorted(response.data or [], key=lambda item: item.index)
        if len(data) != expected:
            raise ModelError(f"{self._target.describe()}: asked for {expected} embeddings, "
                             f"got {len(data)}")
        return np.asarray([item.embedding for item in data], dtype=np.float32)

    def _finish(self, parts: list[np.ndarray]) -> np.ndarray:
        vectors = np.concatenate(parts, axis=0)
        self._check_dim(vectors.shape[1])
        return l2_normalise(vectors)

    def _check_dim(self, got: int) -> None:
        if self._dim is None:
            self._dim = got
        elif got != self._dim:
            raise ModelError(
                f"{self._target.describe()}: returned {got}-dimensional vectors, expected "
                f"{self._dim}; set dimensions= to what the model really produces")


def _clean_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValidationError("embed() takes a sequence of strings, not a single string")
    cleaned = []
    for text in texts:
        if not isinstance(text, str):
            raise ValidationError(f"embed() takes strings, got {type(text).__name__}")
        # Most endpoints reject empty inputs; a single space embeds as "nothing".
        cleaned.append(text if text.strip() else " ")
    return cleaned


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


# ---------------------------------------------------------------------------------------------
# Chat


class OpenAIChatModel(_OpenAIClientBase):
    """Chat completions from an OpenAI-compatible ``/chat/completions`` endpoint.

    ``schema=`` (with or without ``json_mode``) asks for structured output the strongest way the
    endpoint accepts (`FormatLadder`: a JSON schema, llama.cpp's schema grammar, plain JSON mode,
    or none), stepping down for good when the endpoint rejects one; ``json_mode=True`` alone
    sends ``{"type": "json_object"}``. ``extra_body`` is merged into every request (provider
    sampling options: ``{"enable_thinking": False}`` for Qwen3 on DashScope, ``{"top_k": 20}``
    for vLLM, ``{"repeat_penalty": 1.1}`` for llama.cpp). The answer's ``finish_reason`` is
    kept, so a reply cut off at ``max_tokens`` is known as such.
    """

    _kind = "chat model"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 4, temperature: float = 0.0,
                 max_tokens: int | None = None, extra_body: dict[str, Any] | None = None, *,
                 structured_output: StructuredMode = "auto",
                 retry_policy: RetryPolicy | None = None) -> None:
        super().__init__(model, base_url, api_key, timeout, max_retries, retry_policy)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self.formats = FormatLadder(structured_output, endpoint_key("openai", self._target.base_url, model))

    @property
    def json_mode_supported(self) -> bool:
        """False once the endpoint rejected plain JSON mode."""
        return self.formats.mode in ("json_schema", "json_object_schema", "json_object")

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def chat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
             max_tokens: int | None = None, schema: JsonSchema | None = None) -> ChatResult:
        """One completion; returns the text, the model that answered, the token usage and the
        finish reason."""
        request = self._request(messages, json_mode, temperature, max_tokens, stream=False, schema=schema)
        return self._parse(self._call(lambda: self._create(self._client, request, json_mode, schema)))

    async def achat(self, messages: ChatMessages, *, json_mode: bool = False, temperature: float | None = None,
                    max_tokens: int | None = None, schema: JsonSchema | None = None) -> ChatResult:
        """Async twin of `chat`, on the SDK's async client."""
        request = self._request(messages, json_mode, temperature, max_tokens, stream=False, schema=schema)
        client = self._aclients.get()
        return self._parse(await self._acall(lambda: self._acreate(client, request, json_mode, schema)))

    def stream(self, messages: ChatMessages, *, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[str]:
        """Yield the answer's text deltas as they arrive (the connection is retried, not a
        stream that already started)."""
        request = self._request(messages, False, temperature, max_tokens, stream=True)
        chunks = self._call(lambda: self._create(self._client, request))
        try:
            for chunk in chunks:
                text = _delta_text(chunk)
                if text:
                    yield text
        except Exception as exc:
            raise self._stream_error(exc) from None
        finally:
            chunks.close()

    async def astream(self, messages: ChatMessages, *, temperature: float | None = None,
                      max_tokens: int | None = None) -> AsyncIterator[str]:
        """Async twin of `stream`."""
        request = self._request(messages, False, temperature, max_tokens, stream=True)
        client = self._aclients.get()
        chunks = await self._acall(lambda: self._acreate(client, request))
        try:
            async for chunk in chunks:
                text = _delta_text(chunk)
                if text:
                    yield text
        except Exception as exc:
            raise self._stream_error(exc) from None
        finally:
            await chunks.close()

    # -- shared request building / parsing ----------------------------------------------------

    def _request(self, messages: ChatMessages, json_mode: bool, temperature: float | None,
                 max_tokens: int | None, *, stream: bool, schema: JsonSchema | None = None) -> dict[str, Any]:
        if not messages:
            raise ValidationError("chat() needs at least one message")
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
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
        if self.extra_body:
            request["extra_body"] = dict(self.extra_body)
        return request

    def _create(self, client: Any, request: dict[str, Any], json_mode: bool = False,
                schema: JsonSchema | None = None) -> Any:
        while True:
            try:
                return client.chat.completions.create(**request)
            except self._openai.APIStatusError as exc:
                if not self._refused_format(request, exc, json_mode, schema):
                    raise

    async def _acreate(self, client: Any, request: dict[str, Any], json_mode: bool = False,
                       schema: JsonSchema | None = None) -> Any:
        while True:
            try:
                return await client.chat.completions.create(**request)
            except self._openai.APIStatusError as exc:
                if not self._refused_format(request, exc, json_mode, schema):
                    raise

    def _refused_format(self, request: dict[str, Any], exc: Exception, json_mode: bool,
                        schema: JsonSchema | None) -> bool:
        """If the 400/422 is about ``response_format``, step down the ladder and rewrite the
        request (now and for later calls). False: the error is about something else."""
        code, message = error_text(getattr(exc, "body", None))
        text = f"{code or ''} {message} {getattr(exc, 'message', '')} {getattr(exc, 'param', '')} " \
               f"{getattr(exc, 'body', '')}"
        return self.formats.refused(request, getattr(exc, "status_code", None), text, json_mode, schema,
                                    self._target.describe())

    def _parse(self, completion: Any) -> ChatResult:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise ModelError(f"{self._target.describe()}: the response had no choices")
        message = choices[0].message
        text = (getattr(message, "content", None) or "") if message is not None else ""
        return ChatResult(text=text, model=getattr(completion, "model", None) or self.model,
                          usage=metrics.count_tokens(self.model, _usage(getattr(completion, "usage", None))),
                          finish_reason=getattr(choices[0], "finish_reason", None))


def _usage(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    return TokenUsage(prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                      completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0))


def _delta_text(chunk: Any) -> str:
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ""
    delta = getattr(choices[0], "delta", None)
    return (getattr(delta, "content", None) or "") if delta is not None else ""
