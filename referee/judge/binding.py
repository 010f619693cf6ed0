"""The judge a judged criterion calls during a run, looked up once (design decision 16).

A run looks up each judged criterion's judge (or panel) before its first case and hands the
criterion a ``JudgeBinding``: scoring reads it and looks nothing up again, on any backend. It
is plain data: it pickles, so a Ray worker receives the judge itself instead of rebuilding it
from its own environment (``for_elsewhere``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pydantic import SecretStr

from referee.errors import JudgeUnavailable
from referee.judge.cascade import JudgeCascade, cascade_from_env
from referee.judge.config import JudgeConfig, get_configured, resolve_judge_config
from referee.judge.panel import JudgePanel, effective_panel, get_configured_panel
from referee.judge.providers import PLACEHOLDER_API_KEY, ProviderSetupError, adapter_for
from referee.judge.reply_cache import cache_enabled_by_env


@dataclass(frozen=True)
class JudgeBinding:
    """One judge, or a panel whose members are already resolved, with their effective settings.

    Neither: no provider can serve the judge the criterion names (``unreachable_model``); the
    10xgraph-style criteria then score their documented placeholder, counted as a judge error.
    """

    judge: JudgeConfig | None = None
    panel: JudgePanel | None = None
    unreachable_model: str | None = None
    # Cascade seam (referee/judge/cascade.py): a cascade's binding is its last (strong) stage's,
    # so whatever reads the binding outside a case's scoring (thresholds, calibration, a
    # CheckEvaluator's questions) sees the judge whose answer is the verdict; ``stages`` holds
    # every stage's own binding, cheapest first, for the criterion to score with in turn.
    cascade: JudgeCascade | None = None
    stages: tuple[JudgeBinding, ...] = ()

    def __post_init__(self) -> None:
        if self.judge is not None and self.panel is not None:
            raise ValueError("a judge binding holds one judge or one panel, not both")

    @property
    def first(self) -> JudgeConfig | None:
        """The one judge; with a panel its first member (for one-judge work such as writing a
        CheckEvaluator's questions; scoring asks every member)."""
        return self.panel.members[0] if self.panel is not None else self.judge

    @property
    def asked(self) -> JudgeConfig | JudgePanel:
        """The panel, else the one judge; JudgeUnavailable when no provider can serve it."""
        if self.panel is not None:
            return self.panel
        if self.judge is None:
            raise JudgeUnavailable(f"no provider can serve judge model {self.unreachable_model!r}")
        return self.judge

    @property
    def members(self) -> list[JudgeConfig]:
        """Every judge it asks."""
        if self.panel is not None:
            return list(self.panel.members)
        return [self.judge] if self.judge is not None else []

    def for_elsewhere(self) -> JudgeBinding:
        """The same judges called the same way from another process (a Ray worker), whatever
        its environment says: each holds the endpoint and key its provider reads from this
        process's environment, and the reply cache switch and pacing this environment sets.
        Keys stay secret: excluded from every dump, never in a repr."""
        if self.stages:
            stages = tuple(stage.for_elsewhere() for stage in self.stages)
            return replace(stages[-1], cascade=self.cascade, stages=stages)
        if self.panel is not None:
            members = [_self_contained(m) for m in self.panel.members]
            return replace(self, panel=self.panel.model_copy(update={"members": members}))
        if self.judge is not None:
            return replace(self, judge=_self_contained(self.judge))
        return self


def _self_contained(cfg: JudgeConfig) -> JudgeConfig:
    update: dict[str, object] = {}
    try:
        base_url, key = adapter_for(cfg.provider).credentials(cfg)
    except ProviderSetupError:  # asking it fails the same way wherever it is asked
        base_url, key = cfg.base_url, None
    if cfg.api_key is None and key and key != PLACEHOLDER_API_KEY:
        update["api_key"] = SecretStr(key)
    if not cfg.base_url and base_url:
        update["base_url"] = base_url
    if cfg.cache is None:
        update["cache"] = cache_enabled_by_env()
    if cfg.max_concurrency is None and cfg.concurrency_pinned:
        update["max_concurrency"] = cfg.effective_max_concurrency
    update.update(rpm=cfg.effective_rpm, tpm=cfg.effective_tpm)
    if cfg.max_retries is None:  # REFEREE_JUDGE_MAX_RETRIES, else the default
        update["max_retries"] = cfg.effective_max_retries
    update = {k: v for k, v in update.items() if v is not None}
    if not update:
        return cfg
    bound = cfg.model_copy(update=update)
    bound._max_tokens_filled = cfg._max_tokens_filled
    return bound


def bind_in_layers(judge: JudgeConfig | JudgePanel | JudgeCascade | None) -> JudgeBinding:
    """The multivon-style API's judge: ``judge=`` > ``configure()`` > the environment >
    the default, a panel in the same order, each member resolved as a single judge is; a
    cascade's stages each resolved the same way. The environment's cascade (JUDGE_CASCADE,
    ``referee run --judge-cascade``) comes before its panel and its single judge."""
    if judge is None and get_configured_panel() is None and get_configured() is None:
        judge = cascade_from_env()
    if isinstance(judge, JudgeCascade):
        return bind_cascade(judge, bind_in_layers)
    panel = effective_panel(judge)
    if panel is not None:
        return JudgeBinding(panel=panel.model_copy(update={"members": panel.resolved_members()}))
    return JudgeBinding(judge=resolve_judge_config(judge))  # type: ignore[arg-type]


def with_temperature(judge: JudgeConfig, temperature: float) -> JudgeConfig:
    """``judge`` at ``temperature`` unless it chose its own."""
    if "temperature" in judge.model_fields_set and judge.temperature is not None:
        return judge
    return judge.model_copy(update={"temperature": temperature})


def bind_cascade(cascade: JudgeCascade,
                 bind_stage: Callable[[JudgeConfig | JudgePanel], JudgeBinding]) -> JudgeBinding:
    """A cascade's binding: its strong stage's, with every stage bound by ``bind_stage``."""
    stages = tuple(bind_stage(stage) for stage in cascade.stages)
    return replace(stages[-1], cascade=cascade, stages=stages)
