"""What a resumed run re-runs, re-scores or keeps: decided once, before any case runs.

``ResumePlan.open`` checks that the stored run is the one being resumed (the same cases, runs
and criteria and judge, unless re-scoring), reopens its directory as the only writer, and
decides for every stored case whether it is kept as recorded, scored again from its stored
output (``rescore``), or run again (unfinished, or errored with ``retry_errors``). A refused
resume leaves the run directory as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.case import EvalCase, canonical_json
from referee.content._parts import IDENTITY
from referee.errors import InputError
from referee.record import CaseResult, CaseStatus
from referee.run.describe import RunDescription, criteria_difference, judge_difference, short_json
from referee.run.engine import StoredOutput
from referee.run.options import RunOptions
from referee.store import RunStore, StoredCases, case_fingerprint, version_number

# meta.json's mark of a re-score under way; the finished re-score's meta.json has none.
RESCORING = "rescoring"


@dataclass(frozen=True)
class ResumePlan:
    """A resumed run's decision for each stored case, and what the report says of it."""

    run_dir: Path
    meta: dict[str, Any]  # the stored meta.json, as it was before the resume
    version: int  # the scoring this resume writes (a re-score or a retry starts a new one)
    rescore: bool
    finished: frozenset[str] = frozenset()  # kept as recorded: not run again
    # Scored again without calling the model: a case's stored output, or one per run.
    outputs: Mapping[str, StoredOutput] = field(default_factory=dict)

    @classmethod
    def open(cls, options: RunOptions, cases: Sequence[EvalCase], keys: list[str],
             description: RunDescription) -> tuple[ResumePlan, RunStore]:
        """Check, reopen and decide; the reopened store is the caller's to release."""
        assert options.resume is not None
        source = str(options.resume)
        # Checked before reopen(), which drops a finished run's report.json: a refused
        # resume must leave the run as it was.
        meta = RunStore(options.resume).read_meta()
        _check_resumable(meta, keys, description, options, source)
        finished: set[str] = set()
        retried = False
        if not options.rescore:
            finished, retried = _cases_to_keep(RunStore(options.resume), cases, keys,
                                               options.retry_errors, source)
        # Scores that a re-score or a retry replaces stay readable as an earlier scoring.
        store = RunStore.reopen(options.resume, new_version=options.rescore or retried)
        outputs: dict[str, StoredOutput] = {}
        try:
            version = version_number(store.read_meta())
            if options.rescore:
                # Until the end rewrites meta.json, cases.jsonl mixes scores of the stored
                # criteria and of these: only finishing the re-score may make it one run.
                store.update_meta(**{RESCORING: True})
                outputs, finished = _stored_outputs(store, options.retry_errors)
        except BaseException:
            store.release()
            raise
        return cls(run_dir=store.run_dir, meta=meta, version=version, rescore=options.rescore,
                   finished=frozenset(finished), outputs=outputs), store


def _stored_outputs(store: RunStore, retry_errors: bool) -> tuple[dict[str, StoredOutput],
                                                                   set[str]]:
    """For a re-score: each stored case's output to score again, and the cases kept as they
    are (no output to score, and not an error to retry)."""
    outputs: dict[str, StoredOutput] = {}
    finished: set[str] = set()
    for stored in StoredCases(store.cases_path):
        if stored.run_results and any(map(_has_output, stored.run_results)):
            # Each run's own output, scored again; a run without one runs again.
            outputs[stored.eval_id] = [r.execution if _has_output(r) else None
                                       for r in stored.run_results]
        elif _has_output(stored) and not stored.run_results and stored.execution is not None:
            outputs[stored.eval_id] = stored.execution
        elif not (retry_errors and stored.status.is_error):
            finished.add(stored.eval_id)
    return outputs, finished


def _has_output(stored: CaseResult) -> bool:
    """Whether a stored case holds what the model produced (re-scoring needs nothing more)."""
    return stored.execution is not None and not stored.execution.error and \
        stored.status is not CaseStatus.MODEL_ERROR


def _cases_to_keep(store: RunStore, cases: Sequence[EvalCase], keys: list[str],
                   retry_errors: bool, source: str) -> tuple[set[str], bool]:
    """The ids of the stored cases a resume keeps (all, or all but those whose last record
    ended in an error), and whether any stored case runs again.

    The case fingerprint covers ids only, and a case given its own id keeps it when edited: a
    kept result recorded for other content would be reported as this case's, so it is refused.
    """
    position = {key: i for i, key in enumerate(keys)}
    errored: dict[str, bool] = {}  # by id, as its last record says (later records win)
    changed: dict[str, tuple[str, Any, Any]] = {}
    for stored in store.stream_cases():
        key = stored.eval_id
        errored[key] = stored.status.is_error
        found = None if key not in position else _changed_field(stored, cases[position[key]])
        if found is None:
            changed.pop(key, None)
        else:
            changed[key] = found
    kept = {key for key, error in errored.items() if not (retry_errors and error)}
    for key, (name, old, new) in changed.items():
        if key in kept:
            raise InputError(
                f"case {key!r} is not the one the stored run recorded: its {name} changed "
                f"({short_json(old)} -> {short_json(new)}); resume with the cases the run was "
                f"started with, or add --rescore (rescore=True) to score the stored outputs "
                f"against these", source=source)
    return kept, len(kept) < len(errored)


def _changed_field(stored: CaseResult, case: EvalCase) -> tuple[str, Any, Any] | None:
    """(field, stored value, current value) where the stored case differs from ``case``."""
    if stored.case is None or stored.case == case or any(
            c.path.startswith("case") for c in stored.converted):
        return None  # an old record without its case, or stand-ins for unstorable values
    # Images and PDFs compare by content: a stored case keeps their hash, not their bytes,
    # nor need they be read from the same path.
    identity = {IDENTITY: True}
    try:  # read back as the stored one was: reading fills in views (ADK metadata, turns)
        now = EvalCase.model_validate_json(case.model_dump_json()).model_dump(
            mode="json", context=identity)
    except ValueError:
        return None
    before = stored.case.model_dump(mode="json", context=identity)
    return next(((name, before.get(name), now.get(name)) for name in type(case).model_fields
                 if canonical_json(before.get(name)) != canonical_json(now.get(name))), None)


def _check_resumable(meta: dict[str, Any], keys: list[str], description: RunDescription,
                     options: RunOptions, source: str) -> None:
    if meta.get("case_fingerprint") != case_fingerprint(keys):
        state = "finished" if RunStore(source).is_finished else "interrupted"
        raise InputError(
            f"these {len(keys)} case(s) are not the ones the {state} run was started with "
            f"({len(meta.get('case_ids') or [])} case(s))", source=source,
            expected="the same cases, in the same order")
    if meta.get(RESCORING) and not options.rescore:
        raise InputError(
            "a re-score of this run was interrupted, so its cases hold scores of two sets of "
            "criteria; finish it with --rescore (rescore=True)", source=source)
    stored_runs = meta.get("runs") or 1
    if stored_runs != options.runs:
        raise InputError(
            f"the stored run ran each case {stored_runs} time(s), this one asks for "
            f"{options.runs}", source=source, expected=f"runs={stored_runs}")
    stored = meta.get("criteria")
    if options.rescore or not isinstance(stored, list):  # runs stored before this check
        return
    difference = criteria_difference(stored, description.criteria)
    if difference:
        raise InputError(
            f"the criteria differ from the stored run's: {difference}; resume with the same "
            f"criteria, or add --rescore (rescore=True) to score the stored outputs with these",
            source=source)
    # A judge chosen outside the criteria (configure(), JUDGE_MODEL) is in none of their
    # settings: the run's resolved judge must match too, or the report would name one judge
    # for cases that another one scored.
    difference = judge_difference(meta.get("judge") or {}, description.judge)
    if difference:
        raise InputError(
            f"the judge differs from the stored run's: {difference}; resume with the same "
            f"judge, or add --rescore (rescore=True) to score the stored outputs with this one",
            source=source)
