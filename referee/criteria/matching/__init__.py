"""Sequence matching shared by the trajectory and node-order criteria.

One module per match mode, each a pure function over two sequences and a ``matches(actual_item,
expected_item)`` predicate. The predicate need not be an equivalence (an expected tool call with
empty args matches any args), so the modes find an optimal pairing instead of comparing greedily.
"""

from referee.criteria.matching.any_order import match_any_order
from referee.criteria.matching.exact import match_exact
from referee.criteria.matching.in_order import match_in_order
from referee.criteria.matching.outcome import MatchOutcome, match_sequences
from referee.criteria.matching.tool_calls import args_equal, tool_call_matches

__all__ = [
    "MatchOutcome",
    "args_equal",
    "match_any_order",
    "match_exact",
    "match_in_order",
    "match_sequences",
    "tool_call_matches",
]
