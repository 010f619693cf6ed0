"""TrajectoryMatchCriterion: were the right tools called, in the right way."""

from __future__ import annotations

from functools import partial

from referee.case import EvalCase, ToolCall, flattened
from referee.config import MatchType
from referee.criteria.base import SyncCriterion
from referee.criteria.matching import match_sequences, tool_call_matches
from referee.execution import UNRECORDED_KEY, ExecutionResult
from referee.result import CriterionResult


def _label(call: ToolCall, with_args: bool) -> str:
    return f"{call.name}({call.args})" if with_args and call.args else call.name


def _uncheckable(actual: ExecutionResult, actual_calls: list[ToolCall],
                 expected_calls: list[ToolCall]) -> list[str]:
    """Tools whose expected calls name arguments while the recording left some of their
    calls' arguments out (``args`` None): those arguments cannot be checked. An expected call
    with empty args accepts any arguments, recorded or not."""
    unrecorded = actual.metadata.get(UNRECORDED_KEY)
    # A run stored before unrecorded arguments were None kept them as {} and said so only here.
    all_unknown = isinstance(unrecorded, dict) and "tool_args" in unrecorded and all(
        call.args is not None for call in actual_calls)
    unknown = {call.name for call in actual_calls if call.args is None or all_unknown}
    return sorted({call.name for call in expected_calls if call.args and call.name in unknown})


class TrajectoryMatchCriterion(SyncCriterion):
    """Compares ``actual.tool_calls`` with the expected trajectory of every turn, concatenated.

    Reads ``config.match_type`` and ``config.check_args``. The score is matched expected calls
    over expected calls, with one addition for ``EXACT``:

    - ``EXACT`` compares position by position and divides by the longer of the two lists, so
      every extra call costs as much as a wrong one. A run with an extra or a missing call
      never passes, whatever the threshold: the fractional score (5 of 6 = 0.833) is kept for
      information, ``passed`` is False and ``details["extra_calls"]`` names the extra calls.
      With nothing expected it scores 1.0 only if nothing was called.
    - ``IN_ORDER`` credits the longest in-order pairing; extra calls anywhere are free.
    - ``ANY_ORDER`` credits the largest one-to-one pairing regardless of order.

    Both of the latter score 1.0 when nothing is expected. With ``check_args`` an expected call's
    args must equal the actual ones (nested values compared structurally); an expected call
    with empty ``args`` accepts any arguments, also ones the recording left out (``args``
    None, as a trace without the opt-in argument attributes reads). An expected call naming
    arguments for a tool whose recorded call has none to compare skips the case: it cannot be
    checked, and is not failed on no evidence. With ``include_nested`` (a referee extension)
    the actual calls include those made inside agents used as tools, each right after the
    call that ran its agent; without it such a call counts once, as the caller made it.
    """

    name = "tool_trajectory_avg_score"
    description = "Evaluates tool call trajectory matching"

    # Arguments the recording left out are judged per case (evaluate_sync), not skipped wholesale.
    reads = ("tool_calls",)

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_calls = expected.expected_tool_trajectory
        include_nested = self.config.include_nested
        actual_calls = flattened(actual.tool_calls) if include_nested else actual.tool_calls
        match_type = self.config.match_type
        check_args = self.config.check_args
        uncheckable = _uncheckable(actual, actual_calls, expected_calls) if check_args else []
        if uncheckable:
            unrecorded = actual.metadata.get(UNRECORDED_KEY)
            why = unrecorded.get("tool_args") if isinstance(unrecorded, dict) else None
            skipped = self._skipped(
                f"not scored: {why or 'some tool arguments are not recorded'}; the expected "
                f"calls of {', '.join(uncheckable)} name arguments, which cannot be checked")
            skipped.details["unrecorded"] = ["tool_args"]
            return skipped
        outcome = match_sequences(match_type, actual_calls, expected_calls,
                                  partial(tool_call_matches, check_args=check_args))

        missing = [_label(expected_calls[i], check_args) for i in outcome.missing]
        unmatched = [_label(actual_calls[i], check_args) for i in outcome.unmatched_actual]
        if not expected_calls:
            reason = ("No tool calls expected and none made." if not actual_calls else
                      f"No tool calls expected; {len(actual_calls)} made: {', '.join(unmatched)}.")
        else:
            reason = (f"Matched {outcome.matched} of {len(expected_calls)} expected tool calls "
                      f"({match_type.value}, check_args={check_args}).")
            if missing:
                reason += f" Missing or wrong: {', '.join(missing)}."
        extra: list[str] = []
        if match_type is MatchType.EXACT and len(actual_calls) != len(expected_calls):
            # Which calls are extra (or missing) is what an in-order alignment leaves unpaired;
            # position by position, one inserted call would make every later one look wrong.
            aligned = match_sequences(MatchType.IN_ORDER, actual_calls, expected_calls,
                                      partial(tool_call_matches, check_args=check_args))
            if len(actual_calls) > len(expected_calls):
                extra = [f"{_label(actual_calls[i], check_args)} (call {i + 1})"
                         for i in aligned.unmatched_actual]
                reason += (f" EXACT rejects extra calls: {len(actual_calls)} made for "
                           f"{len(expected_calls)} expected; extra: {', '.join(extra)}.")
            else:
                absent = [_label(expected_calls[i], check_args) for i in aligned.missing]
                reason += (f" EXACT rejects missing calls: {len(actual_calls)} made for "
                           f"{len(expected_calls)} expected; missing: {', '.join(absent)}.")
        result = self._result(outcome.score, {
            "reason": reason,
            "match_type": match_type.value,
            "check_args": check_args,
            **({"include_nested": True} if include_nested else {}),
            "matched": outcome.matched,
            "expected_count": len(expected_calls),
            "actual_count": len(actual_calls),
            "missing": missing,
            "unmatched_actual": unmatched,
            # Plain dumps: an argument JSON cannot hold gets its stand-in when the case is
            # stored (referee.storable), rather than failing the criterion here.
            "expected_trajectory": [c.model_dump() for c in expected_calls],
            "actual_trajectory": [c.model_dump() for c in actual_calls],
            "extra_calls": extra,
        })
        if match_type is MatchType.EXACT and len(actual_calls) != len(expected_calls):
            # The fractional score stays for information; the verdict does not bend to a
            # threshold below 1.0 (10xgraph: "MatchType.EXACT rejects extra tool calls").
            result.passed = False
        return result
