"""LLMCallerMixin: the 10xgraph-style API's judge-calling helpers, on top of referee.judge.

The mixin only picks the judge and reads its JSON; the judge layer owns clients, retries,
concurrency, caching and token accounting.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from referee.config import CriterionConfig
from referee.criteria.judged import JudgedCriterionBase
from referee.criteria.llm.prompts import JUDGE_SYSTEM_PROMPT, without_data_blocks
from referee.criteria.llm.replies import reply_score, reply_text
from referee.errors import JudgeUnavailable
from referee.judge import (
    JudgeConfig,
    get_judge,
    judge_config_for_model,
    parse_json_object,
    provider_for_model,
    reply_evidence,
)
from referee.judge.binding import JudgeBinding, bind_cascade, with_temperature
from referee.judge.cascade import CASCADE_ENV, JudgeCascade, cascade_from_env
from referee.judge.config import AGENT_EVALUATOR, DEFAULT_JUDGES
from referee.judge.panel import JudgePanel
from referee.usage import TokenUsage

logger = logging.getLogger("referee.evaluation")

JUDGE_TEMPERATURE = DEFAULT_JUDGES[AGENT_EVALUATOR].temperature
# The keys of the judge's own reply object, which an object echoed from the output lacks.
SCORE_KEYS = ("score", "reasoning")
NO_PROVIDER_REASONING = "No LLM provider available"

# The sampling loop runs each sample in its own task and records the sample's index here, so
# the judge cache keeps repeated samples apart even when a subclass overrides
# _call_llm_json(prompt) with the 10xgraph-style API's one-argument signature.
_sample_index: ContextVar[int] = ContextVar("referee_judge_sample_index", default=0)

# The raw judge replies of the sample running in this task, kept as evidence for its result.
_sample_replies: ContextVar[list[str] | None] = ContextVar("referee_sample_replies",
                                                           default=None)


@contextmanager
def recording_replies() -> Iterator[list[str]]:
    """The judge replies that calls made inside receive, as evidence (``reply_evidence``)."""
    replies: list[str] = []
    token = _sample_replies.set(replies)
    try:
        yield replies
    finally:
        _sample_replies.reset(token)


@contextmanager
def sample_index_scope(index: int | None) -> Iterator[None]:
    """Run the calls inside with ``index`` as the current sample (None keeps the current one)."""
    if index is None:
        yield
        return
    token = _sample_index.set(index)
    try:
        yield
    finally:
        _sample_index.reset(token)


_warned_models: set[str] = set()


class NoProviderReply(dict):  # type: ignore[type-arg]
    """The 10xgraph-style API's fallback reply. Equal to the documented dict; its type tells the
    sampling loop that no judge gave it, so the result can be flagged ``judge_unavailable``."""


def no_provider_reply(score: float = 0.5) -> NoProviderReply:
    return NoProviderReply(score=score, reasoning=NO_PROVIDER_REASONING)


def is_no_provider_reply(reply: Any) -> bool:
    return isinstance(reply, NoProviderReply)


class LLMCallerMixin(JudgedCriterionBase):
    """Shared judge calls for criteria that have a ``config: CriterionConfig``.

    The provider follows from ``config.judge_model``: an explicit prefix (``openai/llama3``,
    ``anthropic/claude-haiku-4-5``, ``google/gemini-2.5-flash``), else the name (``gemini*``
    Google, ``gpt*``/``o1``/``o3``/``o4`` OpenAI, ``claude*`` Anthropic). ``config.base_url``
    (or the provider's variable, such as ``OPENAI_BASE_URL``) names another endpoint. Calls use
    temperature 0.3 and JSON mode.

    ``judge`` (a JudgeConfig) replaces all of that with the judge it names, as
    ``UserSimulator(judge=...)`` does for its default criterion; ``panel`` (a JudgePanel, or
    ``config.judge_panel``) asks several judges.
    """

    config: CriterionConfig
    judge_system_prompt: str = JUDGE_SYSTEM_PROMPT
    judge: JudgeConfig | None = None
    panel: JudgePanel | None = None
    cascade: JudgeCascade | None = None  # judge=JudgeCascade(...): referee/judge/cascade.py
    # The judge is named by model (config.judge_model), not resolved in layers.
    judge_defaults = DEFAULT_JUDGES[AGENT_EVALUATOR]
    # Whether a judge panel (``panel``, ``config.judge_panel``) may judge it.
    accepts_panel = True

    def look_up_judge(self) -> JudgeBinding:
        """``cascade``, else ``panel``, else ``judge=`` (each at temperature 0.3 unless it chose
        one), else ``config.judge_panel``, else the judge ``config.judge_model`` names when a
        provider can serve it."""
        if self.cascade is not None:
            return bind_cascade(self.cascade, self._bind_stage)
        if self.config.judge_cascade is not None and self.accepts_panel \
                and self.judge is None and self.panel is None:
            return bind_cascade(self.config_cascade(), self._bind_stage)
        env_cascade = self.env_cascade()
        if env_cascade is not None:
            return bind_cascade(env_cascade, self._bind_stage)
        panel = self.panel if self.panel is not None else (
            self.config_panel() if self.judge is None and self.accepts_panel else None)
        temperature = self.judge_defaults.temperature
        if panel is not None:
            members = [with_temperature(m, temperature) for m in panel.members]
            return JudgeBinding(panel=panel.model_copy(update={"members": members}))
        if self.judge is not None:
            return JudgeBinding(judge=with_temperature(self.judge, temperature))
        judge = self._judge_for_model(self.config.judge_model)
        if judge is None:
            return JudgeBinding(unreachable_model=self.config.judge_model)
        return JudgeBinding(judge=judge)

    def _bind_stage(self, stage: JudgeConfig | JudgePanel) -> JudgeBinding:
        """A cascade stage bound as ``judge=`` or ``panel`` would be."""
        temperature = self.judge_defaults.temperature
        if isinstance(stage, JudgePanel):
            members = [with_temperature(m, temperature) for m in stage.members]
            return JudgeBinding(panel=stage.model_copy(update={"members": members}))
        return JudgeBinding(judge=with_temperature(stage, temperature))

    def _judge_for_model(self, model_name: str, *, available_only: bool = True
                         ) -> JudgeConfig | None:
        # An api_style the user did not set follows the endpoint: the documented Responses API
        # at OpenAI itself, Chat Completions at a local server or gateway.
        chosen = "api_style" in self.config.model_fields_set
        return judge_config_for_model(model_name,
                                      api_style=self.config.api_style if chosen else None,
                                      temperature=JUDGE_TEMPERATURE,
                                      base_url=self.config.base_url,
                                      available_only=available_only)

    def config_cascade(self) -> JudgeCascade:
        """The cascade ``config.judge_cascade`` names, its stages resolved as ``judge_model``
        is."""
        spec = self.config.judge_cascade
        assert spec is not None
        cascade: JudgeCascade = spec.cascade_of(self._judges_named(spec.models, "judge_cascade"))
        return cascade

    def env_cascade(self) -> JudgeCascade | None:
        """The run's cascade (JUDGE_CASCADE, ``referee run --judge-cascade``) in place of
        ``config.judge_model``, its stages resolved as ``judge_model`` is; None where the
        criterion names a judge, panel or cascade of its own, or takes no panel."""
        if not self.accepts_panel or self.judge is not None or self.panel is not None \
                or self.config.judge_panel is not None or self.config.judge_cascade is not None:
            return None
        cascade = cascade_from_env()
        if cascade is None:
            return None
        names = [f"{stage.provider}/{stage.model}" for stage in cascade.stages
                 if isinstance(stage, JudgeConfig)]
        return cascade.model_copy(update={"stages": self._judges_named(names, CASCADE_ENV)})

    def config_panel(self) -> JudgePanel | None:
        """The panel ``config.judge_panel`` names, its members resolved as ``judge_model`` is
        (now: the environment may have changed since the config was made)."""
        spec = self.config.judge_panel
        if spec is None:
            return None
        return JudgePanel(members=self._judges_named(spec.models, "judge_panel"),
                          aggregate=spec.aggregate, weights=spec.weights, quorum=spec.quorum)

    def _judges_named(self, models: list[str], field: str) -> list[JudgeConfig]:
        judges = []
        for name in models:
            judge = self._judge_for_model(name, available_only=False)
            if judge is None:  # the config's validation names the field first
                raise ValueError(f"{field}: {name!r} names no provider")
            judges.append(judge)
        return judges

    @property
    def judge_model_name(self) -> str:
        """The judge's name for ``details["judge_model"]``: ``provider/model`` for a given
        ``judge``, else ``config.judge_model``."""
        judge = self.judge
        if self.cascade is not None or (judge is None and self.panel is None
                                        and self.config.judge_cascade is not None
                                        and self.accepts_panel) \
                or self.env_cascade() is not None:
            judge = self.judge_binding().first  # the stage scoring now, else the strong one
        if judge is not None:
            return f"{judge.provider}/{judge.model}"
        return self.config.judge_model

    async def _call_provider_json(self, provider: str, prompt: str, sample_index: int | None
                                  ) -> tuple[dict[str, Any], TokenUsage] | None:
        """The bound judge's parsed reply when ``provider`` serves it, else None."""
        cfg = self.judge_binding().judge
        if cfg is None or cfg.provider != provider:
            return None
        return await self._ask_json(cfg, prompt, sample_index)

    async def _ask_json(self, cfg: JudgeConfig, prompt: str, sample_index: int | None
                        ) -> tuple[dict[str, Any], TokenUsage]:
        """Ask judge ``cfg`` (the bound judge, or a panel member) for a JSON score object."""
        index = _sample_index.get() if sample_index is None else sample_index
        def accept(text: str) -> bool:
            return self._reply_yields_score(without_data_blocks(text, prompt))

        reply = await get_judge(cfg).complete(prompt, system=self.judge_system_prompt,
                                              json_mode=True, sample_index=index, accept=accept)
        recorded = _sample_replies.get()
        if recorded is not None:
            recorded.append(reply_evidence(reply.text))
        try:
            parsed = parse_json_object(without_data_blocks(reply.text, prompt), SCORE_KEYS)
        except ValueError as exc:
            # An unreadable reply is a judge malfunction, not a low score; it still cost.
            raise reply.unreadable(str(exc)) from None
        return parsed, reply.usage

    def _score_from_reply(self, reply: dict[str, Any]) -> float:
        return reply_score(reply)

    def _reply_yields_score(self, text: str) -> bool:
        """Whether a reply is worth keeping in the judge cache: the criterion reads a score."""
        self._score_from_reply(parse_json_object(text, SCORE_KEYS))  # raises when it cannot
        return True

    async def _call_google_json(self, prompt: str, sample_index: int | None = None
                                ) -> tuple[dict[str, Any], TokenUsage] | None:
        """Ask a Google model; None when the model is not a Google one or Google is unavailable."""
        return await self._call_provider_json("google", prompt, sample_index)

    async def _call_openai_json(self, prompt: str, sample_index: int | None = None
                                ) -> tuple[dict[str, Any], TokenUsage] | None:
        """Ask an OpenAI model: ``config.api_style`` when set, else Responses at OpenAI itself
        and Chat Completions at any other endpoint."""
        return await self._call_provider_json("openai", prompt, sample_index)

    async def _call_anthropic_json(self, prompt: str, sample_index: int | None = None
                                   ) -> tuple[dict[str, Any], TokenUsage] | None:
        """referee extension: ``claude*`` judge models."""
        return await self._call_provider_json("anthropic", prompt, sample_index)

    async def _call_llm_json(self, prompt: str, sample_index: int | None = None
                             ) -> tuple[dict[str, Any], TokenUsage]:
        """The parsed JSON reply and its usage, or the documented 0.5 fallback with no provider.

        Raises ``JudgeUnavailable`` when a provider was resolved but could not answer.
        """
        # Route on the model name alone: whether the provider can be reached is the provider
        # method's answer (None), so a subclass that overrides one is always consulted.
        callers = {
            "google": self._call_google_json,
            "openai": self._call_openai_json,
            "anthropic": self._call_anthropic_json,
        }
        judge = self.judge_binding().judge
        provider = (judge.provider if judge is not None
                    else provider_for_model(self.config.judge_model))
        caller: Callable[..., Awaitable[tuple[dict[str, Any], TokenUsage] | None]] | None = (
            callers.get(provider) if provider is not None else None)
        if caller is None and judge is not None:  # a provider registered by the user
            registered = judge.provider

            async def caller(prompt: str) -> tuple[dict[str, Any], TokenUsage] | None:
                return await self._call_provider_json(registered, prompt, None)
        outcome = None
        if caller is not None:
            with sample_index_scope(sample_index):
                outcome = await caller(prompt)
        if outcome is None:
            return self._unreachable_reply(), TokenUsage()
        return outcome

    def _unreachable_reply(self) -> NoProviderReply:
        """The placeholder the surface scores when no provider can serve the judge
        (``judge_defaults.unreachable_score``); JudgeUnavailable where it has none."""
        model = self.judge_model_name
        score = self.judge_defaults.unreachable_score
        if score is None:
            raise JudgeUnavailable(f"{getattr(self, 'name', type(self).__name__)}: no provider "
                                   f"can serve judge model {model!r}")
        if model not in _warned_models:  # once per model, not once per sample of every case
            _warned_models.add(model)
            logger.warning("No LLM provider available for judge model %r; scoring %.1f "
                           "(recorded as a judge error, not a verdict)", model, score)
        return no_provider_reply(score)

    async def _call_llm_score(self, prompt: str, sample_index: int | None = None
                              ) -> tuple[float, str, TokenUsage]:
        """``(score, reasoning, token_usage)``; a missing ``score`` is 0.0 (as the 10xgraph-style
        API documents for this helper); a present one that is not a number from 0.0 to 1.0
        raises JudgeUnavailable."""
        with sample_index_scope(sample_index):
            reply, usage = await self._call_llm_json(prompt)
        score = 0.0 if reply.get("score") is None else reply_score(reply)
        return score, reply_text(reply), usage
