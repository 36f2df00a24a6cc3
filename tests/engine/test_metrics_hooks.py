"""Issue 29 item 6, the engine's side: what it reports to the metrics recorder (`memoryscope_plugins.metrics`),
with no metrics library installed by the engine itself: model requests from the retry policy by purpose,
model and outcome, tokens, retrieval stage timings, consolidation steps and leases."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryscope_plugins import metrics
from memoryscope_plugins.errors import ModelError
from memoryscope_plugins.models.retry import CallTarget, Failure, RemoteFailure, RetryPolicy
from tests.support.consolidation_helpers import OPENAI_CHAT, Reply, at, make_engine, user_msg


class Recording(metrics.Recorder):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def model_request(self, purpose, model, outcome, reason, seconds):
        assert seconds >= 0
        self.events.append(("request", purpose, model, outcome, reason))

    def model_tokens(self, purpose, model, prompt, completion):
        self.events.append(("tokens", purpose, model, prompt, completion))

    def retrieval(self, timings_ms):
        self.events.append(("retrieval", tuple(sorted(timings_ms))))

    def consolidation_step(self, outcome):
        self.events.append(("step", outcome))

    def lease(self, event):
        self.events.append(("lease", event))

    def store_error(self, component, error):
        self.events.append(("store_error", component, error))


@pytest.fixture
def recording():
    recorder = Recording()
    previous = metrics.install(recorder)
    yield recorder
    metrics.install(previous)


def failing(*failures: Failure):
    """A call failing with `failures` in turn, then answering "done"."""
    left = list(failures)

    def call():
        if left:
            raise RemoteFailure(left.pop(0))
        return "done"
    return call


POLICY = RetryPolicy(max_attempts=3, base_delay=0, max_delay=0, sleep=lambda _s: None)


def test_the_retry_policy_reports_every_request_with_its_purpose_and_outcome(recording):
    embedder = CallTarget("openai-compatible embedder", "emb-1")
    assert POLICY.call(failing(Failure("status", 503), Failure("timeout")), classify=lambda e: None,
                       target=embedder) == "done"
    with metrics.purpose("judge"):
        with pytest.raises(ModelError):
            POLICY.call(failing(Failure("status", 400)), classify=lambda e: None,
                        target=CallTarget("openai-compatible chat model", "chat-1"))
        with pytest.raises(KeyError):  # an error no client classifies: re-raised, counted as failed
            POLICY.call(lambda: {}["x"], classify=lambda e: None, target=CallTarget("http reranker", "rr"))
    with pytest.raises(ModelError):
        POLICY.call(failing(*[Failure("status", 429)] * 3), classify=lambda e: None,
                    target=CallTarget("dashscope reranker", "rr-2"))
    assert recording.events == [
        ("request", "embed", "emb-1", "retried", "http_5xx"), ("request", "embed", "emb-1", "retried", "timeout"),
        ("request", "embed", "emb-1", "ok", ""),
        ("request", "judge", "chat-1", "failed", "http_4xx"), ("request", "judge", "rr", "failed", "other"),
        ("request", "rerank", "rr-2", "retried", "http_429"), ("request", "rerank", "rr-2", "retried", "http_429"),
        ("request", "rerank", "rr-2", "failed", "http_429")]


async def test_the_async_retry_policy_reports_the_same(recording):
    async def once_then_fine(calls=[]):  # noqa: B006 - the call count, across attempts
        calls.append(1)
        if len(calls) == 1:
            raise RemoteFailure(Failure("connection"))
        return "done"
    policy = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, async_sleep=_no_wait)
    with metrics.purpose("chat"):
        answer = await policy.acall(once_then_fine, classify=lambda e: None, target=CallTarget("x embedder", "m"))
    assert answer == "done"
    assert recording.events == [("request", "chat", "m", "retried", "connection"), ("request", "chat", "m", "ok", "")]


async def _no_wait(_seconds: float) -> None:
    return None


def test_retrieval_reports_its_stage_timings(recording, engine):
    engine.add("anna", "Anna lives in Lisbon.")
    engine.retrieve("anna", "Where does Anna live?")
    assert recording.events == [("retrieval", ("context_ms", "embed_ms", "parse_ms", "rank_ms", "search_ms",
                                               "total_ms"))]


def test_consolidation_reports_steps_leases_and_tokens_by_operation(recording, tmp_path, server, brain,
                                                                     local_embedder):
    server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "boom"}})] * 2)  # 2 attempts: failed
    with make_engine(tmp_path, server, local_embedder) as engine:
        engine.record("anna", [user_msg("I moved to Lisbon in May.", at(2))])
        engine.consolidate("anna")  # the step fails: the model failed twice
        engine.consolidate("anna")  # the step commits
    events = recording.events
    assert events.count(("step", "failed")) == 1 and events.count(("step", "committed")) == 1
    assert events.count(("lease", "acquired")) == 2
    assert events[:3] == [("lease", "acquired"), ("request", "consolidate", "fake-llm", "retried", "http_5xx"),
                          ("request", "consolidate", "fake-llm", "failed", "http_5xx")]
    assert ("request", "consolidate", "fake-llm", "ok", "") in events
    assert any(e[:3] == ("tokens", "consolidate", "fake-llm") and e[3] > 0 for e in events)


def test_the_core_never_imports_prometheus_client():
    code = ("import sys, memoryscope_plugins.engine, memoryscope_plugins.metrics, memoryscope_plugins.models.retry; "
            "print('prometheus_client' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_failure_reasons_are_a_fixed_set():
    assert metrics.failure_reason("status", 429) == "http_429"
    assert metrics.failure_reason("status", 404) == "http_4xx"
    assert metrics.failure_reason("status", 502) == "http_5xx"
    assert metrics.failure_reason("timeout", None) == "timeout"
