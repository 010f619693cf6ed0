"""Issue 10, section 7: where referee departed from its own documents.

EXACT trajectories with extra or missing calls, ROUGE's punctuation rule, ``enabled=False``
inside combinations, a complete CRITERIA_REGISTRY, config read at evaluate time,
``python -m referee``, rapidfuzz's edit distance and deterministic checks off the event loop.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from referee import EvalCase, ExecutionResult, ToolCall
from referee.config import CriterionConfig, MatchType
from referee.criteria import CRITERIA_REGISTRY
from referee.criteria.base import BaseCriterion, SyncCriterion
from referee.criteria.composite import CompositeCriterion, WeightedCriterion
from referee.criteria.keywords import ContainsKeywordsCriterion
from referee.criteria.rouge import RougeMatchCriterion, unigram_set
from referee.criteria.trajectory import TrajectoryMatchCriterion
from referee.evaluators.deterministic import Levenshtein, RegexMatch, levenshtein_distance

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.deterministic import python_levenshtein  # noqa: E402  (the old implementation)


def _calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n) for n in names]


def _trajectory_case(expected: list[str]) -> EvalCase:
    return EvalCase.single_turn("q", expected_tool_trajectory=_calls(*expected))


FIVE = ["search", "open", "read", "summarise", "reply"]


async def test_exact_trajectory_never_passes_with_an_extra_call() -> None:
    criterion = TrajectoryMatchCriterion(CriterionConfig(match_type=MatchType.EXACT, threshold=0.8))
    result = await criterion.evaluate(ExecutionResult(tool_calls=_calls(*FIVE, "delete")),
                                      _trajectory_case(FIVE))
    assert result.score == pytest.approx(5 / 6)  # kept for information
    assert result.passed is False  # although 0.833 >= 0.8
    assert result.details["extra_calls"] == ["delete (call 6)"]
    assert "extra: delete (call 6)" in result.reason
    # An extra call inserted in the middle is named too, not the calls after it.
    middle = await criterion.evaluate(
        ExecutionResult(tool_calls=_calls("search", "delete", *FIVE[1:])), _trajectory_case(FIVE))
    assert middle.passed is False and middle.details["extra_calls"] == ["delete (call 2)"]


async def test_exact_trajectory_never_passes_with_a_missing_call() -> None:
    criterion = TrajectoryMatchCriterion(CriterionConfig(match_type=MatchType.EXACT, threshold=0.8))
    result = await criterion.evaluate(ExecutionResult(tool_calls=_calls(*FIVE[:4])),
                                      _trajectory_case(FIVE))
    assert result.score == pytest.approx(0.8) and result.passed is False
    assert "missing: reply" in result.reason
    exact = await criterion.evaluate(ExecutionResult(tool_calls=_calls(*FIVE)),
                                     _trajectory_case(FIVE))
    assert exact.passed and exact.score == 1.0 and exact.details["extra_calls"] == []
    # The other modes allow extras, as documented.
    in_order = TrajectoryMatchCriterion(CriterionConfig(match_type=MatchType.IN_ORDER))
    assert (await in_order.evaluate(ExecutionResult(tool_calls=_calls(*FIVE, "delete")),
                                    _trajectory_case(FIVE))).passed


async def test_rouge_strips_punctuation_rather_than_splitting_on_it() -> None:
    assert unigram_set("E-mail me; don't wait!") == {"email", "me", "dont", "wait"}
    result = await RougeMatchCriterion().evaluate(
        ExecutionResult(actual_response="Send an e-mail, don't call."),
        EvalCase.single_turn("q", "send an email dont call"))
    assert result.score == 1.0


async def test_disabled_sub_criteria_take_no_part_in_a_combination() -> None:
    keyword_on = ContainsKeywordsCriterion(["refund"])
    keyword_off = ContainsKeywordsCriterion(["missing"], CriterionConfig(enabled=False))
    actual = ExecutionResult(actual_response="refund issued")
    case = EvalCase.single_turn("q")

    both = await CompositeCriterion([keyword_on, keyword_off]).evaluate(actual, case)
    assert both.score == 1.0 and both.passed  # the disabled one would have scored 0.0
    assert both.details["disabled_sub_criteria"] == ["contains_keywords"]
    assert len(both.details["sub_results"]) == 1

    weighted = await WeightedCriterion([(keyword_on, 1.0), (keyword_off, 3.0)]).evaluate(actual, case)
    assert weighted.score == 1.0 and weighted.details["total_weight"] == 1.0

    nothing = await CompositeCriterion([keyword_off]).evaluate(actual, case)
    assert nothing.skipped and "disabled" in nothing.reason


def test_registry_holds_every_criterion_name() -> None:
    assert CRITERIA_REGISTRY["composite_criterion"] is CompositeCriterion
    assert CRITERIA_REGISTRY["weighted_criterion"] is WeightedCriterion
    import referee.criteria as criteria
    from referee.criteria import TemplatedLLMCriterion

    # Every exported criterion class, less the base classes users build their own on.
    bases = {BaseCriterion, SyncCriterion, TemplatedLLMCriterion}
    classes = {obj for name in dir(criteria) if isinstance(obj := getattr(criteria, name), type)
               and issubclass(obj, BaseCriterion) and obj not in bases}
    missing = sorted(cls.name for cls in classes if CRITERIA_REGISTRY.get(cls.name) is not cls)
    assert classes and missing == [], missing


async def test_criteria_read_their_config_when_they_evaluate() -> None:
    actual = ExecutionResult(actual_response="refund issued", tool_calls=_calls("b", "a"))
    case = EvalCase.single_turn("q", expected_tool_trajectory=_calls("a", "b"))

    keywords = ContainsKeywordsCriterion(config=CriterionConfig(keywords=["missing"]))
    keywords.config = CriterionConfig(keywords=["refund"])
    assert (await keywords.evaluate(actual, case)).score == 1.0
    assert keywords.keywords == ["refund"]

    trajectory = TrajectoryMatchCriterion()
    assert not (await trajectory.evaluate(actual, case)).passed  # EXACT by default
    trajectory.config = CriterionConfig(match_type=MatchType.ANY_ORDER, threshold=1.0)
    assert (await trajectory.evaluate(actual, case)).passed


def test_python_dash_m_referee_is_the_referee_command() -> None:
    done = subprocess.run([sys.executable, "-m", "referee", "run", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: referee run")
    assert "3    nothing could be evaluated" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "referee", "run", "nope.txt"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("referee: error: nope.txt")


def test_rapidfuzz_edit_distance_matches_the_textbook_definition() -> None:
    rng = random.Random(3)
    alphabet = "ab cé\u00e9\U0001f600"
    pairs = [("", ""), ("", "abc"), ("kitten", "sitting"), ("flaw", "lawn"), ("é", "e\u0301")]
    pairs += [("".join(rng.choice(alphabet) for _ in range(rng.randrange(40))),
               "".join(rng.choice(alphabet) for _ in range(rng.randrange(40))))
              for _ in range(200)]
    for a, b in pairs:
        assert levenshtein_distance(a, b) == python_levenshtein(a, b), (a, b)


class _WhereDidItRun(SyncCriterion):
    name = "where"

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def evaluate_sync(self, actual, expected):
        self.threads.append(threading.current_thread())
        return self._result(1.0)


async def test_large_deterministic_checks_run_off_the_event_loop() -> None:
    loop_thread = threading.current_thread()
    probe = _WhereDidItRun()
    small = ExecutionResult(actual_response="short")
    long_text = ExecutionResult(actual_response="x" * 5000)
    many_calls = ExecutionResult(tool_calls=_calls(*["t"] * 100))
    for actual in (small, long_text, many_calls):
        await probe.evaluate(actual, EvalCase.single_turn("q"))
    assert [t is loop_thread for t in probe.threads] == [True, False, False]

    # The real checks take the same road: 5,000 characters each way, scored on a worker thread.
    case = EvalCase.single_turn("q", "y" * 5000)
    assert Levenshtein().runs_off_loop(long_text, case)
    result = await Levenshtein().evaluate(long_text, case)
    assert result.details["distance"] == 5000 and result.score == 0.0
    # A user's regex can backtrack catastrophically on any output, so it never runs inline.
    assert RegexMatch(r"(a+)+$").runs_off_loop(small, EvalCase.single_turn("q"))
