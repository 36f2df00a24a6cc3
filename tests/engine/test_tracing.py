"""Issue 29 item 6, optional traces: with ``settings.traces`` a retrieval is a span with one child per stage and
every model request a span, through the OpenTelemetry API (an SDK with an in-memory exporter stands in for the
application's); off by default; no user id or text in any span."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the OpenTelemetry SDK (a test stand-in) is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from memoryscope_plugins import MemoryScope, tracing  # noqa: E402
from memoryscope_plugins.models.retry import CallTarget, Failure, RemoteFailure, RetryPolicy  # noqa: E402
from memoryscope_plugins.settings import Settings  # noqa: E402

SECRET_TEXT = "Anna hides the spare key under the blue flowerpot"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    yield exporter
    tracing.disable()


def test_a_retrieval_is_a_span_with_its_stages_in_order(spans, tmp_path, local_embedder):
    with MemoryScope(path=tmp_path / "m.db", embedder=local_embedder) as engine:
        engine.add("anna-private", SECRET_TEXT)
        engine.retrieve("anna-private", "Where is the spare key?", top_k=3)
    finished = spans.get_finished_spans()
    parent = next(s for s in finished if s.name == "memoryscope.retrieve")
    stages = [s for s in finished if s.name.startswith("memoryscope.retrieve.")]
    assert [s.name.rsplit(".", 1)[1] for s in stages] == ["parse", "embed", "search", "rank", "context"]
    assert all(s.parent is not None and s.parent.span_id == parent.context.span_id for s in stages)
    assert all(a.end_time <= b.start_time for a, b in zip(stages, stages[1:]))  # one after the other
    assert parent.start_time <= stages[0].start_time and stages[-1].end_time <= parent.end_time
    assert dict(parent.attributes) == {"memoryscope.top_k": 3}
    for span in finished:
        text = f"{span.name} {dict(span.attributes)} {[e.attributes for e in span.events]}"
        assert "anna" not in text and "flowerpot" not in text


def test_every_model_request_is_a_span_and_a_failed_one_says_only_its_type(spans):
    policy = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, sleep=lambda _s: None)
    left = [RemoteFailure(Failure("status", 503, detail=SECRET_TEXT))]

    def call():
        if left:
            raise left.pop()
        return "done"
    assert policy.call(call, classify=lambda e: None, target=CallTarget("openai-compatible embedder", "emb")) == "done"
    first, second = spans.get_finished_spans()
    assert first.name == second.name == "memoryscope.model_request"
    assert dict(first.attributes) == {"memoryscope.purpose": "embed", "memoryscope.model": "emb",
                                      "memoryscope.attempt": 1, "memoryscope.error": "RemoteFailure"}
    assert first.status.status_code == StatusCode.ERROR and not first.status.description and not first.events
    assert second.attributes["memoryscope.attempt"] == 2 and second.status.status_code != StatusCode.ERROR


def test_traces_are_off_by_default_and_turned_on_by_the_setting(tmp_path, local_embedder):
    tracing.disable()
    try:
        with MemoryScope(path=tmp_path / "a.db", embedder=local_embedder):
            assert not tracing.enabled()
        with MemoryScope(Settings(traces=True), path=tmp_path / "b.db", embedder=local_embedder):
            assert tracing.enabled()
    finally:
        tracing.disable()
