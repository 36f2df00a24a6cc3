"""Model protocols: embedders, rerankers and chat models.

Every implementation takes plain strings and returns plain data, so the engine never depends on a
provider's SDK types. Sync methods are the implementation; the async twins default to running the
sync one in a worker thread, and clients with a native async SDK override them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator, Iterator, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

EmbedKind = Literal["document", "query"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    `name` identifies the vector space (provider + model + dimension); the store records it and
    re-embeds when it changes, so two embedders with the same name must produce the same vectors.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray: ...

    async def aembed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs; a higher score means more relevant."""

    @property
    def name(self) -> str: ...

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]: ...

    async def arerank(self, query: str, documents: Sequence[str]) -> list[float]: ...


@dataclass(slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __iadd__(self, other: "TokenUsage") -> "TokenUsage":
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        return self


@dataclass(slots=True)
class ChatResult:
    """One completion. ``finish_reason`` is the endpoint's ("stop", "length", ...) when it says."""

    text: str
    model: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None

    @property
    def truncated(self) -> bool:
        """True when the answer stopped at the token cap (its text is incomplete)."""
        return (self.finish_reason or "").lower() in TRUNCATED_REASONS


TRUNCATED_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
JsonSchema = dict  # a JSON schema for structured output


ChatMessages = Sequence[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]


@runtime_checkable
class ChatCompleter(Protocol):
    """The part of a `ChatModel` that structured output needs: one whole answer per call, sync and async
    (a wrapper that meters calls implements just this)."""

    @property
    def name(self) -> str: ...

    def chat(self, messages: ChatMessages, *, json_mode: bool = False,
             temperature: float | None = None, max_tokens: int | None = None) -> ChatResult: ...

    async def achat(self, messages: ChatMessages, *, json_mode: bool = False,
                    temperature: float | None = None, max_tokens: int | None = None) -> ChatResult: ...


@runtime_checkable
class ChatModel(ChatCompleter, Protocol):
    """A chat completion model. `json_mode` asks for a JSON object where the endpoint supports it.

    Our clients also take ``schema=`` (a JSON schema the answer must follow), sent the strongest
    way the endpoint accepts; a model without that keyword is asked with ``json_mode`` only.
    """

    def stream(self, messages: ChatMessages, *, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[str]: ...

    def astream(self, messages: ChatMessages, *, temperature: float | None = None,
                max_tokens: int | None = None) -> AsyncIterator[str]: ...


class ThreadedAsyncMixin:
    """Async twins that run the sync implementation in a worker thread (one implementation, two faces)."""

    async def aembed(self: Embedder, texts: Sequence[str], *, kind: EmbedKind = "document") -> np.ndarray:
        return await asyncio.to_thread(self.embed, texts, kind=kind)

    async def arerank(self: Reranker, query: str, documents: Sequence[str]) -> list[float]:
        return await asyncio.to_thread(self.rerank, query, documents)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
