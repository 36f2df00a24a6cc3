"""The CI rule of tests/support/ci_no_skips.py, run on a tiny project in a pytest subprocess: under
CI=true every kind of skip fails the run with its reason; without CI it is a plain skip."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SKIPPING = textwrap.dedent("""
    import pytest

    @pytest.fixture
    def server():
        pytest.skip("reason-from-a-fixture: the server could not start")

    def test_passes():
        pass

    def test_skips_inside():
        pytest.skip("reason-from-a-test: Chromium is not installed")

    @pytest.mark.skipif(True, reason="reason-from-a-mark: no PostgreSQL")
    def test_skipif():
        pass

    def test_fixture_skips(server):
        pass

    @pytest.mark.xfail(reason="expected to fail", strict=True)
    def test_xfail():
        assert False
""")

SKIPPING_MODULE = textwrap.dedent("""
    import pytest
    pytest.importorskip("a_module_nobody_has_1b7e", reason="reason-from-a-module: the extra is missing")

    def test_never_runs():
        pass
""")


def run_pytest(folder: Path, *, ci: str | None, ini: str = "") -> subprocess.CompletedProcess[str]:
    (folder / "pytest.ini").write_text("[pytest]\n" + ini, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci is not None:
        env["CI"] = ci
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugin under test: a fast, plain run
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.ci_no_skips", "-p", "no:cacheprovider",
                           "-rA", "--rootdir", str(folder), str(folder)],
                          check=False, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "test_skipping.py").write_text(SKIPPING, encoding="utf-8")
    return tmp_path


def test_without_ci_a_skip_is_a_skip(project):
    (project / "test_module.py").write_text(SKIPPING_MODULE, encoding="utf-8")
    run = run_pytest(project, ci=None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 4 skipped, 1 xfailed" in run.stdout
    assert run_pytest(project, ci="false").returncode == 0


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_every_skip_in_a_test_fails_with_its_reason(project, ci):
    run = run_pytest(project, ci=ci)
    assert run.returncode == 1, run.stdout + run.stderr
    # a skip in the test or its mark: failed; in a fixture: an error in setup; xfail is not a skip
    assert "1 failed, 1 passed, 1 xfailed, 2 errors" in run.stdout
    for reason in ("reason-from-a-test", "reason-from-a-mark", "reason-from-a-fixture"):
        assert reason in run.stdout
    assert "skipped under CI=true" in run.stdout


def test_under_ci_a_skipped_module_fails_the_run(tmp_path):
    (tmp_path / "test_module.py").write_text(SKIPPING_MODULE, encoding="utf-8")
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n", encoding="utf-8")
    run = run_pytest(tmp_path, ci="true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED (skipped under CI=true) test_module.py: reason-from-a-module" in run.stdout
    assert "1 passed" in run.stdout  # the other modules still ran
    assert run_pytest(tmp_path, ci=None).returncode == 0


def test_an_allowed_skip_needs_a_reason_and_stays_a_skip(project):
    allowed = "ci_allowed_skips =\n    test_skipping.py::test_skipif -- only meaningful on another platform\n"
    run = run_pytest(project, ci="true", ini=allowed)
    assert run.returncode == 1
    assert "1 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in run.stdout
    (project / "test_skipping.py").write_text(SKIPPING.replace('pytest.skip("reason-from-a-test', 'pass  # ("')
                                              .replace("(server)", "()"), encoding="utf-8")
    run = run_pytest(project, ci="true", ini=allowed)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed, 1 skipped, 1 xfailed" in run.stdout
    no_reason = run_pytest(project, ci="true", ini="ci_allowed_skips =\n    test_skipping.py::test_skipif\n")
    assert no_reason.returncode != 0 and "needs '<node id prefix> -- <reason>'" in no_reason.stderr
