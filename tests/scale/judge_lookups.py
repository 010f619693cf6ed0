"""Counts the judge lookups a run makes: importable by the local tests and on Ray workers.

A judge is bound before the first case (design decision 16): ``describe_run`` resolves each
judged criterion's judge once and hands it over; scoring looks nothing up again. These
wrappers record every call to the functions that resolve a judge, in whichever process makes
it, so a test can count them per run and say when they happened.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import referee.judge.config as judge_config
import referee.judge.panel as judge_panel

# The functions that look a judge up: the EvalSuite-style layers, the panel that judges, and the
# AgentEvaluator-style judge named by model.
LOOKUPS = ("resolve_judge_config", "effective_panel", "judge_config_for_model")
_HOMES = {"resolve_judge_config": judge_config, "effective_panel": judge_panel,
          "judge_config_for_model": judge_config}


def install(record: Callable[[str], None]) -> Callable[[], None]:
    """Wrap every lookup wherever referee imported it by name; ``record(name)`` hears each call.
    Returns the function that puts the originals back."""
    undo: list[tuple[Any, str, Any]] = []
    for name in LOOKUPS:
        original = getattr(_HOMES[name], name)
        wrapped = _counting(name, original, record)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("referee") \
                    and getattr(module, name, None) is original:
                undo.append((module, name, original))
                setattr(module, name, wrapped)
    def restore() -> None:
        for module, name, original in undo:
            setattr(module, name, original)
    return restore


def _counting(name: str, original: Callable[..., Any], record: Callable[[str], None]
              ) -> Callable[..., Any]:
    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        record(name)
        return original(*args, **kwargs)
    return counted


_installed_in_this_process = False


class AnswersAndLogsLookups:
    """A model for a Ray worker: installs the counters in its worker process on first use,
    each lookup then appends its name to ``log``; answers ``answer N`` to ``question N``."""

    def __init__(self, log: Path) -> None:
        self.log = str(log)

    def _write(self, name: str) -> None:
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(name + "\n")

    def __call__(self, question: str) -> str:
        global _installed_in_this_process
        if not _installed_in_this_process:
            _installed_in_this_process = True
            install(self._write)
        return f"answer {question.split()[1]}"
