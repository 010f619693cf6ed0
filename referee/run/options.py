"""How to run: one frozen ``RunOptions``, checked whole when it is built.

Every front door builds one: the CLI from its arguments (``RunOptions.from_command_line``), and
the ``EvalSuite``/``AgentEvaluator`` keyword arguments are sugar that build it. Nothing after
construction checks or changes an option again: report formats are parsed here, the resume
rules (``retry_errors``/``rescore`` need ``resume``), the gates and the ranges are checked here,
each in a one-line error that names the option as the caller spelled it (``retry_errors=True``
in Python, ``--retry-errors`` on the command line).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from referee.report.writers import parse_formats
from referee.report_formats import default_formats
from referee.run.case_retry import JudgeRetry
from referee.run.engine import DEFAULT_CONCURRENCY, check_engine_settings
from referee.run.gates import validate_gates
from referee.run.judge_gate import JudgeGate
from referee.run.sequential import DEFAULT_CONFIDENCE, DEFAULT_SEED
from referee.store import runs_dir_or_default

FlakyPolicy = Literal["quarantine", "fail"]

# How each option is named in errors: (Python keyword, command-line flag).
_SPELLING: dict[str, tuple[str, str]] = {
    "resume": ("resume=RUN_DIR", "--resume RUN_DIR"),
    "retry_errors": ("retry_errors=True", "--retry-errors"),
    "rescore": ("rescore=True", "--rescore"),
    "formats": ("formats", "--format"),
    "fail_threshold": ("fail_threshold", "--fail-threshold RATE"),
    "gate_on": ("gate_on='corrected'", "--gate-on corrected"),
    "sequential": ("sequential=True", "--sequential"),
    "sequential_confidence": ("sequential_confidence", "--sequential-confidence"),
    "flaky": ("flaky", "--flaky"),
    "runs": ("runs=N", "--trials N"),
}
_COMMAND_LINE = "command line"
# Who is building the options, for the spelling of their errors (set by flag_spelling).
_spelling: ContextVar[str] = ContextVar("run_options_spelling", default="python")


@contextmanager
def flag_spelling() -> Iterator[None]:
    """Options built inside name the command line's flags in their errors (a front door's
    sugar called by the CLI)."""
    token = _spelling.set(_COMMAND_LINE)
    try:
        yield
    finally:
        _spelling.reset(token)


def _spelled(option: str, info: ValidationInfo) -> str:
    python, flag = _SPELLING.get(option, (option, option))
    return flag if (info.context or {}).get("spelling") == _COMMAND_LINE else python


def _one_line(exc: ValidationError) -> str:
    """The first error as the sentence its validator wrote (it names the option)."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "value_error" or not where:
        return message
    if first["type"] == "extra_forbidden":
        return f"unexpected option {where!r}"
    return f"{where}: {message}"


class RunOptions(BaseModel):
    """How to run, shared by every front door; frozen once built."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    concurrency: int = Field(DEFAULT_CONCURRENCY, strict=True)
    # Per case (per run of a case, with runs > 1), in seconds.
    timeout: float | None = Field(None, strict=True)
    # The CLI's -q: no progress and no console report (formats drop "console").
    quiet: bool = False
    verbose: bool = True
    save: bool = True
    # Where the run directory goes: given, else $REFEREE_RUNS_DIR, else .referee/runs (resolved
    # here, once, by the store's one rule), so what a run uses is what its options say.
    runs_dir: Path = Field(default_factory=lambda: runs_dir_or_default())
    # The new run's directory name under runs_dir; None: one is made when the run starts. A
    # caller that must say where the run is before it ends (the CLI's --resume hint after
    # Ctrl-C) gives one (referee.record.new_run_id()), and reads run_dir.
    run_id: str | None = None
    resume: str | Path | None = None
    # With resume: run again the cases that ended in an error (an outage, a timeout), not only
    # the unfinished ones.
    retry_errors: bool = False
    # With resume: score the stored outputs with the criteria given now (which may differ from
    # the stored run's) instead of refusing; the model is called only for cases without one.
    rescore: bool = False
    # Report formats, parsed: "console" prints the summary, the others are written as files.
    # Not given (None): report_formats.default_formats, the same rule for every front door.
    formats: tuple[str, ...] = ()
    metadata: dict[str, Any] = {}
    # How the command line started the run (its arguments and working directory), kept in
    # meta.json so that ``referee resume RUN_DIR`` can start it again; None from Python.
    command: dict[str, Any] | None = None
    # Where the cases execute: None/"local" (this process), "ray", or an executor object.
    backend: Any = None
    # multivon's JudgeRetry: run a case again when it ends in a transient status.
    judge_retry: JudgeRetry | None = None
    # multivon's runs=N: each case runs N times, and the report measures how stable it is.
    runs: int = Field(1, strict=True)
    # multivon's evaluator_concurrency: at most this many criteria score at once in the run.
    criterion_concurrency: int | None = Field(None, strict=True)
    # With runs > 1: stop running a case once its runs settle it (a sequential test).
    early_stop: bool = False
    # Gates, applied by the front door once the run is stored (run/gates.py).
    fail_threshold: float | None = None
    max_error_rate: float | None = None
    judge_gate: JudgeGate | None = None
    # Sequential gate (run/sequential.py): cases in a seeded random order, and no case starts
    # once fail_threshold is settled at sequential_confidence (anytime-valid).
    sequential: bool = False
    sequential_confidence: float = DEFAULT_CONFIDENCE
    sequential_seed: int = Field(DEFAULT_SEED, strict=True)
    # With runs > 1: what the gate does with flaky cases (a verdict that flipped between runs):
    # "quarantine" leaves them out of fail_threshold's pass rate, "fail" fails the gate on any;
    # None counts them as the failures their status says (run/gates.py).
    flaky: FlakyPolicy | None = None

    def __init__(self, **values: Any) -> None:
        try:
            self.__pydantic_validator__.validate_python(
                values, self_instance=self, context={"spelling": _spelling.get()})
        except ValidationError as exc:
            raise ValueError(_one_line(exc)) from None

    @classmethod
    def from_command_line(cls, **values: Any) -> RunOptions:
        """Options built from ``referee run``'s arguments: errors name the flags."""
        with flag_spelling():
            return cls(**values)

    @model_validator(mode="before")
    @classmethod
    def _quiet_and_default_formats(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        if values.get("quiet"):
            values = {**values, "verbose": False}
        if "concurrency" in values and values["concurrency"] is None:
            # Not chosen: the default applies, and concurrency_chosen says so.
            values = {k: v for k, v in values.items() if k != "concurrency"}
        if values.get("formats") is None:
            values = {**values, "formats": default_formats(
                verbose=values.get("verbose", True) is not False,
                stored=values.get("save", True) is not False or values.get("resume") is not None)}
        return values

    @property
    def concurrency_chosen(self) -> bool:
        """Whether the caller set ``concurrency`` (a run by batch API raises the default)."""
        return "concurrency" in self.model_fields_set

    @field_validator("concurrency", mode="before")
    @classmethod
    def _default_concurrency(cls, value: Any) -> Any:
        return DEFAULT_CONCURRENCY if value is None else value

    @field_validator("runs_dir", mode="before")
    @classmethod
    def _runs_dir(cls, value: Any) -> Path:
        if value is not None and not isinstance(value, (str, Path)):
            raise ValueError(f"runs_dir must be a path, got {type(value).__name__}")
        return runs_dir_or_default(value)

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        if value is not None and (not value or value != Path(value).name or value in (".", "..")):
            raise ValueError(f"run_id must be a directory name, got {value!r}")
        return value

    @field_validator("judge_retry", mode="before")
    @classmethod
    def _judge_retry(cls, value: Any) -> JudgeRetry | None:
        if value is not None and not isinstance(value, JudgeRetry):
            raise TypeError(f"judge_retry must be a JudgeRetry, got {type(value).__name__}")
        return value

    # Formats -------------------------------------------------------------------------------
    @field_validator("formats", mode="before")
    @classmethod
    def _formats(cls, value: Any, info: ValidationInfo) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, (str, Sequence)):
            raise ValueError(f"{_spelled('formats', info)}: expected names such as "
                             f"'json,html', got {type(value).__name__}")
        try:
            formats = parse_formats(value)
        except ValueError as exc:
            raise ValueError(f"{_spelled('formats', info)}: {exc}") from None
        if info.data.get("quiet"):
            formats = [f for f in formats if f != "console"]
        return tuple(formats)

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"metadata must be a dict, got {type(value).__name__}")
        return dict(value)  # the caller's dict stays the caller's

    # Rules across options ------------------------------------------------------------------
    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> RunOptions:
        resume = _spelled("resume", info)
        if self.retry_errors and self.resume is None:
            raise ValueError(f"{_spelled('retry_errors', info)} goes with {resume} "
                             f"(the run whose errors to retry)")
        if self.rescore and self.resume is None:
            raise ValueError(f"{_spelled('rescore', info)} goes with {resume} "
                             f"(the run whose outputs to re-score)")
        if self.file_formats and not self.save and self.resume is None:
            raise ValueError(f"report formats {', '.join(self.file_formats)} need a stored run "
                             f"(save=True)")
        if self.judge_gate is not None and self.judge_gate.gate_on == "corrected" \
                and self.fail_threshold is None:
            raise ValueError(f"{_spelled('gate_on', info)} gates "
                             f"{_spelled('fail_threshold', info)}; give one")
        validate_gates(self.fail_threshold, self.max_error_rate, self.judge_gate)
        if self.sequential:
            self._check_sequential(info)
        if self.flaky is not None and self.runs < 2:
            raise ValueError(f"{_spelled('flaky', info)} {self.flaky} needs several runs of each "
                             f"case to see a verdict flip: give {_spelled('runs', info)} with "
                             "N >= 2")
        if self.flaky == "quarantine" and self.judge_gate is not None \
                and self.judge_gate.gate_on == "corrected":
            raise ValueError(f"{_spelled('flaky', info)} quarantine leaves flaky cases out of the "
                             f"raw pass rate; it does not go with {_spelled('gate_on', info)} yet")
        check_engine_settings(concurrency=self.concurrency, timeout=self.timeout, runs=self.runs,
                              criterion_concurrency=self.criterion_concurrency)
        return self

    def _check_sequential(self, info: ValidationInfo) -> None:
        sequential = _spelled("sequential", info)
        if self.fail_threshold is None:
            raise ValueError(f"{sequential} stops once {_spelled('fail_threshold', info)} is "
                             "settled; give one")
        if not 0.0 < self.sequential_confidence < 1.0:
            raise ValueError(f"{_spelled('sequential_confidence', info)} must be between 0 and "
                             f"1, got {self.sequential_confidence}")
        if self.backend not in (None, "local"):
            raise ValueError(f"{sequential} runs on the local backend only")

    # Derived -------------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path | None:
        """Where this run is stored, when that is known before it starts: the resumed run's
        directory, or ``runs_dir/run_id``; None for a run not stored or not yet named."""
        if self.resume is not None:
            return Path(self.resume)
        if self.save and self.run_id is not None:
            return self.runs_dir / self.run_id
        return None

    @property
    def file_formats(self) -> tuple[str, ...]:
        """The formats written as files in the run directory (all but the console)."""
        return tuple(f for f in self.formats if f != "console")

    @property
    def prints_summary(self) -> bool:
        """Formats, when given, decide what is printed; without them ``verbose`` does."""
        return "console" in self.formats or (self.verbose and not self.formats)
