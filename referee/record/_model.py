"""One report model for both front doors.

Readers of the AgentEvaluator-style API use ``report.summary`` (an EvalSummary with
``criterion_stats``); readers of the EvalSuite-style API use ``pass_rate`` (passed /
evaluated), ``error_rate`` (errors / total), ``errors`` and the per-case statuses. Both are
computed from the same list of cases.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from referee._strict import with_positions
from referee.case import EvalCase
from referee.execution import ExecutionResult, stored_trace
from referee.record._agreement import JudgeAgreement, KappaTally, panel_member_usage
from referee.record._analysis import ReportAnalysis
from referee.record._correction import NO_RUN_CORRECTION, CorrectedRate, JudgeCalibration, correct
from referee.record._reliability import JudgeReliabilityCheck
from referee.record._rendering import report_views
from referee.record._trial_stats import trial_counts
from referee.redact import RedactedText
from referee.result import CriterionResult, unique_labels
from referee.storable import Conversion, make_storable
from referee.usage import TokenUsage

MAX_NAMED_CONVERSIONS = 5


class CaseStatus(str, Enum):
    """A case's outcome. multivon's ``EvalStatus`` is this enum: its lower-case values
    (``"passed"``, ``"failed_quality"``, ...) compare equal and convert (``CaseStatus("passed")``),
    and ``FAILED_QUALITY`` is ``FAILED``; the stored value stays upper-case."""

    PASSED = "PASSED"
    FAILED = "FAILED"
    MODEL_ERROR = "MODEL_ERROR"
    JUDGE_ERROR = "JUDGE_ERROR"
    EVALUATOR_ERROR = "EVALUATOR_ERROR"
    TIMEOUT = "TIMEOUT"
    SKIPPED = "SKIPPED"
    FAILED_QUALITY = "FAILED"  # multivon's name for FAILED (an alias, not a new status)

    @classmethod
    def _missing_(cls, value: object) -> CaseStatus | None:
        if isinstance(value, str):
            return _PEER_STATUS_VALUES.get(value.lower()) or cls.__members__.get(value.upper())
        return None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str) and not isinstance(other, CaseStatus):
            return other == self.value or _PEER_STATUS_VALUES.get(other) is self
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.value)

    @property
    def peer_value(self) -> str:
        """The value multivon's EvalStatus would have (``"passed"``, ``"failed_quality"``)."""
        return "failed_quality" if self is CaseStatus.FAILED else self.value.lower()

    @property
    def is_error(self) -> bool:
        return self in ERROR_STATUSES

    @property
    def is_evaluated(self) -> bool:
        return self in (CaseStatus.PASSED, CaseStatus.FAILED)


ERROR_STATUSES = frozenset(
    {CaseStatus.MODEL_ERROR, CaseStatus.JUDGE_ERROR, CaseStatus.EVALUATOR_ERROR, CaseStatus.TIMEOUT}
)
_PEER_STATUS_VALUES = {"failed_quality": CaseStatus.FAILED,
                       **{status.value.lower(): status for status in CaseStatus}}

# multivon's names for the same enum and sets.
EvalStatus = CaseStatus
EVALUATION_STATUSES = frozenset({CaseStatus.PASSED, CaseStatus.FAILED})

# A known failure beats an unknown one (the table in docs/architecture.md), so that a flaky
# judge cannot hide a real regression: a case takes the first of these that applies. A model error or timeout comes first because
# it leaves nothing to judge; PASSED needs one scored criterion, SKIPPED is what is left.
STATUS_PRECEDENCE: tuple[CaseStatus, ...] = (
    CaseStatus.MODEL_ERROR, CaseStatus.TIMEOUT, CaseStatus.FAILED, CaseStatus.JUDGE_ERROR,
    CaseStatus.EVALUATOR_ERROR, CaseStatus.PASSED, CaseStatus.SKIPPED)


def prevailing_status(statuses: Iterable[CaseStatus]) -> CaseStatus:
    """The first of ``statuses`` in ``STATUS_PRECEDENCE``; SKIPPED when there is none."""
    present = set(statuses)
    return next((s for s in STATUS_PRECEDENCE if s in present), CaseStatus.SKIPPED)


def criterion_status(result: CriterionResult) -> CaseStatus:
    """What one criterion result says of its case: FAILED or PASSED when scored, its error's
    kind when errored, SKIPPED otherwise."""
    if result.is_scored:
        return CaseStatus.PASSED if result.passed else CaseStatus.FAILED
    if result.is_judge_error:
        return CaseStatus.JUDGE_ERROR
    return CaseStatus.EVALUATOR_ERROR if result.is_error else CaseStatus.SKIPPED


def case_status(results: Iterable[CriterionResult]) -> CaseStatus:
    """A case's status from its criterion results (a model error or timeout is decided before
    any criterion runs)."""
    return prevailing_status(criterion_status(r) for r in results)


def runs_status(statuses: Iterable[CaseStatus]) -> CaseStatus:
    """A case run several times: one FAILED run is a known failure even beside a run that had
    nothing to judge (docs/compat.md, repeated runs); otherwise the case table decides."""
    present = set(statuses)
    return CaseStatus.FAILED if CaseStatus.FAILED in present else prevailing_status(present)


def _kept_in_metadata(key: str) -> property:
    """A 10xgraph ``EvalCaseResult`` field that referee keeps in ``metadata[key]``, read and
    set under its 10xgraph name (``result.node_responses = [...]``)."""

    def read(self: CaseResult) -> Any:
        return self.metadata.get(key, [])

    def write(self: CaseResult, value: Any) -> None:
        self.metadata = {**self.metadata, key: value}

    return property(read, write, doc=f"10xgraph's {key}, kept in metadata[{key!r}].")


class CaseResult(BaseModel):
    # A non-finite float in a free-form value serialises as "NaN"/"Infinity" (not a silent
    # null), which lets the engine's storable check see it at pydantic's speed.
    model_config = ConfigDict(ser_json_inf_nan="strings")

    index: int = 0
    eval_id: str
    name: str = ""
    status: CaseStatus
    case: EvalCase | None = None
    execution: ExecutionResult | None = None
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    error: RedactedText | None = None
    duration_seconds: float = 0.0
    token_usage: TokenUsage | None = None  # judge tokens spent on this case
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Values JSON cannot hold, stored as marked stand-ins (referee.storable).
    converted: list[Conversion] = Field(default_factory=list)
    # Each run of a case run several times (EvalSuite.run(runs=N)), in order, without the case;
    # empty for a case run once (referee.record._trials).
    run_results: list[CaseResult] = Field(default_factory=list)
    # Where the model's exception was raised (MODEL_ERROR): redacted and bounded
    # (referee.errors.format_traceback).
    traceback: RedactedText | None = None
    # Seconds spent scoring the case (every criterion, judge calls included), apart from the
    # model's ``execution.latency_s``; ``duration_seconds`` is the whole case.
    scoring_seconds: float | None = None

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's CaseResult is a dataclass: CaseResult("input", "output", [results]).
        super().__init__(**with_positions("CaseResult", _MULTIVON_CASE_RESULT_POSITIONAL,
                                          positional, fields))

    @model_validator(mode="after")
    def _label_namesakes(self) -> CaseResult:
        """Two criteria of one name are two results: ``contains`` and ``contains#2``
        (docs/architecture.md). Runs stored before labels get them when loaded."""
        results = self.criterion_results
        labels = unique_labels([r.criterion for r in results])
        if any(r.criterion != label for r, label in zip(results, labels)):
            self.criterion_results = [
                r if r.criterion == label else r.model_copy(update={"criterion": label})
                for r, label in zip(results, labels)]
        return self

    @model_validator(mode="before")
    @classmethod
    def _from_peer_case_result(cls, data: Any) -> Any:
        """10xgraph's ``EvalCaseResult(eval_id=, passed=, actual_response=, ...)`` builds a
        CaseResult: ``passed`` (with ``error``) gives the status, the actual output becomes the
        execution, and the fields referee has no place for are kept in ``metadata``."""
        if not isinstance(data, dict) or "status" in data:
            return data
        if _MULTIVON_CASE_RESULT_FIELDS & data.keys():
            return _from_multivon_case_result(data)
        if "passed" not in data:
            return data
        data = dict(data)
        passed = data.pop("passed")
        data["status"] = (CaseStatus.PASSED if passed else
                          CaseStatus.EVALUATOR_ERROR if data.get("error") else CaseStatus.FAILED)
        run = {key: data.pop(peer) for peer, key in _PEER_EXECUTION_FIELDS.items() if peer in data}
        if run and data.get("execution") is None:
            data["execution"] = run
        kept = {key: data.pop(key) for key in _PEER_CASE_RESULT_EXTRAS if key in data}
        if kept:
            data["metadata"] = {**(data.get("metadata") or {}), **kept}
        return data

    @classmethod
    def success(cls, eval_id: str, criterion_results: list[CriterionResult],
                **fields: Any) -> CaseResult:
        """10xgraph: a case that ran; it passed when every criterion did."""
        return cls(eval_id=eval_id, criterion_results=criterion_results,
                   passed=all(r.passed for r in criterion_results), **fields)

    @classmethod
    def failure(cls, eval_id: str, error: str, name: str = "",
                duration_seconds: float = 0.0) -> CaseResult:
        """10xgraph: a case that could not be evaluated."""
        return cls(eval_id=eval_id, name=name, status=CaseStatus.EVALUATOR_ERROR, error=error,
                   duration_seconds=duration_seconds)

    @property
    def case_input(self) -> str:
        return self.case.input_text if self.case is not None else ""

    @property
    def actual_output(self) -> str:
        return self.actual_response

    @property
    def latency_ms(self) -> float:
        latency = self.execution.latency_s if self.execution else None
        return latency * 1000.0 if latency is not None else 0.0

    @property
    def actual_tool_calls(self) -> list[Any]:
        return list(self.execution.tool_calls) if self.execution else []

    @property
    def node_visits(self) -> list[str]:
        return list(self.execution.node_visits) if self.execution else []

    def storable(self) -> CaseResult:
        """This case with stand-ins for anything JSON cannot hold, each listed in
        ``converted``: whatever a model returns is stored, never a reason to abort, so one
        odd value stays in its case instead of failing the run store or a report."""
        stored, converted = make_storable(self)
        if converted:
            stored = stored.model_copy(update={"converted": [*stored.converted, *converted]})
        return stored

    actual_trajectory = _kept_in_metadata("actual_trajectory")
    messages = _kept_in_metadata("messages")
    node_responses = _kept_in_metadata("node_responses")
    turn_results = _kept_in_metadata("turn_results")
    node_details = _kept_in_metadata("node_details")

    @property
    def passed_criteria(self) -> list[CriterionResult]:
        return [r for r in self.criterion_results if r.passed]

    @property
    def label(self) -> str:
        """The case as reports name it: its name, else its first user message, else its id."""
        return self.name or (self.case.display_name if self.case is not None else "") or self.eval_id

    @property
    def passed(self) -> bool:
        return self.status == CaseStatus.PASSED

    @property
    def is_error(self) -> bool:
        return self.status.is_error

    @property
    def results(self) -> list[CriterionResult]:
        return self.criterion_results

    @property
    def actual_response(self) -> str:
        return self.execution.actual_response if self.execution else ""

    @property
    def output(self) -> str:
        return self.actual_response

    @property
    def failed_criteria(self) -> list[CriterionResult]:
        return [r for r in self.criterion_results if not r.passed and not r.skipped]

    def get_criterion_result(self, name: str) -> CriterionResult | None:
        return next((r for r in self.criterion_results if r.criterion == name), None)

    # multivon's CaseResult reads: one error text per kind (also on a case that ended FAILED,
    # whose errors are still counted per criterion), and the JudgeRetry history.
    def _error_of(self, status: CaseStatus, kind: str) -> str | None:
        if self.status == status:
            return self.error or status.peer_value
        texts = [f"{r.criterion}: {r.explanation or 'error'}" for r in self.criterion_results
                 if r.error_kind == kind]
        return "; ".join(texts) or None

    @property
    def model_error(self) -> str | None:
        if self.status in (CaseStatus.MODEL_ERROR, CaseStatus.TIMEOUT):
            return self.error or self.status.peer_value
        return None

    @property
    def judge_error(self) -> str | None:
        return self._error_of(CaseStatus.JUDGE_ERROR, "judge")

    @property
    def evaluator_error(self) -> str | None:
        return self._error_of(CaseStatus.EVALUATOR_ERROR, "evaluator")

    @property
    def retry_errors(self) -> list[str]:
        """The error of each attempt that a ``JudgeRetry`` policy ran again, oldest first."""
        return list(self.metadata.get("retry_errors") or [])

    @property
    def retry_attempts(self) -> int:
        return len(self.retry_errors)

    # multivon's names for what the case result already holds.
    @property
    def case_id(self) -> str:
        return self.eval_id

    @property
    def skipped(self) -> bool:
        return self.status == CaseStatus.SKIPPED

    @property
    def agent_trace(self) -> list[Any] | None:
        """The steps the run recorded (``AgentStep``s), else ``None``."""
        return stored_trace(self.execution.metadata) if self.execution is not None else None

    @property
    def score(self) -> float:
        """multivon: the mean score of the case's scored results (0.0 when none scored); of a
        case run several times, the mean of ``all_scores``."""
        scores = self.all_scores or [r.score for r in self.criterion_results if r.is_scored]
        return sum(scores) / len(scores) if scores else 0.0

    # multivon's repeated-run reads (EvalSuite.run(runs=N)); a run that errored or was skipped
    # is no trial, as an errored case is no case in pass_rate.
    @property
    def runs(self) -> int:
        """How many times the case ran."""
        return len(self.run_results) or 1

    @property
    def all_scores(self) -> list[float]:
        """The score of each evaluated run (empty for a case run once)."""
        return [r.score for r in self.run_results if r.status.is_evaluated]

    @property
    def pass_count(self) -> int:
        """How many runs passed; -1 for a case run once (multivon's "not tracked")."""
        if not self.run_results:
            return -1
        return sum(r.status == CaseStatus.PASSED for r in self.run_results)

    @property
    def score_std(self) -> float:
        """The population standard deviation of ``all_scores`` (0.0 below two)."""
        scores = self.all_scores
        return statistics.pstdev(scores) if len(scores) > 1 else 0.0

    @property
    def run_pass_rate(self) -> float:
        """Passed runs of evaluated runs; of a case run once, 1.0 if it passed, else 0.0."""
        evaluated, passed = trial_counts(self)
        return passed / evaluated if evaluated else 0.0

    @property
    def is_flaky(self) -> bool:
        """Some evaluated run passed and some failed."""
        evaluated, passed = trial_counts(self)
        return 0 < passed < evaluated

    @property
    def tags(self) -> list[str]:
        return list(self.case.tags) if self.case is not None else []


# 10xgraph's EvalCaseResult fields: those that describe the run, and those kept in metadata.
_PEER_EXECUTION_FIELDS = {"actual_response": "actual_response", "actual_tool_calls": "tool_calls",
                          "node_visits": "node_visits"}
_PEER_CASE_RESULT_EXTRAS = ("actual_trajectory", "messages", "node_responses", "turn_results",
                            "agent_token_usage", "node_details")
EvalCaseResult = CaseResult
# multivon's CaseResult fields; its status follows from the error fields and the results.
_MULTIVON_CASE_RESULT_POSITIONAL = ("case_input", "actual_output", "results", "latency_ms")
_MULTIVON_CASE_RESULT_FIELDS = frozenset({"case_input", "actual_output", "results", "model_error",
                                          "judge_error", "evaluator_error", "latency_ms",
                                          "runs", "pass_count", "all_scores"})


def _multivon_runs(data: dict[str, Any], results: list[CriterionResult]) -> list[CaseResult]:
    """multivon's counts of a repeated case (``runs=5, pass_count=3, all_scores=[...]``) as
    runs (none without ``pass_count``): the first ``pass_count`` passed, the others failed (the
    counts do not say which), each with the given evaluators scored at that run's score (from
    ``all_scores``, else their own)."""
    runs = data.pop("runs", 1)
    pass_count = data.pop("pass_count", -1)
    scores = list(data.pop("all_scores", None) or [])
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    if pass_count < 0:  # multivon's "not tracked": nothing to say about the runs
        return []
    if not 0 <= pass_count <= runs:
        raise ValueError(f"pass_count must be between 0 and runs={runs}, got {pass_count!r}")
    if scores and len(scores) != runs:
        raise ValueError(f"all_scores holds {len(scores)} score(s) for {runs} run(s)")
    made = []
    for i in range(runs):
        passed = i < pass_count
        run_results = [r.model_copy(update={"score": scores[i] if scores else r.score,
                                            "passed": passed, "error": None, "error_kind": None,
                                            "skipped": False}) for r in results]
        made.append(CaseResult(eval_id="", status=CaseStatus.PASSED if passed
                               else CaseStatus.FAILED, criterion_results=run_results))
    return made


def _from_multivon_case_result(data: dict[str, Any]) -> dict[str, Any]:
    """multivon's ``CaseResult(case_input=, actual_output=, results=, model_error=, ...)`` as a
    CaseResult. The status follows referee's precedence (``STATUS_PRECEDENCE``) over the error
    fields and the results, not multivon's, where a judge error hides a failure;
    ``skipped=True`` is SKIPPED unless the model errored."""
    data = dict(data)
    results = [r if isinstance(r, CriterionResult) else CriterionResult.model_validate(r)
               for r in data.pop("results", None) or []]
    errors = {kind: data.pop(kind, None) for kind in ("model_error", "judge_error",
                                                      "evaluator_error")}
    skipped = data.pop("skipped", False)
    runs = _multivon_runs(data, results)
    statuses = [criterion_status(r) for r in results]
    statuses += [CaseStatus.FAILED for r in runs if r.status == CaseStatus.FAILED]
    statuses += [status for kind, status in (("model_error", CaseStatus.MODEL_ERROR),
                                             ("judge_error", CaseStatus.JUDGE_ERROR),
                                             ("evaluator_error", CaseStatus.EVALUATOR_ERROR))
                 if errors[kind]]
    status = prevailing_status(statuses)
    if skipped and status != CaseStatus.MODEL_ERROR:
        status = CaseStatus.SKIPPED
    case_input = data.pop("case_input", None)
    tags = data.pop("tags", None) or []
    if data.get("case") is None and case_input is not None:
        data["case"] = EvalCase(input=case_input, tags=tags,
                                **({"eval_id": data["case_id"]} if data.get("case_id") else {}))
    latency_ms = data.pop("latency_ms", None)
    if data.get("execution") is None:
        data["execution"] = ExecutionResult(
            actual_response=data.pop("actual_output", "") or "",
            latency_s=latency_ms / 1000.0 if latency_ms else None)
    data.pop("actual_output", None)
    case_id = data.pop("case_id", None)
    data.setdefault("eval_id", case_id or (data["case"].eval_id if data.get("case") else ""))
    data["error"] = data.get("error") or next((e for e in errors.values() if e), None)
    data["criterion_results"] = results
    data["status"] = status
    if runs:
        data["run_results"] = [r.model_copy(update={"eval_id": data["eval_id"]}) for r in runs]
    return data


def format_rate(rate: float, denominator: int) -> str:
    """A rate as reports print it: "n/a" when nothing was there to count, never "0.0%"."""
    return "n/a" if denominator == 0 else f"{rate * 100:.1f}%"


class CriterionStats(BaseModel):
    """One criterion over a run. ``avg_score`` and ``pass_rate`` cover its ``scored`` results
    only (passed + failed): an errored or skipped result is not a 0.0."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    scored: int = 0
    avg_score: float = 0.0
    pass_rate: float = 0.0
    token_usage: TokenUsage | None = None  # judge tokens this criterion spent over the run
    # Judged by a panel: how far its judges agreed over the run.
    judge_agreement: JudgeAgreement | None = None

    def __getitem__(self, key: str) -> Any:  # 10xgraph reads criterion_stats[name]["pass_rate"]
        return getattr(self, key)


class EvalSummary(BaseModel):
    total_cases: int = 0
    passed_cases: int = 0
    failed_cases: int = 0
    error_cases: int = 0
    skipped_cases: int = 0
    pass_rate: float = 0.0
    error_rate: float = 0.0
    avg_duration_seconds: float = 0.0
    total_duration_seconds: float = 0.0
    # The whole case's duration, apart: the model's latency and the time spent scoring, each a
    # mean over the cases that have one (None when none has: runs stored before either).
    avg_model_latency_seconds: float | None = None
    avg_scoring_seconds: float | None = None
    criterion_stats: dict[str, CriterionStats] = Field(default_factory=dict)
    total_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    per_case_token_usage: dict[str, TokenUsage] = Field(default_factory=dict)
    avg_tokens_per_case: float = 0.0
    # Judged by panels: each member's spend over the run, by member name (provider:model).
    judge_member_token_usage: dict[str, TokenUsage] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.total_cases

    @property
    def passed(self) -> int:
        return self.passed_cases

    @property
    def failed(self) -> int:
        return self.failed_cases

    @classmethod
    def from_results(cls, results: list[CaseResult]) -> EvalSummary:
        """10xgraph's name for :meth:`from_cases`."""
        return cls.from_cases(results)

    @classmethod
    def from_cases(cls, cases: Iterable[CaseResult]) -> EvalSummary:
        return RunTally.of(cases).summary()


class _Seconds:
    """A sum of durations and how many were added: a mean kept without the values."""

    __slots__ = ("total", "count")

    def __init__(self, total: float = 0.0, count: int = 0) -> None:
        self.total, self.count = total, count

    def add(self, seconds: float) -> None:
        if math.isfinite(seconds):
            self.total += seconds
            self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    def to_list(self) -> list[float | int]:
        return [self.total, self.count]

    @classmethod
    def from_list(cls, data: Any) -> _Seconds:
        """``[sum, count]`` as report.json keeps it; absent in runs stored before it."""
        if isinstance(data, list) and len(data) == 2:
            return cls(float(data[0]), int(data[1]))
        return cls()


class _CriterionTally:
    __slots__ = ("total", "passed", "failed", "errors", "skipped", "score_sum", "scored",
                 "token_usage", "agreement")
    _COUNTS = ("total", "passed", "failed", "errors", "skipped", "score_sum", "scored")

    def __init__(self) -> None:
        self.total = self.passed = self.failed = self.errors = self.skipped = self.scored = 0
        self.score_sum = 0.0
        self.token_usage: TokenUsage | None = None
        self.agreement = KappaTally()


class RunTally:
    """What a report needs to know about its cases without holding them: counts by status,
    per-criterion statistics, durations and judge usage, added one finished case at a time.

    A streamed run keeps only this (plus cases.jsonl on disk), so memory does not grow with
    the number of cases. ``to_dict``/``from_dict`` let report.json carry it.
    """

    def __init__(self) -> None:
        self.cases = 0
        self.status_counts: Counter[CaseStatus] = Counter()
        self.duration_sum = 0.0
        self.model_latency = _Seconds()
        self.scoring = _Seconds()
        self.token_usage: TokenUsage | None = None
        # Criterion results that could not be scored on a case that FAILED on another one.
        self.criterion_errors_on_failed = 0
        # Values stored as marked stand-ins: how many, on how many cases, the first few named.
        self.converted_values = 0
        self.converted_cases = 0
        self.converted_named: list[str] = []
        # Judge usage by case (the summary lists it): only cases that spent judge tokens.
        self.per_case_token_usage: dict[str, TokenUsage] = {}
        # What the model under test reported spending, apart from the judge's spend.
        self.model_token_usage: TokenUsage | None = None
        # Panel members' spend, by member name, summed over every criterion they judged.
        self.member_token_usage: dict[str, TokenUsage] = {}
        self._criteria: dict[str, _CriterionTally] = {}

    @classmethod
    def of(cls, cases: Iterable[CaseResult]) -> RunTally:
        tally = cls()
        for case in cases:
            tally.add(case)
        return tally

    def add(self, case: CaseResult) -> None:
        self.cases += 1
        self.status_counts[case.status] += 1
        if case.converted:
            self.converted_cases += 1
            self.converted_values += len(case.converted)
            for value in case.converted[:MAX_NAMED_CONVERSIONS - len(self.converted_named)]:
                self.converted_named.append(f"{case.label!r} {value.describe()}")
        self.duration_sum += case.duration_seconds
        if case.execution is not None and case.execution.latency_s is not None:
            self.model_latency.add(case.execution.latency_s)
        if case.scoring_seconds is not None:
            self.scoring.add(case.scoring_seconds)
        if case.token_usage is not None:
            self.token_usage = case.token_usage + self.token_usage
            self.per_case_token_usage[case.eval_id] = case.token_usage
        if case.execution is not None and case.execution.token_usage is not None:
            self.model_token_usage = case.execution.token_usage + self.model_token_usage
        for r in case.criterion_results:
            s = self._criteria.get(r.criterion)
            if s is None:
                s = self._criteria[r.criterion] = _CriterionTally()
            s.total += 1
            if r.token_usage is not None:
                s.token_usage = r.token_usage + s.token_usage
            for member, spent in panel_member_usage(r):
                self.member_token_usage[member] = spent + self.member_token_usage.get(member)
            if r.skipped:
                s.skipped += 1
            elif r.is_error:
                s.errors += 1
                if case.status == CaseStatus.FAILED:
                    self.criterion_errors_on_failed += 1
            else:
                s.passed += r.passed
                s.failed += not r.passed
                s.score_sum += r.score
                s.scored += 1
                s.agreement.add_result(r)

    def count(self, status: CaseStatus) -> int:
        return self.status_counts[status]

    @property
    def errors(self) -> int:
        return sum(self.status_counts[s] for s in ERROR_STATUSES)

    @property
    def criterion_errors(self) -> int:
        return sum(s.errors for s in self._criteria.values())

    def summary(self) -> EvalSummary:
        total = self.cases
        passed = self.count(CaseStatus.PASSED)
        failed = self.count(CaseStatus.FAILED)
        evaluated = passed + failed
        stats: dict[str, CriterionStats] = {}
        for name, s in self._criteria.items():
            stats[name] = CriterionStats(
                total=s.total, passed=s.passed, failed=s.failed, errors=s.errors,
                skipped=s.skipped, scored=s.scored,
                avg_score=s.score_sum / s.scored if s.scored else 0.0,
                pass_rate=s.passed / s.scored if s.scored else 0.0, token_usage=s.token_usage,
                judge_agreement=s.agreement.stats())
        return EvalSummary(
            total_cases=total, passed_cases=passed, failed_cases=failed,
            error_cases=self.errors, skipped_cases=self.count(CaseStatus.SKIPPED),
            pass_rate=passed / evaluated if evaluated else 0.0,
            error_rate=self.errors / total if total else 0.0,
            avg_duration_seconds=self.duration_sum / total if total else 0.0,
            total_duration_seconds=self.duration_sum, criterion_stats=stats,
            avg_model_latency_seconds=self.model_latency.mean,
            avg_scoring_seconds=self.scoring.mean,
            total_token_usage=self.token_usage or TokenUsage(),
            per_case_token_usage=dict(self.per_case_token_usage),
            judge_member_token_usage=dict(self.member_token_usage),
            avg_tokens_per_case=(self.token_usage.total_tokens / total
                                 if total and self.token_usage else 0.0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "status_counts": {s.value: n for s, n in self.status_counts.items() if n},
            "duration_sum": self.duration_sum,
            "model_latency": self.model_latency.to_list(),
            "scoring": self.scoring.to_list(),
            "criterion_errors_on_failed": self.criterion_errors_on_failed,
            "converted": {"values": self.converted_values, "cases": self.converted_cases,
                          "named": list(self.converted_named)},
            "token_usage": self.token_usage.model_dump(mode="json") if self.token_usage else None,
            "per_case_token_usage": {k: u.model_dump(mode="json")
                                     for k, u in self.per_case_token_usage.items()},
            "model_token_usage": (self.model_token_usage.model_dump(mode="json")
                                  if self.model_token_usage else None),
            "member_token_usage": {k: u.model_dump(mode="json")
                                   for k, u in self.member_token_usage.items()},
            "criteria": {
                name: {**{k: getattr(s, k) for k in _CriterionTally._COUNTS},
                       "token_usage": s.token_usage.model_dump(mode="json") if s.token_usage else None,
                       "agreement": s.agreement.to_dict()}
                for name, s in self._criteria.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunTally:
        tally = cls()
        tally.cases = int(data.get("cases") or 0)
        tally.status_counts = Counter({CaseStatus(k): int(n)
                                       for k, n in (data.get("status_counts") or {}).items()})
        tally.duration_sum = float(data.get("duration_sum") or 0.0)
        tally.model_latency = _Seconds.from_list(data.get("model_latency"))
        tally.scoring = _Seconds.from_list(data.get("scoring"))
        tally.criterion_errors_on_failed = int(data.get("criterion_errors_on_failed") or 0)
        converted = data.get("converted") or {}
        tally.converted_values = int(converted.get("values") or 0)
        tally.converted_cases = int(converted.get("cases") or 0)
        tally.converted_named = [str(n) for n in converted.get("named") or []]
        usage = data.get("token_usage")
        tally.token_usage = TokenUsage.model_validate(usage) if usage else None
        tally.per_case_token_usage = {
            str(k): TokenUsage.model_validate(u)
            for k, u in (data.get("per_case_token_usage") or {}).items()}
        usage = data.get("model_token_usage")
        tally.model_token_usage = TokenUsage.model_validate(usage) if usage else None
        tally.member_token_usage = {
            str(k): TokenUsage.model_validate(u)
            for k, u in (data.get("member_token_usage") or {}).items()}
        for name, values in (data.get("criteria") or {}).items():
            s = tally._criteria[name] = _CriterionTally()
            for key in _CriterionTally._COUNTS:
                setattr(s, key, type(getattr(s, key))(values.get(key) or 0))
            usage = values.get("token_usage")
            s.token_usage = TokenUsage.model_validate(usage) if usage else None
            s.agreement = KappaTally.from_dict(values.get("agreement"))
        return tally


def new_run_id() -> str:
    """A fresh run id (its directory's name): the time it starts, and six random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


class EvalReport(ReportAnalysis, BaseModel):
    run_id: str = Field(default_factory=new_run_id)
    name: str = ""
    eval_set_id: str = ""
    model_id: str = ""
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    cases: list[CaseResult] = Field(default_factory=list)
    judge: dict[str, Any] = Field(default_factory=dict)  # judge config, secrets removed
    # The labels of the criteria a judge scored (a panel or a cascade is a judge; a composite
    # holding a judged criterion counts): the labelling queue holds their results alone, since
    # labels measure a judge's errors. None: the report records nothing about its criteria
    # (built in code, or stored before referee kept this), and every scored result is queued.
    judged_criteria: list[str] | None = None
    config_used: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # How many times the run asked for each case to run (EvalSuite.run(runs=N)).
    runs: int = 1
    # Judge spend of no single case, by criterion label: what a criterion's prepare() asked
    # before the first case (CheckEvaluator's question generation). Part of token_usage.
    preparation_token_usage: dict[str, TokenUsage] = Field(default_factory=dict)
    # By criterion label: the calibration the run found for each judged criterion (the entry's
    # measured TPR/TNR, or why there is none); corrected_pass_rates() builds on it.
    judge_calibration: dict[str, JudgeCalibration] = Field(default_factory=dict)
    # multivon's judge_reliability: the share of re-asked (case, judged criterion) pairs whose
    # pass/fail the judge repeated, when its config has reliability_check; None when off or
    # when nothing could be compared. Its counts and spend: judge_reliability_check.
    judge_reliability: float | None = None
    judge_reliability_check: JudgeReliabilityCheck | None = None
    # Where the run is stored: set by the run that stores it and by load_run, from the
    # directory itself, so it is never stale; None for a run not stored. Not part of what is
    # stored (a copied run directory names itself). metadata["run_dir"] keeps the text for
    # readers of report.json.
    run_dir: Path | None = Field(default=None, exclude=True)

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's EvalReport is a dataclass: EvalReport("suite", [case results]).
        super().__init__(**with_positions("EvalReport", ("suite_name", "case_results", "model_id"),
                                          positional, fields))

    @model_validator(mode="before")
    @classmethod
    def _from_multivon_report(cls, data: Any) -> Any:
        """multivon's ``EvalReport(suite_name=, case_results=[...])``."""
        if isinstance(data, dict) and ("suite_name" in data or "case_results" in data):
            data = dict(data)
            if "suite_name" in data:
                data.setdefault("name", data.pop("suite_name"))
            if "case_results" in data:
                data.setdefault("cases", data.pop("case_results"))
        return data

    @model_validator(mode="after")
    def _stored_in(self) -> EvalReport:
        # A report read from report.json text says where its run was stored only in metadata.
        if self.run_dir is None and isinstance(self.metadata.get("run_dir"), str) \
                and self.metadata["run_dir"]:
            self.run_dir = Path(self.metadata["run_dir"])
        return self

    @field_serializer("cases", mode="wrap")
    def _dump_cases(self, cases: Any, handler: Any) -> Any:
        # A stored run's cases are read from cases.jsonl (StoredCases); dumping the whole
        # report reads them all, as a list would have held them.
        return handler(cases if isinstance(cases, list) else list(cases))

    # Counts (the multivon-style API) -------------------------------------------------------------
    @property
    def results(self) -> list[CaseResult]:
        return self.case_results

    @property
    def case_results(self) -> list[CaseResult]:
        """multivon's name for the per-case results: a plain ``list``, as code written for
        multivon checks, wherever the run keeps its cases in memory anyway (every unsaved run,
        and a stored run of up to 2,000 cases, parsed once). A larger stored run hands back its
        lazy sequence (``StoredCases``) rather than parse every case into memory unasked;
        ``list(report.cases)`` makes the list when it is wanted."""
        kept = getattr(self.cases, "kept_list", None)
        listed = kept() if callable(kept) else None
        return listed if listed is not None else self.cases

    @classmethod
    def create(cls, eval_set_id: str, results: list[CaseResult], eval_set_name: str = "",
               config_used: dict[str, Any] | None = None) -> EvalReport:
        """10xgraph: a report over case results already computed."""
        return cls(eval_set_id=eval_set_id, name=eval_set_name, cases=list(results),
                   config_used=config_used or {})

    @property
    def total(self) -> int:
        return len(self.cases)

    def _tally(self) -> RunTally:
        """Counts of the cases: kept by a streamed run's case list, else counted now (a plain
        list may have been edited since)."""
        tally = getattr(self.cases, "tally", None)
        return tally if isinstance(tally, RunTally) else RunTally.of(self.cases)

    def _count(self, status: CaseStatus) -> int:
        return self._tally().count(status)

    @property
    def status_counts(self) -> dict[CaseStatus, int]:
        """How many cases ended in each status (every status, zeros included)."""
        tally = self._tally()
        return {s: tally.count(s) for s in CaseStatus}

    @property
    def passed(self) -> int:
        return self._count(CaseStatus.PASSED)

    @property
    def failed(self) -> int:
        return self._count(CaseStatus.FAILED)

    @property
    def skipped(self) -> int:
        return self._count(CaseStatus.SKIPPED)

    @property
    def evaluated(self) -> int:
        return self.passed + self.failed

    @property
    def errors(self) -> int:
        return self._tally().errors

    @property
    def criterion_errors(self) -> int:
        """Criterion results that could not be scored, on any case: a judge outage stays
        visible even where a known failure decided the case's status."""
        return self._tally().criterion_errors

    @property
    def errors_by_kind(self) -> dict[str, int]:
        counts = self._tally().status_counts
        return dict(sorted((s.value.lower(), n) for s, n in counts.items() if s.is_error and n))

    @property
    def pass_rate(self) -> float:
        """passed / evaluated; 0.0 when nothing was evaluated (reports print "n/a" then:
        tell the two apart with ``evaluated == 0``)."""
        return self.passed / self.evaluated if self.evaluated else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.total if self.total else 0.0

    @property
    def avg_score(self) -> float:
        """multivon: the mean criterion score over evaluated cases (errors and skips left out)."""
        scores = [r.score for c in self.cases if c.status.is_evaluated
                  for r in c.criterion_results if not r.skipped and not r.is_error]
        return sum(scores) / len(scores) if scores else 0.0

    @property
    def warnings(self) -> list[str]:
        """What a reader must know before trusting the stored values: damage found in the
        run store, and stand-ins for values that JSON could not hold (one line, naming the
        first few)."""
        damaged = [str(d) for d in self.metadata.get("damaged") or []]
        tally = self._tally()
        if not tally.converted_values:
            return damaged
        cases = tally.converted_cases
        named = "; ".join(tally.converted_named)
        more = tally.converted_values - MAX_NAMED_CONVERSIONS
        tail = f"; and {more} more" if more > 0 else ""
        return damaged + [f"{tally.converted_values} value(s) in {cases} case(s) could not be stored as JSON and "
                f"were stored as marked stand-ins (each case's 'converted' lists them): "
                f"{named}{tail}"]

    @property
    def duration_seconds(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.time()
        return max(0.0, end - self.started_at)

    @property
    def token_usage(self) -> TokenUsage:
        """What the judge spent: every judged criterion of every case, and what criteria
        spent preparing the run (``preparation_token_usage``) or re-asking a sample of it
        (``judge_reliability_check``)."""
        check = self.judge_reliability_check
        return TokenUsage.total([self._tally().token_usage or TokenUsage(),
                                 *self.preparation_token_usage.values(),
                                 None if check is None else check.token_usage]) or TokenUsage()

    @property
    def model_token_usage(self) -> TokenUsage | None:
        """What the model under test reported spending (``ExecutionResult.token_usage``),
        kept apart from the judge's spend; None when it reported nothing."""
        return self._tally().model_token_usage

    # Pass rates corrected for judge error (record/_correction.py) --------------------------------
    def corrected_pass_rates(self) -> dict[str, CorrectedRate]:
        """By criterion label: the raw pass rate beside the one corrected with the calibrated
        judge's TPR/TNR, for each judged criterion whose calibration entry matched."""
        stats = self.summary.criterion_stats
        rates: dict[str, CorrectedRate] = {}
        for label, calibration in self.judge_calibration.items():
            counted = stats.get(label)
            rate = None if counted is None else correct(calibration, counted.passed,
                                                        counted.scored)
            if rate is not None:
                rates[label] = rate
        return rates

    @property
    def corrected_pass_rate(self) -> CorrectedRate | None:
        """The run's pass rate corrected for judge error, defined only when one judged
        criterion decides every case (it is the run's only criterion): a case passes only if
        all its criteria pass, and correcting that conjunction would need the judges' joint
        error rates, which no calibration measures. Otherwise see corrected_pass_rates()."""
        labels = list(self.summary.criterion_stats)
        if len(labels) != 1:
            return None
        return self.corrected_pass_rates().get(labels[0])

    @property
    def calibration_found(self) -> bool:
        """Whether the calibration file had an entry for some judged criterion of the run: the
        reports show corrected pass rates (or why not) only then."""
        return any(r.calibrated_threshold is not None for r in self.judge_calibration.values())

    def corrected_run_note(self) -> str:
        """Why the run has no corrected pass rate of its own, when several criteria decide it."""
        if self.corrected_pass_rate is None and len(self.summary.criterion_stats) > 1:
            return NO_RUN_CORRECTION
        return ""

    # The 10xgraph-style API ----------------------------------------------------------------------
    @property
    def summary(self) -> EvalSummary:
        summary = self._tally().summary()
        # Judge spend of no single case: preparing the run, and re-asking a sample of it.
        extra = list(self.preparation_token_usage.items())
        if self.judge_reliability_check is not None:
            extra += [(label, c.token_usage)
                      for label, c in self.judge_reliability_check.criteria.items()
                      if c.token_usage is not None]
        for label, usage in extra:
            summary.total_token_usage = summary.total_token_usage + usage
            stats = summary.criterion_stats.get(label)
            if stats is not None:
                stats.token_usage = usage + stats.token_usage
        return summary

    @property
    def eval_set_name(self) -> str:
        return self.name

    @property
    def failed_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed and c.status != CaseStatus.SKIPPED]

    @property
    def passed_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if c.passed]

    def get_case_result(self, eval_id: str) -> CaseResult | None:
        return next((c for c in self.cases if c.eval_id == eval_id), None)

    def format_summary(self) -> str:
        """The console summary as plain text (10xgraph's ``format_summary``)."""
        return report_views().summary_text(self)

    # Persistence -----------------------------------------------------------------------
    def to_dict(self, *, with_cases: bool = True) -> dict[str, Any]:
        """Plain data; ``with_cases=False`` leaves the cases out (the run store keeps them in
        cases.jsonl), so a million-case report is written without holding its cases."""
        data = self.model_dump(mode="json", exclude={"cases"})
        if with_cases:
            fields = list(data.items())
            at = list(type(self).model_fields).index("cases")
            data = dict(fields[:at])
            data["cases"] = [c.model_dump(mode="json") for c in self.cases]
            data.update(fields[at:])
        data["totals"] = {
            "total": self.total, "evaluated": self.evaluated, "passed": self.passed,
            "failed": self.failed, "skipped": self.skipped, "errors": self.errors,
            "errors_by_kind": self.errors_by_kind, "pass_rate": self.pass_rate,
            "error_rate": self.error_rate, "criterion_errors": self.criterion_errors,
        }
        data["summary"] = self.summary.model_dump(mode="json")
        model_usage = self.model_token_usage
        data["spend"] = {
            "judge": self.token_usage.model_dump(mode="json"),
            "model_under_test": None if model_usage is None else model_usage.model_dump(mode="json"),
        }
        data["warnings"] = self.warnings
        if self.runs_per_case > 1:
            data["trials"] = self.trial_summary()
        corrected = self.corrected_pass_rates()
        if corrected:
            run_rate = self.corrected_pass_rate
            data["corrected"] = {
                "criteria": {label: r.model_dump(mode="json") for label, r in corrected.items()},
                "run": None if run_rate is None else run_rate.model_dump(mode="json")}
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_file(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalReport:
        data = {k: v for k, v in data.items()
                if k not in ("totals", "summary", "spend", "warnings", "trials", "corrected",
                             "judge_cascade")}  # judge_cascade: the JSON report's, derived
        return cls.model_validate(data)

    @classmethod
    def from_file(cls, path: str | Path) -> EvalReport:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def judged_labels(criteria: Any) -> list[str] | None:
    """The labels of the judged criteria among meta.json's criterion descriptions (``name``
    and ``judged`` of each, in order; namesakes labelled as the results are); None when the
    descriptions do not say, as in a run stored before they did."""
    if not isinstance(criteria, list) or not all(
            isinstance(c, dict) and isinstance(c.get("judged"), bool) for c in criteria):
        return None
    labels = unique_labels([str(c.get("name")) for c in criteria])
    return [label for label, c in zip(labels, criteria) if c["judged"]]


def nothing_evaluated_reason(report: EvalReport) -> str:
    """Why a run has no pass rate: no cases, or every case errored or was skipped."""
    if report.total == 0:
        return "the run has no cases"
    parts = []
    if report.errors:
        kinds = ", ".join(f"{kind}={n}" for kind, n in report.errors_by_kind.items())
        parts.append(f"{report.errors} errored ({kinds})")
    if report.skipped:
        parts.append(f"{report.skipped} skipped")
    return f"none of the {report.total} case(s) could be evaluated: {', '.join(parts)}"


def criterion_errors_line(report: EvalReport) -> str:
    """How many criterion results could not be scored, including on cases that FAILED anyway."""
    on_failed = report._tally().criterion_errors_on_failed
    line = f"{report.criterion_errors} criterion errors"
    if on_failed:
        line += f" ({on_failed} on cases that FAILED on another criterion)"
    return line
