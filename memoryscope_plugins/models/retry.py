"""One retry policy for every remote model client, plus the error mapping they share.

Every client (OpenAI-compatible, DashScope SDK, HTTP rerank) turns a failed attempt into a
`Failure` (HTTP status or transport problem, plus any `Retry-After` hint) through its own small
classifier; `RetryPolicy` then decides the same way for all of them:

* retried: timeouts, connection errors, HTTP 408 / 409 / 425 / 429 and every 5xx;
* not retried: every other status (400, 401, 403, 404, 422, ...);
* the wait before attempt *n* is full jitter, ``uniform(0, min(max_delay, base_delay * 2**n))``,
  unless the server sent ``Retry-After`` (or ``retry-after-ms``), which is honoured up to
  ``max_retry_after`` seconds.

The final error is always a `ModelError` (or `ModelAuthError` / `ModelNotFoundError`) whose
message names the provider, model and base URL, and the last status, but never the API key.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Generic, Literal, Mapping, TypeVar

from .. import metrics, tracing
from ..errors import ModelAuthError, ModelError, ModelNotFoundError

logger = logging.getLogger(__name__)

T = TypeVar("T")
FailureKind = Literal["status", "timeout", "connection", "protocol"]

RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 409, 425, 429})
_MAX_DETAIL_CHARS = 300
_MODEL_NOT_FOUND_RE = re.compile(
    r"model[_ ]not[_ ]found|model\b.{0,80}\b(does not exist|not exist|not found)|no such model|"
    r"unknown model|invalid model",
    re.IGNORECASE,
)


@dataclass(slots=True)
class Failure:
    """What went wrong in one attempt, independent of the SDK that reported it.

    ``kind`` is ``status`` (an HTTP error status), ``timeout``, ``connection``, or ``protocol``
    (a response the SDK could not understand; never retried).
    """

    kind: FailureKind
    status: int | None = None
    retry_after: float | None = None
    code: str | None = None
    detail: str = ""

    def label(self) -> str:
        """A short, key-free description such as ``HTTP 429`` or ``timeout``."""
        if self.kind == "status":
            return f"HTTP {self.status}" + (f" [{self.code}]" if self.code else "")
        return self.kind


class RemoteFailure(Exception):
    """Raised inside an attempt by clients whose SDK reports errors as values (e.g. DashScope)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.label())
        self.failure = failure


Classifier = Callable[[BaseException], "Failure | None"]


@dataclass(frozen=True, slots=True)
class CallTarget:
    """Who is being called; used only to build log lines and error messages."""

    provider: str
    model: str
    base_url: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.provider} '{self.model}'{where}"

    def redact(self, text: str) -> str:
        """Remove the API key (and anything that looks like one) from provider text."""
        return redact(text, self.secrets)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, shared by sync and async calls.

    Args:
        max_attempts: total attempts including the first (1 disables retries).
        base_delay: seconds; the cap of the first backoff window.
        max_delay: seconds; the largest backoff window.
        max_retry_after: seconds; the longest server-requested ``Retry-After`` that is honoured.
        sleep / async_sleep: injectable for tests.
    """

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    async_sleep: Callable[[float], Awaitable[None]] = field(
        default=asyncio.sleep, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)
    # A server that handles one request at a time (llama.cpp, Ollama on a laptop) keeps working on
    # a request the client gave up on: retrying a timeout there queues a duplicate job behind it.
    retry_timeouts: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("delays must be >= 0")

    @classmethod
    def from_max_retries(cls, max_retries: int, **overrides: Any) -> "RetryPolicy":
        """The policy for a client configured with ``max_retries`` retries after the first try."""
        return cls(max_attempts=max(0, int(max_retries)) + 1, **overrides)

    def is_retryable(self, failure: Failure) -> bool:
        if failure.kind == "timeout":
            return self.retry_timeouts
        if failure.kind == "connection":
            return True
        status = failure.status or 0
        return status in RETRYABLE_STATUSES or 500 <= status <= 599

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        window = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return self.rng.uniform(0.0, window)

    def call(self, fn: Callable[[], T], *, classify: Classifier, target: CallTarget) -> T:
        """Run ``fn`` until it succeeds, a non-retryable failure occurs, or attempts run out."""
        attempt = 0
        purpose = metrics.current_purpose(metrics.purpose_of_client(target.provider))
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                with tracing.span("memoryscope.model_request", _span_attributes(purpose, target, attempt)):
                    result = fn()
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised if unknown
                wait = self._after_failure(exc, attempt, classify, target, _Timing(purpose, started))
            else:
                _report(purpose, target, "ok", "", started)
                return result
            self.sleep(wait)

    async def acall(self, fn: Callable[[], Awaitable[T]], *, classify: Classifier,
                    target: CallTarget) -> T:
        """Async twin of `call`, with the same decisions and delays."""
        attempt = 0
        purpose = metrics.current_purpose(metrics.purpose_of_client(target.provider))
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                with tracing.span("memoryscope.model_request", _span_attributes(purpose, target, attempt)):
                    result = await fn()
            except Exception as exc:  # noqa: BLE001
                wait = self._after_failure(exc, attempt, classify, target, _Timing(purpose, started))
            else:
                _report(purpose, target, "ok", "", started)
                return result
            await self.async_sleep(wait)

    def _after_failure(self, exc: Exception, attempt: int, classify: Classifier,
                       target: CallTarget, timing: _Timing) -> float:
        """Return how long to wait before retrying, or raise the final error."""
        failure = exc.failure if isinstance(exc, RemoteFailure) else classify(exc)
        if failure is None:
            _report(timing.purpose, target, "failed", "other", timing.started)
            raise exc
        reason = metrics.failure_reason(failure.kind, failure.status)
        if not self.is_retryable(failure):
            logger.debug("%s failed with %s; not retrying", target.describe(), failure.label())
            _report(timing.purpose, target, "failed", reason, timing.started)
            raise _counted(to_model_error(failure, target), attempt) from None  # the SDK error may hold a key
        if attempt >= self.max_attempts:
            logger.debug("%s failed with %s; giving up after %d attempts",
                         target.describe(), failure.label(), attempt)
            _report(timing.purpose, target, "failed", reason, timing.started)
            raise _counted(exhausted_error(failure, target, attempt), attempt) from None
        _report(timing.purpose, target, "retried", reason, timing.started)
        wait = self.delay(attempt, failure.retry_after)
        logger.debug("%s failed with %s; retry %d/%d in %.3fs", target.describe(),
                     failure.label(), attempt, self.max_attempts - 1, wait)
        return wait


@dataclass(frozen=True, slots=True)
class _Timing:
    """The purpose of a call and when its current attempt started (for the metrics recorder)."""

    purpose: str
    started: float


def _span_attributes(purpose: str, target: CallTarget, attempt: int) -> dict[str, Any]:
    return {"memoryscope.purpose": purpose, "memoryscope.model": target.model, "memoryscope.attempt": attempt}


def _report(purpose: str, target: CallTarget, outcome: str, reason: str, started: float) -> None:
    metrics.recorder().model_request(purpose, target.model, outcome, reason, time.perf_counter() - started)


def _counted(error: ModelError, attempts: int) -> ModelError:
    """Note on the final error how many requests were really sent (their cost is real)."""
    error.attempts = attempts
    return error


# ---------------------------------------------------------------------------------------------
# Error mapping


def to_model_error(failure: Failure, target: CallTarget) -> ModelError:
    """Map a non-retryable failure to the library's error types (never including the key)."""
    detail = _detail(failure, target)
    if failure.kind == "status" and failure.status in (401, 403):
        return ModelAuthError(
            f"{target.describe()}: authentication failed ({failure.label()}); "
            f"check the API key configured for this endpoint{detail}")
    if is_model_not_found(failure):
        return ModelNotFoundError(
            f"{target.describe()}: model not found ({failure.label()}); check the model name "
            f"and that the base URL is right (e.g. ends in /v1){detail}")
    return ModelError(f"{target.describe()}: request failed ({failure.label()}){detail}")


def exhausted_error(failure: Failure, target: CallTarget, attempts: int) -> ModelError:
    """The error raised when every attempt failed with a retryable failure."""
    last = (f"last status {failure.status}" if failure.kind == "status"
            else f"last error {failure.kind}")
    return ModelError(f"{target.describe()}: gave up after {attempts} attempts "
                      f"({last}){_detail(failure, target)}")


def is_model_not_found(failure: Failure) -> bool:
    if failure.kind != "status":
        return False
    if failure.status == 404:
        return True
    text = f"{failure.code or ''} {failure.detail}"
    return failure.status in (400, 422) and bool(_MODEL_NOT_FOUND_RE.search(text))


def _detail(failure: Failure, target: CallTarget) -> str:
    # the provider's words help ("Incorrect API key provided"), but its body may echo a key or the
    # request (memory text): keys are redacted, quoted passages dropped, one line, 300 characters
    text = target.redact(failure.detail or "")
    text = _QUOTED_RE.sub("<…>", " ".join(text.split())).strip()
    if not text:
        return ""
    if len(text) > _MAX_DETAIL_CHARS:
        text = text[:_MAX_DETAIL_CHARS] + "..."
    return f": {text}"


_QUOTED_RE = re.compile(r"\"[^\"]{16,}\"|'[^']{16,}'|`[^`]{16,}`|“[^”]{16,}”")
_KEYLIKE_RE = re.compile(r"\b(sk|ak|key|jina)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Replace every given secret, and key-shaped tokens (``sk-...``), with ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEYLIKE_RE.sub(lambda m: m.group(1) + "-***", text)


# ---------------------------------------------------------------------------------------------
# Header helpers


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def error_text(body: object) -> tuple[str | None, str]:
    """Pull ``(code, message)`` out of a typical JSON error body (OpenAI, DashScope, vLLM...)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, str):
            return None, inner
        if isinstance(inner, dict):
            code = inner.get("code") or inner.get("type")
            message = inner.get("message") or inner.get("msg") or inner.get("detail") or ""
            return (str(code) if code is not None else None), str(message)
        return None, str(inner)
    if body is None:
        return None, ""
    return None, str(body)


# ---------------------------------------------------------------------------------------------
# Per-event-loop async clients


class LoopLocal(Generic[T]):
    """One lazily built object per running event loop (async HTTP clients are loop-bound)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T]" = (
            weakref.WeakKeyDictionary())

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        item = self._items.get(loop)
        if item is None:
            item = self._factory()
            self._items[loop] = item
        return item

    def pop_current(self) -> T | None:
        """Forget (and return) the current loop's object, e.g. to close it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self._items.pop(loop, None)
