"""When an actual tool call satisfies an expected one."""

from __future__ import annotations

from typing import Any

from referee.case import ToolCall


def args_equal(expected: Any, actual: Any) -> bool:
    """Structural equality of JSON-like values, nested lists and dicts included.

    Stricter than ``==`` on booleans (``True`` is not ``1``) and looser on sequences (a tuple
    equals a list), because arguments come from JSON on one side and Python on the other.
    """
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and expected.keys() == actual.keys()
                and all(args_equal(v, actual[k]) for k, v in expected.items()))
    if isinstance(expected, (list, tuple)):
        return (isinstance(actual, (list, tuple)) and len(expected) == len(actual)
                and all(args_equal(e, a) for e, a in zip(expected, actual)))
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    return type(expected) is type(actual) and expected == actual


def tool_call_matches(actual: ToolCall, expected: ToolCall, check_args: bool) -> bool:
    """Same name; with ``check_args`` also equal args, unless the expected args are empty (any
    args then, recorded or not: None is arguments the recording left out)."""
    if actual.name != expected.name:
        return False
    if not check_args or not expected.args:
        return True
    return args_equal(expected.args, actual.args)
