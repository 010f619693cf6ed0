"""The global judge: ``configure()`` and ``get_global_judge()``.

It sits above both ``judge.config`` (the single judge) and ``judge.panel`` (a panel), since
``configure()`` accepts either; each of those keeps its own part of the state.
"""

from __future__ import annotations

import threading
from typing import Any

from referee.judge.config import JudgeConfig, get_configured, set_configured
from referee.judge.panel import as_panel, get_configured_panel, set_configured_panel

_configure_lock = threading.Lock()


def configure(config: Any) -> None:
    """Set the global judge used by every evaluator without its own ``judge=``; ``None`` resets.

    A judge panel (a ``JudgePanel`` or a list of JudgeConfigs) is accepted too: EvalSuite-style
    evaluators without ``judge=`` are then scored by the panel. A JudgeConfig that sets no field
    (``JudgeConfig()``, what :func:`get_global_judge` returns when nothing is configured) is a
    layer that changes nothing, and is taken as ``None``.
    """
    if isinstance(config, JudgeConfig) and not config.model_fields_set:
        config = None
    panel = None if config is None or isinstance(config, JudgeConfig) else as_panel(config)
    if config is not None and not isinstance(config, JudgeConfig) and panel is None:
        raise TypeError("configure() expects a JudgeConfig, a list of JudgeConfig, a JudgePanel "
                        f"or None, got {type(config).__name__}")
    # One lock over both halves: a reader never sees a new judge beside an old panel.
    with _configure_lock:
        set_configured(config if isinstance(config, JudgeConfig) else None)
        set_configured_panel(panel)


def get_global_judge() -> Any:
    """The multivon-style ``get_global_judge()``: what ``configure()`` holds (a JudgeConfig or
    a judge panel), else ``JudgeConfig()`` with no field set, so that every field inherits.
    Handing it back to ``configure()`` restores the judge it was read from."""
    configured = get_configured_panel() or get_configured()
    return JudgeConfig() if configured is None else configured
