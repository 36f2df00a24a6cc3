"""Under ``CI=true`` a skipped test fails the run (loaded by tests/conftest.py).

A test skips when something it needs is missing here: PostgreSQL that cannot start, the
Elasticsearch emulator, Chromium, an optional framework. On a developer's machine that is a
skip with its reason. In CI, where ``.ci/run`` installs everything and starts the servers, the
same skip would mean the run quietly tested less, so it fails instead, with the skip reason:

- a skip while a test runs (``pytest.skip``, a ``skipif`` mark, a fixture that skips) becomes
  that test's failure;
- a skip while collecting a module (a module-level ``importorskip``) cannot become a test's
  failure (the module has no tests then); it is listed at the end and fails the run.

The exceptions are the ini option ``ci_allowed_skips``: one line per allowed skip,
``<node id or its prefix> -- <why it may skip in CI>``. The project's list is empty; keep it so
unless a test cannot run on the CI machine by nature, and say why in the line.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

SEPARATOR = " -- "
_TRUE = {"1", "true", "yes"}
_collection_skips = pytest.StashKey[list[tuple[str, str]]]()
_allowed = pytest.StashKey[list[tuple[str, str]]]()


def ci_is_on() -> bool:
    """Whether this run is CI (``CI`` set to true, 1 or yes, as CI services do)."""
    return os.environ.get("CI", "").strip().lower() in _TRUE


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("ci_allowed_skips", type="linelist", default=[],
                  help=f"skips allowed under CI=true: '<node id prefix>{SEPARATOR}<reason>' per line")


def pytest_configure(config: pytest.Config) -> None:
    allowed = []
    for line in config.getini("ci_allowed_skips"):
        prefix, _, reason = line.partition(SEPARATOR)
        if not prefix.strip() or not reason.strip():
            raise pytest.UsageError(f"ci_allowed_skips: {line!r} needs '<node id prefix>{SEPARATOR}<reason>'")
        allowed.append((prefix.strip(), reason.strip()))
    config.stash[_allowed] = allowed
    config.stash[_collection_skips] = []


def _is_allowed(config: pytest.Config, nodeid: str) -> bool:
    return any(nodeid == prefix or nodeid.startswith(prefix.rstrip(":/") + sep)
               for prefix, _ in config.stash.get(_allowed, []) for sep in ("::", "/", "["))


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and ci_is_on()
            and not _is_allowed(item.config, report.nodeid)):
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true, which fails the run (a CI machine must run every test): "
                           f"{_skip_reason(report)}")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if report.skipped and ci_is_on() and not _is_allowed(collector.config, report.nodeid):
        collector.config.stash[_collection_skips].append((report.nodeid, _skip_reason(report)))
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    skips = config.stash.get(_collection_skips, [])
    if skips:
        terminalreporter.section("skipped modules fail under CI=true", sep="=", red=True, bold=True)
        for nodeid, reason in skips:
            terminalreporter.line(f"FAILED (skipped under CI=true) {nodeid}: {reason}", red=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_collection_skips, []) and exitstatus in (pytest.ExitCode.OK,
                                                                          pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
