"""Shared fixtures: a real engine on a temporary embedded store with the real local embedder.

The local ONNX model is loaded once per test session (it is the slow part) and shared by engines.
"""

from __future__ import annotations

import os

import pytest

# Tests never read the user's real settings or home folder.
os.environ.pop("MEMORYSCOPE_CONFIG", None)
for key in list(os.environ):
    if key.startswith("MEMORYSCOPE_") and key != "MEMORYSCOPE_TEST_ES_URL":
        os.environ.pop(key)

# under CI=true a skipped test fails the run (see support/ci_no_skips.py)
from tests.support.ci_no_skips import (  # noqa: F401
    pytest_addoption,
    pytest_configure,
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)


@pytest.fixture(scope="session")
def local_embedder():
    from memoryscope_plugins.models.local_onnx import LocalOnnxEmbedder
    return LocalOnnxEmbedder()


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYSCOPE_HOME", str(tmp_path / "home"))


@pytest.fixture(autouse=True)
def _fresh_endpoint_refusals():
    """Each test starts with no remembered structured-output refusals (a fake server's port may be reused)."""
    from memoryscope_plugins.models.response_format import forget_refusals
    forget_refusals()
    yield
    forget_refusals()


@pytest.fixture
def engine(tmp_path, local_embedder):
    from memoryscope_plugins import MemoryScope
    memory = MemoryScope(path=tmp_path / "memory.db", embedder=local_embedder)
    yield memory
    memory.close()


@pytest.fixture
def server():
    """A local fake of the remote model APIs (OpenAI-compatible and DashScope), one per test."""
    from tests.support.fakes.fake_model_server import FakeModelServer
    with FakeModelServer() as fake:
        yield fake


@pytest.fixture
def brain(server):
    """The fake chat model answering `server`'s OpenAI-compatible chat endpoint."""
    from tests.support.consolidation_helpers import Brain
    from tests.support.fakes.fake_model_server import OPENAI_CHAT
    fake_llm = Brain()
    server.route(OPENAI_CHAT, fake_llm)
    return fake_llm


@pytest.fixture(scope="module")
def postgres():
    """A throw-away embedded PostgreSQL server for one test module (`create_database(name)` gives a DSN);
    skipped where it cannot start, which under CI=true fails the run."""
    from tests.support import servers
    try:
        with servers.postgres_server() as server:
            yield server
    except servers.ServerUnavailable as exc:
        pytest.skip(f"embedded PostgreSQL could not start here: {exc}")
