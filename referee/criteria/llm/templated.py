"""TemplatedLLMCriterion: build a prompt, sample the judge, average, explain."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.criteria.base import BaseCriterion
from referee.criteria.llm.caller import (
    LLMCallerMixin,
    is_no_provider_reply,
    logger,
    recording_replies,
    sample_index_scope,
)
from referee.criteria.llm.replies import reply_text
from referee.errors import InputError, JudgeUnavailable
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig, reply_evidence
from referee.judge.cascade import JudgeCascade, check_judge_or_cascade
from referee.judge.panel import JudgePanel, ask_panel, combine_member_scores
from referee.result import CriterionResult, ErrorKind
from referee.usage import TokenUsage

ALL_SAMPLES_FAILED = "All LLM samples failed"


def _in_range(scores: list[float]) -> list[float]:
    """Sample scores held to [0, 1]: a subclass's own reading of a reply may leave one outside."""
    return [min(1.0, max(0.0, float(s))) for s in scores]


class SampleBatch(tuple):  # type: ignore[type-arg]
    """``(scores, reasonings, per_sample_extras, token_usage)`` as 10xgraph returns it,
    plus what ``evaluate`` needs to classify outcomes: the dropped samples' exceptions and
    whether any score came from the no-provider fallback."""

    failures: list[Exception]
    provider_fallback: bool
    # One entry per sample, in sample order, failed ones included: its score (None when it
    # failed), the error, and its raw reply (redacted, bounded), so a stored run can be audited.
    sample_replies: list[dict[str, Any]]

    def __new__(cls, scores: list[float], reasonings: list[str],
                extras: list[dict[str, Any]], token_usage: TokenUsage, *,
                failures: list[Exception] | None = None,
                provider_fallback: bool = False,
                sample_replies: list[dict[str, Any]] | None = None) -> SampleBatch:
        batch = super().__new__(cls, (scores, reasonings, extras, token_usage))
        batch.failures = list(failures or [])
        batch.provider_fallback = provider_fallback
        batch.sample_replies = list(sample_replies or [])
        return batch


class TemplatedLLMCriterion(LLMCallerMixin, BaseCriterion):
    """Base of every LLM-as-judge criterion; subclasses implement ``_build_prompt``.

    ``evaluate`` asks the judge ``config.num_samples`` times concurrently, averages the scores
    and returns the combined token usage. A sample that raises is logged and dropped, and so
    is a reply with no usable top-level ``score`` (missing, nested, not a number, NaN, outside
    [0, 1]: never 0.0, never clamped); if none succeeds the result is the failure
    ``"All LLM samples failed"`` (``error_kind="judge"`` when every failure was the judge's,
    else ``"evaluator"``). ``details["sample_replies"]`` keeps every sample's raw reply.

    Besides what ``_build_details`` returns, ``details`` always has ``reason`` (unless the
    subclass set it: the mean score and the reasoning of the sample closest to it) and
    ``judge_model``; ``failed_samples`` when some samples were dropped; ``judge_unavailable``
    when the score is 10xgraph's 0.5 "No LLM provider available" placeholder. A case with
    nothing to judge scores 1.0 as documented, with a ``note`` and ``skipped=True``.
    """

    name = "templated_llm_criterion"
    description = "LLM-as-judge criterion"
    reads = ("actual_response",)

    def __init__(self, config: CriterionConfig | None = None, *,
                 judge: JudgeConfig | JudgePanel | JudgeCascade | list[JudgeConfig] | None = None
                 ) -> None:
        super().__init__(config)
        judge = check_judge_or_cascade(type(self).__name__, judge)
        if not self.accepts_panel and (isinstance(judge, JudgePanel)
                                       or self.config.judge_panel is not None):
            raise TypeError(f"{type(self).__name__}: judge must be a JudgeConfig; this "
                            "criterion does not take a judge panel")
        self.panel = judge if isinstance(judge, JudgePanel) else None
        self.judge = judge if isinstance(judge, JudgeConfig) else None
        if isinstance(judge, JudgeCascade):
            self.cascade = judge

    # Hooks -----------------------------------------------------------------------------------

    def _get_skip_result(self, actual: ExecutionResult,
                         expected: EvalCase) -> CriterionResult | None:
        """A ready result when there is nothing to judge, else None. Default: empty response."""
        if not (actual.actual_response or "").strip():
            return self._nothing_to_judge("No response to evaluate")
        return None

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement _build_prompt()")

    def _collect_extras(self, result_dict: dict[str, Any]) -> dict[str, Any]:
        """Criterion-specific fields of one parsed reply."""
        return {}

    def _aggregate_extras(self, per_sample: list[dict[str, Any]]) -> dict[str, Any]:
        """Merge the per-sample extras into entries of the details dict."""
        return {}

    def _build_details(self, scores: list[float], reasonings: list[str],
                       aggregated_extras: dict[str, Any], final_score: float) -> dict[str, Any]:
        return {"samples": len(scores), "reasonings": reasonings, **aggregated_extras}

    def _sample_count(self) -> int:
        return self.config.num_samples

    def _summarize(self, scores: list[float], reasonings: list[str], final_score: float) -> str:
        """``details["reason"]``: the mean, and the reasoning of the most typical sample."""
        typical = min(range(len(scores)), key=lambda i: abs(scores[i] - final_score))
        head = (f"Judge score {final_score:.2f}" if len(scores) == 1
                else f"Mean judge score {final_score:.2f} over {len(scores)} samples")
        text = reasonings[typical].strip() if typical < len(reasonings) else ""
        return f"{head}: {text}" if text else head

    # Sampling --------------------------------------------------------------------------------

    async def _run_samples(self, prompt: str, judge: JudgeConfig | None = None) -> SampleBatch:
        """Ask the judge ``num_samples`` times at once: ``(scores, reasonings, extras, usage)``.
        ``judge``: a panel member to ask instead of the criterion's one judge."""
        count = self._sample_count()
        outcomes = await asyncio.gather(
            *(self._one_sample(prompt, index, judge) for index in range(count)),
            return_exceptions=True)
        scores: list[float] = []
        reasonings: list[str] = []
        extras: list[dict[str, Any]] = []
        usages: list[TokenUsage | None] = []
        failures: list[Exception] = []
        samples: list[dict[str, Any]] = []
        fallback = False
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancellation and interrupts are not sample failures
                logger.warning("%s: judge sample %d of %d failed: %s: %s", self.name, index + 1,
                               count, type(outcome).__name__, outcome)
                failures.append(outcome)
                spent = getattr(outcome, "token_usage", None)
                usages.append(spent if isinstance(spent, TokenUsage) else None)
                evidence = getattr(outcome, "details", None)
                samples.append({"sample": index, "score": None,
                                "error": f"{type(outcome).__name__}: {outcome}",
                                "raw_reply": evidence.get("raw_reply")
                                if isinstance(evidence, dict) else None})
                continue
            score, reasoning, extra, usage, from_fallback, raw = outcome
            scores.append(score)
            reasonings.append(reasoning)
            extras.append(extra)
            usages.append(usage)
            fallback = fallback or from_fallback
            samples.append({"sample": index, "score": score, "raw_reply": raw})
        return SampleBatch(scores, reasonings, extras, TokenUsage.total(usages) or TokenUsage(),
                           failures=failures, provider_fallback=fallback,
                           sample_replies=samples)

    async def _one_sample(self, prompt: str, index: int, judge: JudgeConfig | None = None
                          ) -> tuple[float, str, dict[str, Any], TokenUsage, bool, str | None]:
        with sample_index_scope(index), recording_replies() as recorded:
            # The one judge through the 10xgraph-style hook (a subclass may answer it itself);
            # a panel member asked directly.
            reply, usage = await (self._call_llm_json(prompt) if judge is None
                                  else self._ask_json(judge, prompt, index))
        # A subclass that answers _call_llm_json itself sends no reply through the judge: its
        # parsed object is the evidence.
        raw = recorded[-1] if recorded else reply_evidence(
            json.dumps(reply, ensure_ascii=False, default=str))
        try:
            if not isinstance(reply, dict):
                raise JudgeUnavailable(f"judge reply is not a JSON object: {reply!r}")
            return (self._score_from_reply(reply), reply_text(reply),
                    self._collect_extras(reply), usage, is_no_provider_reply(reply), raw)
        except Exception as exc:
            exc.token_usage = usage  # type: ignore[attr-defined]  # an unusable reply still cost
            evidence = getattr(exc, "details", None)
            if isinstance(evidence, dict):
                evidence.setdefault("raw_reply", raw)
            raise

    # Template --------------------------------------------------------------------------------

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        try:
            skip = self._get_skip_result(actual, expected)
            if skip is not None:
                return skip
            prompt = self._build_prompt(actual, expected)
            panel = self.judge_panel()
            if panel is not None:
                return await self._panel_result(panel, prompt)
            batch = await self._run_samples(prompt)
            scores, reasonings, extras, token_usage = batch
            failures: list[Exception] = getattr(batch, "failures", [])
            samples: list[dict[str, Any]] = getattr(batch, "sample_replies", [])
            if not scores:
                return self._all_samples_failed(failures, token_usage, samples)
            scores = _in_range(scores)
            final_score = math.fsum(scores) / len(scores)
            details = self._build_details(scores, reasonings,
                                          self._aggregate_extras(extras), final_score)
            details.setdefault("reason", self._summarize(scores, reasonings, final_score))
            details.setdefault("judge_model", self.judge_model_name)
            if samples:
                details["sample_replies"] = samples
            if failures:
                details["failed_samples"] = len(failures)
            if getattr(batch, "provider_fallback", False):
                # The 10xgraph-style API's 0.5 stays, but runners must count it as JUDGE_ERROR.
                details["judge_unavailable"] = True
                details["reason"] = (
                    f"No LLM provider available for judge model {self.judge_model_name!r}; "
                    f"the score {final_score:.2f} is a placeholder, not a verdict")
            return self._result(final_score, details, token_usage)
        except Exception as exc:
            logger.exception("%s evaluation failed", self.name)
            kind: ErrorKind = "judge" if isinstance(exc, JudgeUnavailable) else "evaluator"
            message = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, JudgeUnavailable) and "panel" in exc.details:  # below quorum
                return self._error(message, kind, {"reason": message, **exc.details},
                                   exc.token_usage)
            return self._error(message, kind)

    async def _panel_result(self, panel: JudgePanel, prompt: str) -> CriterionResult:
        """Each member sampled as the one judge would be; its mean score is its answer."""
        async def ask(member: JudgeConfig) -> tuple[tuple[float, list[str]], TokenUsage]:
            batch = await self._run_samples(prompt, member)
            scores, reasonings, _, usage = batch
            if batch.provider_fallback or not scores:
                problem = ("no LLM provider available" if batch.provider_fallback
                           else ALL_SAMPLES_FAILED)
                error = JudgeUnavailable(f"{member.provider}/{member.model}: {problem}"
                                         + (f" ({batch.failures[0]})" if batch.failures else ""))
                error.token_usage = usage
                raise error
            clamped = _in_range(scores)
            return (math.fsum(clamped) / len(clamped), reasonings), usage

        answers = await ask_panel(self.name, panel, ask)
        score, reason, summary = combine_member_scores(
            answers, lambda answer: answer[0], lambda answer: {"reasonings": answer[1]})
        details = {"reason": reason, "panel": summary,
                   "judge_model": ", ".join(m.label for m in answers.members)}
        return self._result(score, details, answers.usage)

    # Results ---------------------------------------------------------------------------------

    def _nothing_to_judge(self, note: str, **extra: Any) -> CriterionResult:
        """10xgraph scores a case with nothing to judge 1.0; it is flagged ``skipped`` so
        reports show it as not evaluated rather than as a judged pass."""
        return CriterionResult(
            criterion=self.name, score=1.0, passed=1.0 >= self.threshold,
            threshold=self.threshold, details={"note": note, "reason": note, **extra},
            skipped=True,
        )

    def _error(self, message: str, kind: ErrorKind, details: dict[str, Any] | None = None,
               token_usage: TokenUsage | None = None) -> CriterionResult:
        return CriterionResult(
            criterion=self.name, score=0.0, passed=False, threshold=self.threshold,
            error=message, error_kind=kind, details=details or {"reason": message},
            token_usage=token_usage,
        )

    def _all_samples_failed(self, failures: list[Exception], token_usage: TokenUsage | None,
                            samples: list[dict[str, Any]] | None = None) -> CriterionResult:
        judge_down = bool(failures) and all(isinstance(f, JudgeUnavailable) for f in failures)
        messages = [f"{type(f).__name__}: {f}" for f in failures]
        reason = ALL_SAMPLES_FAILED + (f" ({messages[0]})" if messages else "")
        usage = token_usage if token_usage is not None and token_usage.requests else None
        details: dict[str, Any] = {"reason": reason, "sample_errors": messages,
                                   "judge_model": self.judge_model_name}
        # The replies that yielded no score (redacted excerpts): the evidence of what went wrong.
        found = (getattr(f, "details", None) for f in failures)
        raw = [d["raw_reply"] for d in found if isinstance(d, dict) and "raw_reply" in d]
        if raw:
            details["raw_replies"] = raw
        if samples:
            details["sample_replies"] = samples
        if all(isinstance(f, InputError) for f in failures) and messages:
            # The case's own content is at fault (an image that cannot be decoded, a PDF past
            # the provider's page limit): the error says which, as the other families' do.
            return self._error(messages[0], "evaluator", details=details, token_usage=usage)
        return self._error(ALL_SAMPLES_FAILED, "judge" if judge_down else "evaluator",
                           details=details, token_usage=usage)
