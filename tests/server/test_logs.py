"""Issue 29 item 5: no INFO line from any library without -v (a real `serve` over embedded PostgreSQL, whose
pool logs three INFO lines per store call), ``--log-format json`` with the request id on server lines, and
no memory text, user id or key in any line."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import time
from typing import Iterator

import httpx
import pytest

from memoryscope_plugins.log_format import JsonFormatter, TextFormatter, configure_logging, current_request_id
from memoryscope_plugins.log_hygiene import SDK_LOGGERS, quiet_sdk_loggers
from tests.support.server_harness import ServeProcess

SECRET_TEXT = "Anna hides the spare key under the blue flowerpot"
USER = "anna-private-user"


@pytest.fixture(autouse=True)
def _sdk_loggers_unset():
    saved = {name: logging.getLogger(name).level for name in SDK_LOGGERS}
    root = logging.getLogger().level
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger().setLevel(root)


def test_sdk_loggers_follow_a_quiet_root():
    logging.getLogger("psycopg").setLevel(logging.NOTSET)
    logging.getLogger("openai").setLevel(logging.ERROR)  # the application's own choice
    logging.getLogger().setLevel(logging.WARNING)
    quiet_sdk_loggers(False)
    assert not logging.getLogger("psycopg.pool").isEnabledFor(logging.INFO)
    assert logging.getLogger("openai").level == logging.ERROR
    logging.getLogger().setLevel(logging.DEBUG)  # -v -v of an application: SDK loggers still above DEBUG
    quiet_sdk_loggers(False)
    assert logging.getLogger("psycopg").level == logging.INFO
    logging.getLogger().setLevel(logging.INFO)  # -v: their INFO lines are wanted
    quiet_sdk_loggers(False)
    assert logging.getLogger("httpx").isEnabledFor(logging.INFO)


def test_json_lines_carry_the_request_id_and_only_the_type_of_an_exception():
    formatter = JsonFormatter()
    record = logging.LogRecord("memoryscope_plugins.x", logging.WARNING, __file__, 1, "step failed (%s)",
                               ("ModelError",), None)
    assert "request_id" not in json.loads(formatter.format(record))
    token = current_request_id.set("abc123")
    try:
        try:
            raise ValueError(SECRET_TEXT)
        except ValueError:
            record.exc_info = sys.exc_info()
        line = json.loads(formatter.format(record))
    finally:
        current_request_id.reset(token)
    assert line["request_id"] == "abc123" and line["level"] == "WARNING" and line["error"] == "ValueError"
    assert line["message"] == "step failed (ModelError)" and SECRET_TEXT not in json.dumps(line)


def test_text_lines_name_an_exception_by_its_type_and_give_its_traceback_only_when_asked():
    record = logging.LogRecord("elastic_transport", logging.WARNING, __file__, 1, "retrying (attempt %d)", (1,), None)
    try:
        raise ConnectionError(SECRET_TEXT)
    except ConnectionError:
        record.exc_info = sys.exc_info()
    assert TextFormatter(tracebacks=False).format(record) == "WARNING elastic_transport: retrying (attempt 1) " \
                                                             "(ConnectionError)"
    verbose = TextFormatter(tracebacks=True).format(record)
    assert "Traceback (most recent call last)" in verbose and SECRET_TEXT in verbose


@contextlib.contextmanager
def stderr_log(monkeypatch) -> Iterator[io.StringIO]:
    """Standard error as a StringIO, with no handler on the root logger meanwhile (so `configure_logging`
    installs its own; inside the test, as pytest adds its capturing handlers between setup and call)."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    handlers = root.handlers[:]
    root.handlers = []
    try:
        yield stream
    finally:
        root.handlers = handlers


def test_without_v_the_client_libraries_log_errors_only(monkeypatch):
    with stderr_log(monkeypatch) as stream:
        configure_logging(False, "text")
        logging.getLogger("elastic_transport.transport").warning("Retrying request after failure")
        logging.getLogger("psycopg.pool").warning("error connecting")
        logging.getLogger("memoryscope_plugins.test").warning("ours")
        logging.getLogger("urllib3").error("a library's error")
        quiet_sdk_loggers(False)  # an engine starting afterwards keeps the CLI's choice
        logging.getLogger("openai").warning("retrying")
    assert stream.getvalue().splitlines() == ["WARNING memoryscope_plugins.test: ours",
                                              "ERROR urllib3: a library's error"]


def test_configure_logging_writes_json_to_stderr(monkeypatch):
    with stderr_log(monkeypatch) as stream:
        configure_logging(False, "json")
        logging.getLogger("memoryscope_plugins.test").warning("hello %s", "there")
        logging.getLogger("memoryscope_plugins.test").info("not without -v")
    [line] = stream.getvalue().splitlines()
    assert json.loads(line)["message"] == "hello there"
    with pytest.raises(ValueError):
        configure_logging(False, "xml")


@pytest.fixture(scope="module")
def pg_dsn(postgres):
    return postgres.create_database("logs")


def serve_on_postgres(folder, dsn: str, *global_options: str) -> ServeProcess:
    srv = ServeProcess(folder)
    srv.env.update({"MEMORYSCOPE_STORE__BACKEND": "postgres", "MEMORYSCOPE_STORE__URL": dsn})
    srv.cli = [sys.executable, "-m", "memoryscope_plugins", *global_options, "serve", "--keys", str(srv.keys_file)]
    return srv


def use_the_service(srv: ServeProcess, key: str) -> None:
    headers = {"X-API-Key": key}
    with httpx.Client(base_url=srv.url, timeout=60) as client:
        added = client.post(f"/v1/users/{USER}/memories", headers=headers, json={"content": SECRET_TEXT})
        assert added.status_code == 201
        assert client.post(f"/v1/users/{USER}/record", headers=headers,
                           json={"messages": [{"role": "user", "content": SECRET_TEXT}]}).status_code == 201
        found = client.post(f"/v1/users/{USER}/retrieve", headers=headers, json={"query": "flowerpot"})
        assert found.status_code == 200
        assert client.get("/v1/users", headers={"X-API-Key": "msk_not-a-key"}).status_code == 401


def test_serve_on_postgres_logs_no_info_line_without_v(tmp_path, pg_dsn):
    srv = serve_on_postgres(tmp_path, pg_dsn)
    key = srv.create_key("acme", "--admin")
    srv.start()
    try:
        use_the_service(srv, key)
    finally:
        assert srv.stop() == 0
    text = srv.log_text()
    assert "INFO" not in text and "psycopg" not in text, text[-2000:]


def test_serve_json_logs_name_the_request_and_hold_no_text_user_or_key(tmp_path, pg_dsn):
    srv = serve_on_postgres(tmp_path, pg_dsn, "--log-format", "json", "-v")
    key = srv.create_key("acme", "--admin")
    srv.start()
    try:
        use_the_service(srv, key)
        # a key file that cannot be parsed is noticed on the next request (at most once a second) and logged
        srv.keys_file.write_text("{not json", encoding="utf-8")
        deadline = time.monotonic() + 60
        while "key file could not be read" not in srv.log_text():
            assert time.monotonic() < deadline, srv.log_text()[-2000:]
            httpx.get(srv.url + "/v1/users", headers={"X-API-Key": key}, timeout=60)
            time.sleep(0.3)
    finally:
        assert srv.stop() == 0
    text = srv.log_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(line["level"] == "INFO" for line in lines)  # -v: INFO lines, as JSON
    warnings = [line for line in lines if "key file could not be read" in line["message"]]
    assert warnings and all(len(line["request_id"]) == 16 for line in warnings)
    for secret in (SECRET_TEXT, "flowerpot", USER, key, "msk_not-a-key"):
        assert secret not in text


def test_worker_json_logs_name_users_by_reference_only(tmp_path, server):
    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.log_hygiene import user_ref
    from tests.support.fakes.fake_model_server import OPENAI_CHAT, Reply
    user = "anna@example.com"
    config = tmp_path / "settings.yaml"
    config.write_text(f"store: {{path: '{tmp_path / 'memory.db'}'}}\n"
                      f"llm: {{provider: openai, model: m, base_url: '{server.url}/v1', api_key: sk-test, "
                      "max_retries: 0}\nconsolidation: {worker: none, max_attempts: 1}\n", encoding="utf-8")
    with MemoryScope(str(config)) as engine:
        engine.record(user, [{"role": "user", "content": SECRET_TEXT}])
    server.script(OPENAI_CHAT, [Reply(status=500, json={"error": {"message": "boom"}})] * 20)
    done = subprocess.run([sys.executable, "-m", "memoryscope_plugins", "--config", str(config), "--log-format",
                           "json", "worker", "--once"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MEMORYSCOPE_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert any(user_ref(user) in line["message"] for line in lines if line["level"] == "WARNING"), done.stderr
    assert user not in done.stderr and SECRET_TEXT not in done.stderr and "sk-test" not in done.stderr
