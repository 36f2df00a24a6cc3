"""The shared retry policy: decisions, delays, Retry-After parsing and error mapping."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest

from memoryscope_plugins.errors import ModelAuthError, ModelError, ModelNotFoundError
from memoryscope_plugins.models.retry import (
    CallTarget,
    Failure,
    RemoteFailure,
    RetryPolicy,
    error_text,
    parse_retry_after,
    redact,
)
from memoryscope_plugins.settings import is_local_url

TARGET = CallTarget(provider="test chat model", model="m1", base_url="https://example.test/v1",
                    secrets=("sk-very-secret-key",))


def status(http_status: int, **kwargs) -> RemoteFailure:
    return RemoteFailure(Failure("status", status=http_status, **kwargs))


class Flaky:
    """Raises the given exceptions in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"

    async def acall(self) -> str:
        return self()


def never_classify(exc: BaseException) -> Failure | None:
    return None


def classify_builtin(exc: BaseException) -> Failure | None:
    if isinstance(exc, TimeoutError):
        return Failure("timeout")
    if isinstance(exc, ConnectionError):
        return Failure("connection")
    return None


def recording_policy(**kwargs) -> tuple[RetryPolicy, list[float]]:
    slept: list[float] = []
    settings: dict[str, Any] = {"max_attempts": 4, "base_delay": 0.5, "max_delay": 4.0, "sleep": slept.append,
                    "rng": random.Random(7)}
    settings.update(kwargs)
    return RetryPolicy(**settings), slept


@pytest.mark.parametrize("code", [408, 409, 425, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(code):
    assert RetryPolicy().is_retryable(Failure("status", status=code))


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_non_retryable_statuses(code):
    assert not RetryPolicy().is_retryable(Failure("status", status=code))


def test_transport_failures_are_retryable():
    policy = RetryPolicy()
    assert policy.is_retryable(Failure("timeout")) and policy.is_retryable(Failure("connection"))


def test_full_jitter_stays_within_the_exponential_window():
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, rng=random.Random(1))
    for attempt, window in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 4.0)]:
        samples = [policy.delay(attempt) for _ in range(200)]
        assert all(0.0 <= s <= window for s in samples)
        assert max(samples) > window * 0.8  # really jittered over the whole window


def test_retry_after_is_honoured_and_capped():
    policy = RetryPolicy(max_retry_after=10.0)
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(1, retry_after=120.0) == 10.0
    assert policy.delay(5, retry_after=0.0) == 0.0


def test_call_retries_then_succeeds_with_recorded_waits():
    policy, slept = recording_policy()
    flaky = Flaky(status(503), status(429, retry_after=2.5), TimeoutError("slow"))
    assert policy.call(flaky, classify=classify_builtin, target=TARGET) == "ok"
    assert flaky.calls == 4
    assert len(slept) == 3 and slept[1] == 2.5
    assert 0 <= slept[0] <= 0.5 and 0 <= slept[2] <= 2.0


@pytest.mark.asyncio
async def test_acall_uses_the_same_policy():
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    policy = RetryPolicy(max_attempts=3, base_delay=0.01, async_sleep=record)
    flaky = Flaky(ConnectionError("reset"), status(500))
    assert await policy.acall(flaky.acall, classify=classify_builtin, target=TARGET) == "ok"
    assert flaky.calls == 3 and len(slept) == 2


def test_exhausted_attempts_raise_model_error_with_last_status():
    policy, slept = recording_policy(max_attempts=3)
    flaky = Flaky(status(500), status(502), status(503), status(504))
    with pytest.raises(ModelError) as caught:
        policy.call(flaky, classify=never_classify, target=TARGET)
    assert flaky.calls == 3 and len(slept) == 2
    message = str(caught.value)
    assert "3 attempts" in message and "last status 503" in message and "'m1'" in message
    assert type(caught.value) is ModelError


def test_exhausted_timeouts_name_the_failure_kind():
    policy, _ = recording_policy(max_attempts=2)
    with pytest.raises(ModelError, match="last error timeout"):
        policy.call(Flaky(TimeoutError(), TimeoutError()), classify=classify_builtin,
                    target=TARGET)


@pytest.mark.parametrize("code,error_type", [(400, ModelError), (401, ModelAuthError),
                                             (403, ModelAuthError), (404, ModelNotFoundError)])
def test_non_retryable_failures_raise_at_once(code, error_type):
    policy, slept = recording_policy()
    flaky = Flaky(status(code, detail="nope"))
    with pytest.raises(error_type):
        policy.call(flaky, classify=never_classify, target=TARGET)
    assert flaky.calls == 1 and slept == []


def test_unclassified_exceptions_propagate_unchanged():
    policy, slept = recording_policy()
    with pytest.raises(KeyError):
        policy.call(Flaky(KeyError("bug")), classify=never_classify, target=TARGET)
    assert slept == []


def test_max_attempts_one_disables_retries():
    policy = RetryPolicy.from_max_retries(0)
    assert policy.max_attempts == 1
    flaky = Flaky(status(503))
    with pytest.raises(ModelError, match="1 attempts"):
        policy.call(flaky, classify=never_classify, target=TARGET)
    assert RetryPolicy.from_max_retries(4).max_attempts == 5


def test_invalid_policy():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_error_messages_never_contain_the_key():
    policy, _ = recording_policy()
    failure = status(401, detail="Incorrect API key provided: sk-very-secret-key")
    with pytest.raises(ModelAuthError) as caught:
        policy.call(Flaky(failure), classify=never_classify, target=TARGET)
    assert "sk-very-secret-key" not in str(caught.value)
    assert "https://example.test/v1" in str(caught.value) and "m1" in str(caught.value)


def test_model_not_found_detected_in_400_text():
    policy, _ = recording_policy()
    with pytest.raises(ModelNotFoundError):
        policy.call(Flaky(status(400, code="InvalidParameter", detail="Model not exist.")),
                    classify=never_classify, target=TARGET)


def test_unsupported_parameter_is_not_model_not_found():
    policy, _ = recording_policy()
    with pytest.raises(ModelError) as caught:
        policy.call(Flaky(status(400, detail="max_tokens of model m1 is not supported")),
                    classify=never_classify, target=TARGET)
    assert type(caught.value) is ModelError


def test_parse_retry_after_forms():
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    future = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= parse_retry_after({"Retry-After": future}) <= 31
    past = format_datetime(datetime.now(timezone.utc) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"Retry-After": past}) == 0.0


def test_redact():
    assert redact("key sk-abc123def456 here") == "key sk-*** here"
    assert redact("token MYTOKEN99 x", ("MYTOKEN99",)) == "token *** x"
    assert "jina_" not in redact("bad jina_abcdefgh12345")


def test_error_text_shapes():
    assert error_text({"error": {"message": "m", "code": "c"}}) == ("c", "m")
    assert error_text({"code": "InvalidApiKey", "message": "bad"}) == ("InvalidApiKey", "bad")
    assert error_text({"detail": "oops"}) == (None, "oops")
    assert error_text({"error": "plain"}) == (None, "plain")
    assert error_text("raw text") == (None, "raw text")


def test_is_local_url():
    assert is_local_url("http://localhost:11434/v1")
    assert is_local_url("http://127.0.0.1:8000/v1")
    assert is_local_url("http://192.168.1.20:8080/v1")
    assert is_local_url("http://gpu-box.local:8000/v1")
    assert not is_local_url("https://api.openai.com/v1")
    assert not is_local_url(None)
