"""Remake the README's screenshots from the quickstart: a report, a compare page, the run index.

    python docs/img/make_screenshots.py          # needs chromium on PATH (apt-get install chromium)

Two runs of the offline shop agent are stored in a temporary runs directory: "rules-v1" as it
ships, and "rules-v2" with two deliberate faults (a wrong currency argument and a vaguer return
policy answer). The local viewer serves them and headless Chromium photographs three pages.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from referee import ExecutionResult, ToolCall  # noqa: E402
from referee.cli import load_python_file  # noqa: E402
from referee.report.html import render_html  # noqa: E402
from referee.store import load_run  # noqa: E402
from referee.report.viewer import start_viewer  # noqa: E402

PAGES = {"report.png": "/run/{b}", "compare.png": "/compare?a={a}&b={b}", "viewer-index.png": "/"}


def _faulty(agent):  # type: ignore[no-untyped-def]
    def agent_v2(prompt: str) -> ExecutionResult:
        result = agent(prompt)
        if "GBP" in prompt:
            result.tool_calls = [c if c.name != "convert_price" else
                                 ToolCall(name="convert_price", args={**c.args, "currency": "EUR"})
                                 for c in result.tool_calls]
        if "return policy" in prompt:
            result.actual_response = "Returns are possible for a while after delivery."
        return result
    return agent_v2


def _shoot(chromium: str, url: str, out: Path, profile: Path, height: int = 1400) -> None:
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         f"--user-data-dir={profile}", f"--window-size=1280,{height}",
         "--virtual-time-budget=3000", f"--screenshot={out}", url],
        check=True, capture_output=True, timeout=120)
    print(f"wrote {out}")


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed", file=sys.stderr)
        return 1
    module = load_python_file(ROOT / "examples" / "quickstart" / "eval_shop.py")
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        keys = []
        for label, model in (("rules-v1", module.model), ("rules-v2", _faulty(module.model))):
            module.suite.model_id = label
            report = module.suite.run(model, verbose=False, runs_dir=runs, formats=["json"])
            keys.append(Path(report.metadata["run_dir"]).name)
        with start_viewer(None, runs) as viewer:
            for name, path in PAGES.items():
                _shoot(chromium, viewer.base_url + path.format(a=keys[0], b=keys[1]), HERE / name,
                       Path(tmp) / name)
        # The failing cases of run B, opened: expected against actual, side by side.
        failing = load_run(runs / keys[1])
        failing.cases = [c for c in failing.cases if not c.passed]
        page = render_html(failing).replace('<details class="case g-failed"',
                                            '<details open class="case g-failed"')
        (Path(tmp) / "failing.html").write_text(page, encoding="utf-8")
        _shoot(chromium, (Path(tmp) / "failing.html").as_uri(), HERE / "report-case.png",
               Path(tmp) / "failing", height=2300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
