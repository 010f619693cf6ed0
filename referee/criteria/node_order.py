"""NodeOrderMatchCriterion: did the graph route through the expected nodes."""

from __future__ import annotations

from operator import eq

from referee.case import EvalCase
from referee.config import MatchType
from referee.criteria.base import SyncCriterion
from referee.criteria.matching import match_sequences
from referee.execution import ExecutionResult
from referee.result import CriterionResult


class NodeOrderMatchCriterion(SyncCriterion):
    """Compares ``actual.node_visits`` with the expected node order of every turn, concatenated.

    Same three modes as the trajectory criterion (``EXACT`` also counts extra visits against the
    score). Reads ``match_type`` and ``threshold``; ``check_args`` has no meaning here.

    A case that expects no node order follows the modes' documented rule: ``IN_ORDER`` and
    ``ANY_ORDER`` score 1.0, ``EXACT`` scores 1.0 only when no node was visited.
    """

    name = "node_order_score"
    description = "Evaluates node visit order matching"
    reads = ("node_visits",)

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_nodes = expected.expected_node_order
        actual_nodes = list(actual.node_visits)
        match_type = self.config.match_type
        details = {
            "match_type": match_type.value,
            "expected_node_order": expected_nodes,
            "actual_node_order": actual_nodes,
        }
        outcome = match_sequences(match_type, actual_nodes, expected_nodes, eq)
        if not expected_nodes:
            details["note"] = "No expected node order defined"
            reason = "No expected node order defined."
            if match_type is MatchType.EXACT and actual_nodes:
                reason += f" EXACT rejects the {len(actual_nodes)} visit(s) made."
            return self._result(outcome.score, {**details, "reason": reason})
        missing = [expected_nodes[i] for i in outcome.missing]
        reason = (f"Matched {outcome.matched} of {len(expected_nodes)} expected nodes "
                  f"({match_type.value}).")
        if missing:
            reason += f" Missing or out of place: {', '.join(missing)}."
        if match_type is MatchType.EXACT and len(actual_nodes) > len(expected_nodes):
            reason += f" {len(actual_nodes) - len(expected_nodes)} extra visit(s) rejected by EXACT."
        return self._result(outcome.score, {
            **details,
            "reason": reason,
            "matched": outcome.matched,
            "missing": missing,
        })
