"""A stored run keeps its cases on disk, not in memory (issue 14, bounded memory).

The engine hands each finished case to the store and keeps only counts; report.json refers to
cases.jsonl; ``report.cases`` of a stored run reads cases.jsonl on demand, in case order.
"""

from __future__ import annotations

import gc
import io
import json
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_report_samples import chromium_dom

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.errors import InputError
from referee.evaluators.deterministic import Contains
from referee.report import case_file, console, html
from referee.report.case_file import StoredCases
from referee.report.console import render_console
from referee.report.json_report import render_json
from referee.report.model import CaseResult, CaseStatus, RunTally
from referee.report.store import list_runs, load_run
from referee.report.writers import write_reports


class BuiltOnDemand(Sequence[EvalCase]):
    """Cases made when indexed, like a case file read line by line; counts every build."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.builds = 0

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        if not 0 <= i < self.count:
            raise IndexError(i)
        self.builds += 1
        return EvalCase(input=f"question {i}", expected_output=f"answer {i}")


def _answer(question: str) -> str:
    n = int(question.split()[1])
    return f"answer {n}" if n % 5 else f"no idea about {n}"  # every fifth case fails


def _suite(count: int) -> tuple[EvalSuite, BuiltOnDemand]:
    source = BuiltOnDemand(count)
    return EvalSuite("streamed").stream_cases(source).add_evaluator(Contains(["answer"])), source


def test_a_stored_run_holds_no_finished_case_in_memory(tmp_path: Path) -> None:
    alive: list[weakref.ref[ExecutionResult]] = []

    def model(question: str) -> ExecutionResult:
        out = ExecutionResult(actual_response=_answer(question))
        alive.append(weakref.ref(out))
        return out

    suite, _ = _suite(60)
    report = suite.run(model, verbose=False, runs_dir=tmp_path, concurrency=4)
    gc.collect()
    assert len(alive) == 60
    # The run kept none of them: at most the last few, still referenced by the model-calling
    # threads (a handful per worker), however many cases ran.
    assert sum(ref() is not None for ref in alive) <= 10
    assert isinstance(report.cases, StoredCases)
    assert (report.total, report.passed, report.failed) == (60, 48, 12)
    assert [c.index for c in report.cases] == list(range(60))
    assert report.cases[7].actual_response == "answer 7"


def test_report_json_refers_to_cases_jsonl_and_loads_back_the_same(tmp_path: Path) -> None:
    suite, source = _suite(40)
    report = suite.run(_answer, verbose=False, runs_dir=tmp_path)
    assert source.builds == 80  # once for the case keys, once to run it: never kept
    run_dir = Path(report.metadata["run_dir"])
    data = json.loads((run_dir / "report.json").read_text())
    assert "cases" not in data and data["cases_file"] == "cases.jsonl"
    assert data["totals"]["passed"] == 32 and data["tally"]["cases"] == 40

    loaded = load_run(run_dir)
    assert isinstance(loaded.cases, StoredCases)
    assert loaded.summary == report.summary
    assert loaded.errors_by_kind == report.errors_by_kind
    assert list(loaded.cases) == list(report.cases)
    assert loaded.get_case_result(report.cases[3].eval_id).actual_response == "answer 3"
    dumped = json.loads(loaded.model_dump_json())  # pydantic's own dump reads the cases too
    assert [c["index"] for c in dumped["cases"]] == list(range(40))
    [info] = list_runs(tmp_path)
    assert (info.total, info.passed, info.failed, info.finished) == (40, 32, 8, True)


def test_an_unsaved_run_keeps_its_cases_in_a_list(tmp_path: Path) -> None:
    suite, _ = _suite(10)
    report = suite.run(_answer, verbose=False, save=False)
    assert isinstance(report.cases, list) and [c.index for c in report.cases] == list(range(10))


def _record(index: int, status: CaseStatus = CaseStatus.PASSED, note: str = "") -> str:
    return CaseResult(index=index, eval_id=f"c{index}", status=status, error=note or None
                      ).model_dump_json() + "\n"


def test_stored_cases_follow_case_order_and_the_last_record_of_a_case(tmp_path: Path,
                                                                     monkeypatch) -> None:
    path = tmp_path / "cases.jsonl"
    # Completion order, case 1 recorded twice (a resume that retried its error), a torn tail.
    path.write_text(_record(2) + _record(0) + _record(1, CaseStatus.MODEL_ERROR, "boom")
                    + _record(3) + _record(1) + '{"index":4,"eval_id":"c4","sta')
    for cached_up_to in (2_000, 0):  # small runs are parsed once; large ones on every read
        monkeypatch.setattr(case_file, "CACHED_CASES_UP_TO", cached_up_to)
        cases = StoredCases(path)
        assert len(cases) == 4
        assert [c.eval_id for c in cases] == ["c0", "c1", "c2", "c3"]
        assert cases[1].status == CaseStatus.PASSED and cases[-1].eval_id == "c3"
        assert [c.eval_id for c in cases[1:3]] == ["c1", "c2"]
        assert cases.tally.count(CaseStatus.PASSED) == 4 and cases.tally.errors == 0
        assert cases == [CaseResult.model_validate_json(_record(i)) for i in range(4)]
    cached = StoredCases(path)
    monkeypatch.setattr(case_file, "CACHED_CASES_UP_TO", 2_000)
    assert cached[0] is cached[0]  # a small run behaves like the list it used to be


def test_damage_before_the_last_line_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(_record(0) + "not json\n" + _record(2))
    with pytest.raises(InputError) as err:
        len(StoredCases(path))
    assert "cases.jsonl:2:" in str(err.value)


def test_tally_round_trips_and_matches_counting_the_cases() -> None:
    from test_report_samples import sample_report

    report = sample_report()
    tally = RunTally.of(report.cases)
    again = RunTally.from_dict(json.loads(json.dumps(tally.to_dict())))
    assert again.summary() == tally.summary() == report.summary
    assert again.status_counts == tally.status_counts


def test_streamed_json_report_is_the_same_document(tmp_path: Path) -> None:
    from test_report_samples import sample_report

    report = sample_report()
    written = write_reports(report, tmp_path, ["json"])
    assert json.loads(written["json"].read_text()) == json.loads(render_json(report))


def test_console_counts_every_failure_but_reads_only_what_it_lists(tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setattr(case_file, "CACHED_CASES_UP_TO", 0)
    suite, _ = _suite(50)
    report = suite.run(_answer, verbose=False, runs_dir=tmp_path)
    reads = 0
    parse = StoredCases._parse_at

    def counting(self: StoredCases, fh: Any, offset: int) -> CaseResult:
        nonlocal reads
        reads += 1
        return parse(self, fh, offset)

    monkeypatch.setattr(StoredCases, "_parse_at", counting)
    monkeypatch.setattr(console, "MAX_FAILURES_LISTED", 3)
    out = io.StringIO()
    render_console(report, Console(file=out, width=120))
    assert "Failures and errors (10)" in out.getvalue()
    assert "and 7 more" in out.getvalue()
    assert reads < 50  # stopped reading once the listed failures (cases 0, 5, 10) were found


def test_html_of_a_huge_run_shows_a_stated_sample(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(html, "HTML_ALL_CASES_UP_TO", 100)
    monkeypatch.setattr(html, "HTML_SAMPLE_CASES", 20)
    suite, _ = _suite(200)  # 40 failures, 160 passes
    report = suite.run(_answer, verbose=False, runs_dir=tmp_path)
    path = tmp_path / "report.html"
    path.write_text(html.render_html(load_run(report.metadata["run_dir"])), encoding="utf-8")
    dom = chromium_dom(path.as_uri(), tmp_path)
    shown = dom.count('<details class="case ')
    assert shown == 20
    assert dom.count('data-status="FAILED"') == 10  # every failure first, up to half the page
    assert "This run has 200 cases; the page shows 20 of them" in dom
    assert "every 16th other case" in dom
    assert "all (200)" in dom  # the counts still cover every case
