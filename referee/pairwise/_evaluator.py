"""The pairwise judge: one evaluator, spelt in both API styles, over the core in ``_judging``.

Given two outputs, ``compare`` returns the pair's verdict. As a criterion in a run (one output
per case), the model's output is compared with the case's reference answer
(``expected_output``): 1.0 when the judge prefers the model's output in both orders, 0.5 for a
tie (position-inconsistent verdicts included), 0.0 when it prefers the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from referee.case import EvalCase
from referee.config import CriterionConfig, Rubric
from referee.content._scope import case_parts
from referee.criteria.llm.caller import LLMCallerMixin
from referee.evaluators.qag import JudgeEvaluator, case_cache_group, requires
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig
from referee.messages import content_text
from referee.pairwise._judging import PairCriterion, PairVerdict, judge_pair
from referee.pairwise._media import PairMedia
from referee.result import CriterionResult

# The score of the model's output against the reference, by the side the judge preferred
# (the reference is side "a", the model's output side "b").
SCORE_OF = {"b": 1.0, "tie": 0.5, "a": 0.0}


def _text(output: str | ExecutionResult | Any) -> str:
    if isinstance(output, str):
        return output
    return ExecutionResult.coerce(output).actual_response or ""


def _media_holder(output: str | ExecutionResult | Any) -> ExecutionResult | None:
    """Where an output given to ``compare`` holds its images: none in a plain text."""
    return None if isinstance(output, str) else ExecutionResult.coerce(output)


async def _against_reference(owner: str, cfg: JudgeConfig, criterion: PairCriterion,
                             actual: ExecutionResult, expected: EvalCase, *,
                             both_orders: bool) -> tuple[float, dict[str, Any], PairVerdict]:
    # The reference answer is side A: its images (expected_media) are A's, not the case's.
    media = PairMedia.of(expected, None, actual,
                         reference=getattr(expected, "expected_media", None)
                         ).with_bytes(restored=case_parts())
    verdict = await judge_pair(cfg, criterion, output_a=expected.expected_output or "",
                               output_b=actual.actual_response or "",
                               user_input=content_text(expected.input), both_orders=both_orders,
                               cache_group=case_cache_group(expected), owner=owner, media=media)
    side = {"a": "the reference answer", "b": "the model output", "tie": "neither"}
    details = {
        **verdict.to_dict(),
        **criterion.to_dict(),
        "reason": f"judge preferred {side[verdict.preferred]}: {verdict.reason}",
        "compared_with": "expected_output",
    }
    details.pop("token_usage")  # the result carries it
    return SCORE_OF[verdict.preferred], details, verdict


class PairwiseJudge(JudgeEvaluator):
    """EvalSuite-style pairwise judge: which of two outputs better meets ``criteria`` (free
    text), a ``rubric``, or a QAG set of yes/no ``questions`` (the side that wins more of them).

    ``both_orders=True`` (the default) asks each pair twice, swapped, and counts a verdict that
    changes with the order as a tie: two judge requests per pair (per question).
    """

    default_threshold = 0.5  # at least a tie with the reference

    def __init__(self, criteria: str | None = None, *,
                 rubric: Sequence[str | Rubric] | None = None,
                 questions: Sequence[str] | None = None, name: str = "pairwise",
                 both_orders: bool = True, judge: JudgeConfig | None = None,
                 threshold: float | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"PairwiseJudge: name must be a non-empty string, got {name!r}")
        if not isinstance(both_orders, bool):
            raise TypeError(f"PairwiseJudge: both_orders must be True or False, got {both_orders!r}")
        self.criterion = PairCriterion.of(criteria, rubric, questions, owner="PairwiseJudge")
        super().__init__(threshold=threshold, judge=judge)
        self.name = name
        self.both_orders = both_orders

    async def compare(self, case: EvalCase | str, output_a: Any, output_b: Any) -> PairVerdict:
        """The verdict on two outputs for ``case``; JudgeUnavailable when there is none."""
        case = case if isinstance(case, EvalCase) else EvalCase(input=case)
        return await judge_pair(self.judge_config(), self.criterion, output_a=_text(output_a),
                                output_b=_text(output_b), user_input=content_text(case.input),
                                both_orders=self.both_orders,
                                cache_group=case_cache_group(case), owner=self.name,
                                media=PairMedia.of(case, _media_holder(output_a),
                                                   _media_holder(output_b)))

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        missing = requires(self.requirer, expected, "expected_output")
        if missing is not None:
            return self._skipped(missing)
        cfg = self.judge_config()  # JudgeUnavailable when no provider can serve it
        score, details, verdict = await _against_reference(
            self.name, cfg, self.criterion, actual, expected, both_orders=self.both_orders)
        return self._scored(cfg, score, details, verdict.token_usage)

    @property
    def requirer(self) -> str:
        """Who a skipped case names as needing ``expected_output``."""
        return "PairwiseJudge"


# Its judge= is a JudgeConfig only, narrower than PairwiseJudge's (which may be a panel).
class PairwisePreferenceCriterion(LLMCallerMixin, PairwiseJudge):  # type: ignore[misc]
    """AgentEvaluator-style spelling of ``PairwiseJudge``: the final response against the
    case's expected response, on ``criterion`` and/or ``config.rubrics``, judged by
    ``config.judge_model`` (or ``judge=``) at that API's temperature. Scores 1.0 / 0.5 / 0.0 as
    ``PairwiseJudge`` does; only its constructor and its judge's rules (``judge_defaults``,
    ``LLMCallerMixin.look_up_judge``) differ."""

    name = "pairwise_preference"
    description = "Pairwise judgement of the final response against the expected response"
    # One judge, named by model: a config's judge_panel does not apply (as before issue 29).
    accepts_panel = False

    def __init__(self, config: CriterionConfig | None = None, *, criterion: str | None = None,
                 both_orders: bool = True, judge: JudgeConfig | None = None) -> None:
        config = config if config is not None else CriterionConfig(threshold=0.5)
        self.criterion = PairCriterion.of(criterion, config.rubrics,
                                          owner="PairwisePreferenceCriterion")
        JudgeEvaluator.__init__(self, threshold=config.threshold, judge=judge)
        self.config = config
        self.both_orders = both_orders

    @property
    def requirer(self) -> str:
        return self.name
