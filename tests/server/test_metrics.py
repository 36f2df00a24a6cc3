"""Issue 29 item 6: /metrics of a real `serve` (admin key on the main port, no key on --metrics-port), in the
Prometheus text format, moving with records, retrievals and consolidation (a fake model at the HTTP boundary,
its first answer a 503), and holding no user id, memory text or key anywhere."""

from __future__ import annotations

import time

import httpx
import pytest

pytest.importorskip("prometheus_client", reason="the [server] extra is not installed")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply  # noqa: E402
from tests.support.server_harness import ServeProcess, free_port  # noqa: E402

USER = "anna-private-user"
SECRET_TEXT = "Anna hides the spare key under the blue flowerpot"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and sorted labels (parsing fails on anything not Prometheus text)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(scrape: dict, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in scrape.items() if n == name and set(labels.items()) <= set(ls))


def start_serve(tmp_path, model_server, *extra: str) -> ServeProcess:
    proc = ServeProcess(tmp_path, *extra)
    proc.env.update({"MEMORYSCOPE_LLM__PROVIDER": "openai", "MEMORYSCOPE_LLM__MODEL": "fake-chat",
                     "MEMORYSCOPE_LLM__BASE_URL": model_server.url + "/v1",
                     "MEMORYSCOPE_LLM__API_KEY": "sk-test-1234567",
                     "MEMORYSCOPE_CONSOLIDATION__EVERY_MESSAGES": "2",
                     "MEMORYSCOPE_CONSOLIDATION__EVERY_SECONDS": "0.5"})
    return proc


def scrape_until(get, done, timeout: float = 90.0) -> tuple[str, dict]:
    """Scrape until `done(samples)` (consolidation runs in the background), or fail with the last scrape."""
    deadline = time.monotonic() + timeout
    while True:
        text = get()
        found = samples(text)
        if done(found) or time.monotonic() > deadline:
            return text, found
        time.sleep(0.5)


def test_metrics_move_parse_and_name_no_user_text_or_key(tmp_path, server, brain):
    server.script(OPENAI_CHAT, [Reply(status=503, json={"error": {"message": "busy"}})])  # one retry, then brain
    metrics_port = free_port()
    proc = start_serve(tmp_path, server, "--metrics-port", str(metrics_port))
    admin = proc.create_key("acme", "--admin")
    tenant = proc.create_key("acme")
    proc.start()
    try:
        with httpx.Client(base_url=proc.url, headers={"X-API-Key": tenant}, timeout=60) as http:
            for i in range(3):
                answer = http.post(f"/v1/users/{USER}/record", json={"messages": [
                    {"role": "user", "content": f"{SECRET_TEXT} ({i})"},
                    {"role": "assistant", "content": "Noted."}]})
                assert answer.status_code == 201, answer.text
            for _ in range(4):
                assert http.post(f"/v1/users/{USER}/retrieve", json={"query": "Where is the key?"}).status_code == 200
            assert http.get(f"/v1/users/{USER}/memories/no-such-id").status_code == 404
            assert http.get("/v1/nowhere").status_code == 404
            assert http.get("/metrics").status_code == 403  # a key, but not an admin key
        assert httpx.get(proc.url + "/metrics").status_code == 401

        def main_port() -> str:
            answer = httpx.get(proc.url + "/metrics", headers={"Authorization": f"Bearer {admin}"}, timeout=30)
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
            return answer.text

        def consolidated(found: dict) -> bool:
            return (value(found, "memoryscope_consolidation_steps_total", outcome="committed") >= 1
                    and value(found, "memoryscope_pending_messages") == 0)

        text, found = scrape_until(main_port, consolidated)
        side = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30)  # no key on its own port
    finally:
        assert proc.stop() == 0
    assert side.status_code == 200 and {n for n, _ in samples(side.text)} >= {n for n, _ in found}

    records = value(found, "memoryscope_http_requests_total", route="/v1/users/{user}/record", method="POST",
                    status="201")
    assert records == 3
    assert value(found, "memoryscope_http_requests_total", route="/v1/users/{user}/retrieve", status="200") == 4
    assert value(found, "memoryscope_http_requests_total", route="/v1/users/{user}/memories/{memory_id:path}",
                 method="GET", status="404") == 1
    assert value(found, "memoryscope_http_requests_total", route="unmatched", status="404") == 1
    assert value(found, "memoryscope_http_requests_total", route="/metrics", status="401") == 1
    assert value(found, "memoryscope_http_request_duration_seconds_count", route="/v1/users/{user}/record") == 3
    for stage in ("parse", "embed", "search", "rank", "context", "total"):
        assert value(found, "memoryscope_retrieval_stage_seconds_count", stage=stage) >= 4, stage

    assert value(found, "memoryscope_model_requests_total", purpose="consolidate", model="fake-chat",
                 outcome="retried") == 1
    assert value(found, "memoryscope_model_request_failures_total", purpose="consolidate", reason="http_5xx") == 1
    assert value(found, "memoryscope_model_requests_total", model="fake-chat", outcome="ok") >= 1
    assert value(found, "memoryscope_model_tokens_total", model="fake-chat", kind="prompt") > 0
    assert value(found, "memoryscope_consolidation_leases_total", event="acquired") >= 1
    assert value(found, "memoryscope_store_up") == 1
    assert value(found, "memoryscope_users") == 1
    assert value(found, "memoryscope_messages") == 6 and value(found, "memoryscope_messages", state="done") >= 1
    assert value(found, "memoryscope_memories", type="turn", status="active") == 6

    for secret in (USER, SECRET_TEXT, "flowerpot", admin, tenant, "sk-test-1234567"):
        assert secret not in text and secret not in side.text


def test_multiprocess_mode_sums_the_files_of_every_process(tmp_path, server):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    proc = start_serve(tmp_path / "serve", server)
    proc.env["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    admin = proc.create_key("acme", "--admin")
    proc.start()
    try:
        with httpx.Client(base_url=proc.url, headers={"X-API-Key": admin}, timeout=60) as http:
            assert http.post("/v1/users/bob/retrieve", json={"query": "anything"}).status_code == 200
            text = http.get("/metrics").text
    finally:
        assert proc.stop() == 0
    found = samples(text)
    assert list(folder.glob("*.db"))  # the counters went to the files of PROMETHEUS_MULTIPROC_DIR
    assert value(found, "memoryscope_http_requests_total", route="/v1/users/{user}/retrieve", status="200") == 1
    assert value(found, "memoryscope_retrieval_stage_seconds_count", stage="total") == 1
    assert value(found, "memoryscope_store_up") == 1


def test_a_taken_metrics_port_stops_serve_with_a_message(tmp_path):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = ServeProcess(tmp_path, "--metrics-port", str(taken.getsockname()[1]))
        proc.create_key("acme", "--admin")
        done = proc.run_cli("--port", str(proc.port), "--metrics-port", str(taken.getsockname()[1]))
    assert done.returncode == 1
    assert "error: --metrics-port" in done.stderr and "Traceback" not in done.stderr
