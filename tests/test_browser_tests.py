"""Without a browser, the browser tests skip with one line saying how to install one (or, with
CI set, fail with it): a fresh machine running the README's test command is told what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from chromium_support import BROWSER_MISSING

ROOT = Path(__file__).resolve().parent.parent
BROWSER_TESTS = ["tests/test_report_html.py::test_chromium_runs_the_report_script_and_no_payload",
                 "tests/test_report_html.py::test_chromium_filters_from_the_url_fragment"]


def pytest_without_a_browser(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    no_browser = tmp_path / "bin"  # PATH holds nothing, so no chromium either
    no_browser.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    environment.update(PATH=str(no_browser), PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *BROWSER_TESTS],
        capture_output=True, text=True, timeout=300, env=environment, cwd=ROOT)


def test_without_a_browser_the_browser_tests_skip_with_one_line_saying_how_to_install_it(
        tmp_path):
    done = pytest_without_a_browser(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 skipped" in done.stdout
    [line] = [line for line in done.stdout.splitlines() if "apt-get install chromium" in line]
    assert line == f"2 browser test(s) skipped: {BROWSER_MISSING}"


def test_with_ci_set_a_missing_browser_fails_the_browser_tests(tmp_path):
    done = pytest_without_a_browser(tmp_path, CI="true")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "2 failed" in done.stdout
    assert "apt-get install chromium" in done.stdout and "CI is set" in done.stdout
