"""CheckEvaluator: a plain-English criterion turned into yes/no questions, scored with QAG.

Questions are generated once per run in ``prepare()`` (the suite calls it before the case loop),
so no case pays for generation and a broken setup surfaces before any case runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import warnings
from typing import Any

from referee.case import EvalCase
from referee.errors import JudgeUnavailable
from referee.evaluators.prompts import QUESTION_GENERATION_SYSTEM, question_generation_prompt
from referee.evaluators.qag import QAGEvaluator, Question, case_blocks
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig, get_judge, parse_json_object
from referee.result import CriterionResult
from referee.usage import TokenUsage

logger = logging.getLogger(__name__)

MAX_CRITERION_CHARS = 300
MIN_QUESTIONS, MAX_QUESTIONS = 1, 10
GENERATION_ATTEMPTS = 2
FALLBACK_TAG = "[⚠ question generation failed — using fallback]"


def derive_name(criterion: str, max_len: int = 50) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", criterion.lower()).strip("_")
    if len(slug) > max_len:
        slug = slug[:max_len].rsplit("_", 1)[0] or slug[:max_len]
    return slug or "check"


def _generated_questions(text: str) -> list[str]:
    """The question strings in a generation reply; ValueError when there are none."""
    try:
        raw = parse_json_object(text, ("questions",)).get("questions")
    except ValueError:
        # Some judges answer with the bare array despite the requested object.
        try:
            raw = json.loads(text.strip())
        except ValueError:
            raise ValueError("reply holds no JSON object or array") from None
    if not isinstance(raw, list):
        raise ValueError("reply has no 'questions' list")
    questions: list[str] = []
    for item in raw:
        if isinstance(item, str) and item.strip() and item.strip() not in questions:
            questions.append(item.strip())
    if not questions:
        raise ValueError("reply's 'questions' list holds no non-empty strings")
    return questions


def _yields_questions(text: str) -> bool:
    return bool(_generated_questions(text))


class CheckEvaluator(QAGEvaluator):
    """Auto-generated yes/no questions for one criterion; every question expects "Yes".

    ``threshold`` left out: a calibration file's entry when one applies, else 0.7.
    """

    def __init__(self, criterion: str, threshold: float | str | None = None,
                 num_questions: int = 3,
                 questions: list[str] | None = None, name: str | None = None,
                 judge: JudgeConfig | None = None, *, batch: bool | str = False) -> None:
        if not isinstance(criterion, str) or not criterion.strip():
            raise ValueError(f"CheckEvaluator: criterion must be a non-empty string, "
                             f"got {criterion!r}")
        criterion = criterion.strip()
        if len(criterion) > MAX_CRITERION_CHARS:
            raise ValueError(
                f"CheckEvaluator: criterion is {len(criterion)} characters long; the limit is "
                f"{MAX_CRITERION_CHARS}. Shorten it, or split it into several checks: "
                f"{criterion[:60]!r}...")
        if isinstance(num_questions, bool) or not isinstance(num_questions, int):
            raise ValueError(f"CheckEvaluator: num_questions must be an integer, "
                             f"got {num_questions!r}")
        if name is not None and (not isinstance(name, str)):
            raise ValueError(f"CheckEvaluator: name must be a string, got {name!r}")
        super().__init__(threshold=threshold, judge=judge, batch=batch)
        self.criterion = criterion
        self.num_questions = max(MIN_QUESTIONS, min(MAX_QUESTIONS, num_questions))
        self.name = name.strip() if name and name.strip() else derive_name(criterion)
        self._questions: list[str] | None = self._pinned(questions)
        self._pinned_questions = self._questions is not None
        self._used_fallback = False
        # What generating the questions cost and no run has been charged yet.
        self._unclaimed_usage: TokenUsage | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._lock_guard = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Locks belong to this process (and the asyncio one to a loop): a copy shipped to
        # another process (a Ray worker) gets fresh ones, and keeps the questions prepared here.
        state = self.__dict__.copy()
        # The spend stays with the copy that prepared (the driver's run charges it).
        state.update(_lock=None, _lock_loop=None, _lock_guard=None, _unclaimed_usage=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock_guard = threading.Lock()

    @staticmethod
    def _pinned(questions: list[str] | None) -> list[str] | None:
        if questions is None:
            return None
        if isinstance(questions, str) or not isinstance(questions, (list, tuple)):
            raise ValueError(f"CheckEvaluator: questions must be a list of strings, "
                             f"got {questions!r}")
        if not questions:
            raise ValueError("CheckEvaluator: questions list must not be empty; give at least "
                             "one question, or leave questions unset to generate them")
        bad = [i for i, q in enumerate(questions) if not isinstance(q, str) or not q.strip()]
        if bad:
            raise ValueError(
                "CheckEvaluator: questions must be a non-empty list of non-empty strings"
                + (f"; entry {bad[0]} is {questions[bad[0]]!r}" if bad else ""))
        return [q.strip() for q in questions]

    @property
    def resolved_questions(self) -> list[str] | None:
        """The questions in use; None until ``prepare()`` has generated them."""
        return list(self._questions) if self._questions is not None else None

    def _prepare_lock(self) -> asyncio.Lock:
        # An asyncio.Lock belongs to one event loop; the suite may run on a private loop per
        # run, so keep one lock per loop (the thread lock makes that swap itself safe).
        loop = asyncio.get_running_loop()
        with self._lock_guard:
            if self._lock is None or self._lock_loop is not loop:
                self._lock, self._lock_loop = asyncio.Lock(), loop
            return self._lock

    async def prepare(self) -> None:
        """Generate the questions once; pinned questions make this a no-op without a judge call."""
        if self._questions is not None:
            return
        async with self._prepare_lock():
            if self._questions is not None:
                return
            self._questions, self._used_fallback = await self._generate()

    def take_preparation_usage(self) -> TokenUsage | None:
        """What ``prepare()`` spent on the judge since the last call (then nothing): the run
        that prepared this evaluator charges it to its judge spend, once."""
        usage, self._unclaimed_usage = self._unclaimed_usage, None
        return usage

    def _spent(self, usage: TokenUsage | None) -> None:
        if usage is not None:
            self._unclaimed_usage = usage + self._unclaimed_usage

    async def _generate(self) -> tuple[list[str], bool]:
        judge = get_judge(self.judge_config())
        prompt = question_generation_prompt(self.criterion, self.num_questions)
        failures: list[str] = []
        for attempt in range(GENERATION_ATTEMPTS):
            # Every failure counts as a failed attempt: an HTTP error, a timeout (both arrive
            # as JudgeUnavailable once the judge's own retries are spent), an unreadable reply.
            # A local server that rejects JSON mode fails here, every time.
            try:
                reply = await judge.complete(prompt, system=QUESTION_GENERATION_SYSTEM,
                                             json_mode=True, sample_index=attempt,
                                             accept=_yields_questions)
                self._spent(reply.usage)
                questions = _generated_questions(reply.text)
            except JudgeUnavailable as exc:
                self._spent(exc.token_usage)  # a failed request may still have been billed
                failures.append(f"attempt {attempt + 1}: {exc}")
                continue
            except ValueError as exc:
                failures.append(f"attempt {attempt + 1}: {reply.unreadable(str(exc))}")
                continue
            if len(questions) < self.num_questions:
                logger.warning("CheckEvaluator %r: judge returned %d of %d requested question(s)",
                               self.name, len(questions), self.num_questions)
            questions = questions[: self.num_questions]
            logger.info("CheckEvaluator %r generated %d question(s) for criterion %r:\n%s",
                        self.name, len(questions), self.criterion,
                        "\n".join(f"  {i}. {q}" for i, q in enumerate(questions, start=1)))
            return questions, False
        warnings.warn(
            f"CheckEvaluator {self.name!r}: question generation failed after "
            f"{GENERATION_ATTEMPTS} attempts ({'; '.join(failures)}). Using fallback: the "
            "criterion itself as a single yes/no question. Pin questions= for reproducible runs.",
            UserWarning, stacklevel=2)
        return [self.criterion], True

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        if self._questions is None:
            raise RuntimeError("CheckEvaluator.questions() called before prepare()")
        blocks = case_blocks(actual, expected)
        return [Question(text, True, blocks) for text in self._questions]

    def extra_details(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, Any]:
        return {"criterion": self.criterion, "used_fallback": self._used_fallback,
                "questions_pinned": self._pinned_questions}

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        # Used outside a suite (no eager warm-up): generate on first use, still only once.
        await self.prepare()
        result = await super().evaluate(actual, expected)
        if self._used_fallback and not result.skipped:
            result.details["reason"] = f"{FALLBACK_TAG} {result.details['reason']}"
        return result
