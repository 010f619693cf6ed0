"""labels.jsonl: append-only, the latest label per (case, criterion) in force, a torn last line
tolerated like the run store's, damage elsewhere a one-line error naming the file and line."""

from __future__ import annotations

import pytest

from referee.errors import InputError
from referee.labels import LABELS_FILE, Label, LabelStore, review_queue
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.result import CriterionResult


def _label(case_id: str = "c1", criterion: str = "faithfulness", **fields) -> Label:
    values = {"scoring": 1, "labeller": "ana", "at": 1.0, "judge_passed": True, **fields}
    return Label(case_id=case_id, criterion=criterion, **values)


def test_appends_and_the_latest_label_per_case_and_criterion_wins(tmp_path) -> None:
    store = LabelStore(tmp_path)
    store.append(_label(verdict="right", at=1.0))
    store.append(_label("c2", verdict="wrong", at=2.0))
    first_bytes = (tmp_path / LABELS_FILE).read_bytes()
    store.append(_label(verdict="wrong", human="fail", comment="no", labeller="bo", at=3.0))
    # Append-only: the earlier lines are still there, byte for byte.
    assert (tmp_path / LABELS_FILE).read_bytes().startswith(first_bytes)
    assert [label.at for label in store.all()] == [1.0, 2.0, 3.0]
    latest = store.latest()
    assert latest[("c1", "faithfulness")].labeller == "bo"
    assert latest[("c1", "faithfulness")].human_passed is False
    assert latest[("c2", "faithfulness")].human_passed is False  # judge passed, verdict wrong


def test_right_and_wrong_read_against_the_judges_verdict_and_pass_fail_wins() -> None:
    assert _label(verdict="right", judge_passed=True).human_passed is True
    assert _label(verdict="right", judge_passed=False).human_passed is False
    assert _label(verdict="wrong", judge_passed=False).human_passed is True
    assert _label(verdict="right", human="fail").human_passed is False
    assert _label(comment="unsure").human_passed is None


def test_a_torn_last_line_is_left_out_and_cut_off_before_the_next_append(tmp_path) -> None:
    store = LabelStore(tmp_path)
    store.append(_label(verdict="right"))
    with open(tmp_path / LABELS_FILE, "ab") as handle:
        handle.write(b'{"case_id": "torn-c2", "crit')  # a kill in the middle of a write
    assert [label.case_id for label in store.all()] == ["c1"]
    store.append(_label("c3", verdict="wrong"))
    assert [label.case_id for label in store.all()] == ["c1", "c3"]
    assert b"torn-c2" not in (tmp_path / LABELS_FILE).read_bytes()


@pytest.mark.parametrize("line, words", [
    (b"{not json", ":2: invalid JSON"),
    (b'{"case_id": "c2", "criterion": "x", "scoring": 1, "labeller": "a", "at": 1, '
     b'"verdict": "maybe"}', ":2: field 'verdict'"),
])
def test_a_damaged_line_before_the_end_names_the_file_and_line(tmp_path, line, words) -> None:
    store = LabelStore(tmp_path)
    store.append(_label())
    with open(tmp_path / LABELS_FILE, "ab") as handle:
        handle.write(line + b"\n")
    store_path = tmp_path / LABELS_FILE
    with pytest.raises(InputError) as caught:
        store.all()
    message = str(caught.value)
    assert "\n" not in message and str(store_path) in message and words in message


def test_a_run_without_labels_has_none(tmp_path) -> None:
    assert LabelStore(tmp_path).latest() == {}


def _case(index: int, *results: CriterionResult, status: CaseStatus = CaseStatus.PASSED) -> CaseResult:
    return CaseResult(index=index, eval_id=f"c{index}", status=status,
                      criterion_results=list(results))


def test_the_queue_puts_judge_trouble_first_then_close_calls_then_the_rest() -> None:
    result = lambda score, **kw: CriterionResult(criterion="faith", score=score,  # noqa: E731
                                                 passed=score >= 0.5, threshold=0.5, **kw)
    report = EvalReport(name="r", model_id="m", run_id="r1", cases=[
        _case(1, result(1.0)),
        _case(2, result(0.6)),
        _case(3, result(0.9, details={"unknown": 1})),
        _case(4, result(0.0, error="judge down", error_kind="judge"),
              status=CaseStatus.JUDGE_ERROR),
        _case(5, result(0.45)),
        _case(6, result(0.0, skipped=True)),
        _case(7, result(0.9, details={"unknown": 3})),
    ])
    queue = review_queue(report)
    assert [item.case_id for item in queue] == ["c4", "c7", "c3", "c5", "c2", "c1"]
    assert [item.why for item in queue] == ["judge trouble"] * 3 + ["near threshold"] * 2 + ["rest"]


def test_a_comment_alone_leaves_the_result_unlabelled_in_the_queue() -> None:
    from referee.labels._review import describe

    assert describe(_label(comment="ask legal"))[0] == ""
    assert describe(_label(comment="ask legal", verdict="wrong")) == (
        "wrong/-", "judge wrong; comment: ask legal (ana)")
