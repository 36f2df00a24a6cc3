"""What the engine counts, for whoever watches it: the few places it reports to a `Recorder`.

The engine reports model calls (through `models.retry`, the one place every remote model request
passes), their tokens, the timings of every retrieval, consolidation steps, lease events and store
errors. The recorder installed by default does nothing; ``serve`` and ``worker`` install one backed
by prometheus-client (`server.metrics`), so the core install needs no metrics library and the
engine never imports the server.

Labels are bounded by construction: a purpose is one of the names the code passes to `purpose`
(or the kind of client), a model is a configured model name, the rest are fixed words. No user id,
text or key is ever passed to a recorder.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    from .models.base import TokenUsage

# what a model call was for, when the caller said so ("consolidate", "judge", "reflect", "chat")
_PURPOSE: contextvars.ContextVar[str | None] = contextvars.ContextVar("memoryscope_model_purpose", default=None)


class Recorder:
    """Receives what the engine counts. Every method does nothing here: subclass and `install` it.
    Methods are called on the engine's threads and must not raise."""

    def model_request(self, purpose: str, model: str, outcome: str, reason: str, seconds: float) -> None:
        """One request sent to a remote model: ``outcome`` is ``ok``, ``retried`` (failed, tried again)
        or ``failed`` (failed, given up); ``reason`` is "" for ``ok``, else `failure_reason`'s word."""

    def model_tokens(self, purpose: str, model: str, prompt: int, completion: int) -> None:
        """Tokens one chat completion used."""

    def retrieval(self, timings_ms: Mapping[str, float]) -> None:
        """The stage timings of one retrieval (``parse_ms``, ``embed_ms``, ..., ``total_ms``)."""

    def consolidation_step(self, outcome: str) -> None:
        """One consolidation step ended: ``committed``, ``failed``, ``lease_lost``, ``gone``
        (its messages were deleted meanwhile), ``store_error`` or ``abandoned`` (outlived stop)."""

    def lease(self, event: str) -> None:
        """A consolidation lease event: ``acquired``, ``busy`` (another worker holds it) or ``lost``
        (taken over while a step ran)."""

    def store_error(self, component: str, error: str) -> None:
        """A store failure seen by ``component`` (``api``, ``consolidation``); ``error`` is its class name."""

    def replica_state(self, standby: str, state: str) -> None:
        """A read standby (its number in ``store.read_urls``) changed state: ``ok`` (read from),
        ``down``, ``lagging`` or ``not_standby`` (skipped: reads go elsewhere)."""

    def routed_read(self, served_by: str, reason: str) -> None:
        """A read that may go to a standby (``store.read_urls``) was served by ``standby`` (reason
        "") or by ``primary``, because: ``no_standby`` (none healthy), ``not_replayed`` (the standby
        had not replayed this process's last write of the user), ``behind_index`` (it was behind
        the user's in-process search index), ``standby_failed`` (it could not be reached during the
        read), ``recovery_conflict`` (replay cancelled the read) or ``standby_error`` (another error,
        e.g. a table it has not replayed yet)."""


_recorder: Recorder = Recorder()


def install(recorder: Recorder) -> Recorder:
    """Make `recorder` receive what this process counts; returns the one it replaces."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def recorder() -> Recorder:
    """The recorder in force (a no-op one unless something was installed)."""
    return _recorder


@contextlib.contextmanager
def purpose(name: str) -> Iterator[None]:
    """Label the model calls made inside this block (in this thread or task) with ``name``."""
    token = _PURPOSE.set(name)
    try:
        yield
    finally:
        _PURPOSE.reset(token)


def current_purpose(default: str) -> str:
    """The purpose set by the innermost `purpose` block, else ``default``."""
    return _PURPOSE.get() or default


def count_tokens(model: str, usage: TokenUsage) -> TokenUsage:
    """Report the tokens of one chat completion (under the current purpose); returns `usage`."""
    _recorder.model_tokens(current_purpose("chat"), model, usage.prompt_tokens, usage.completion_tokens)
    return usage


def purpose_of_client(provider: str) -> str:
    """A default purpose from a client's description ("openai-compatible embedder" -> "embed")."""
    if provider.endswith("embedder"):
        return "embed"
    if provider.endswith("reranker"):
        return "rerank"
    return "chat"


def failure_reason(kind: str, status: int | None) -> str:
    """A bounded label for a failed request: ``timeout``, ``connection``, ``protocol``, ``http_429``,
    ``http_4xx`` or ``http_5xx`` (``other``: an error no client classified)."""
    if kind != "status" or status is None:
        return kind
    if status == 429:
        return "http_429"
    return "http_5xx" if status >= 500 else "http_4xx"
