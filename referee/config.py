"""Configuration of the AgentEvaluator-style criteria: CriterionConfig, CriteriaConfig and
EvalConfig."""

from __future__ import annotations

import copy
import json
import typing
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from referee._strict import StrictModel, move_alias, unknown_field
from referee.errors import InputError, beyond_python_limits
from referee.judge.config import DEFAULT_JUDGE_MODEL as DEFAULT_JUDGE_MODEL
from referee.judge.config import JudgeConfig, split_judge_model
from referee.judge.panel import JudgePanel
from referee.redact import BaseURL, mask_url_fields


class MatchType(str, Enum):
    EXACT = "exact"
    IN_ORDER = "in_order"
    ANY_ORDER = "any_order"

    @classmethod
    def _missing_(cls, value: object) -> MatchType | None:
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            for member in cls:
                if member.value == key or member.name.lower() == key:
                    return member
        return None


class Rubric(StrictModel):
    # NaN passes every range check ("nan < 1" is false): no config takes NaN or inf at all.
    model_config = ConfigDict(allow_inf_nan=False)

    rubric_id: str
    content: str
    weight: float = 1.0

    @classmethod
    def create(cls, rubric_id: str, content: str, weight: float = 1.0) -> Rubric:
        return cls(rubric_id=rubric_id, content=content, weight=weight)


def known_api_style(value: str) -> str:
    if value not in ("responses", "chat"):
        raise ValueError(f"api_style must be 'responses' or 'chat', got {value!r}")
    return value


def judges_named(models: list[str]) -> list[JudgeConfig]:
    """The JudgeConfig each model name of a judge panel or cascade names; an error naming
    ``models[i]`` for a name no provider follows from."""
    judges = []
    for index, name in enumerate(models):
        provider, model = split_judge_model(name)
        if provider is None or not model:
            raise ValueError(f"models[{index}]: {name!r} names no provider; use a known "
                             "model name (gemini*, gpt*, claude*) or PROVIDER/MODEL, e.g. "
                             "openai/llama3")
        judges.append(JudgeConfig(provider=provider, model=model))
    return judges


class CriterionJudgePanel(StrictModel):
    """``judge_panel`` of a criterion config: several judge models asked the same thing.

    ``models`` are named as ``judge_model`` is (``gpt-4o-mini``, ``openai/llama3``,
    ``claude-haiku-4-5``) and share the config's ``base_url`` and ``api_style``. A list alone
    (``judge_panel: [gpt-4o-mini, claude-haiku-4-5]``) is a majority panel. ``aggregate``:
    ``majority`` (the members' median score), ``mean``, ``median`` or ``weighted`` (with
    ``weights``, one per model); ``quorum``: members that must answer (default a majority).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    models: list[str] = Field(min_length=2)
    aggregate: Literal["majority", "mean", "median", "weighted"] = "majority"
    weights: list[float] | None = None
    quorum: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _models_alone(cls, data: Any) -> Any:
        return {"models": data} if isinstance(data, list) else data

    @model_validator(mode="after")
    def _a_panel(self) -> CriterionJudgePanel:
        # The panel's own rules (weights per member, quorum range) are checked where they live.
        JudgePanel(members=judges_named(self.models), aggregate=self.aggregate,
                   weights=self.weights, quorum=self.quorum)
        return self


class CriterionJudgeCascade(StrictModel):
    """``judge_cascade`` of a criterion config: judge models asked in turn, cheapest first, a
    later one only where the one before is unsure (referee.judge.cascade.JudgeCascade).

    ``models`` are named as ``judge_model`` is and share the config's ``base_url`` and
    ``api_style``; the other fields are JudgeCascade's (``escalate_on``, ``margin``,
    ``min_tpr``, ``min_tnr``, ``calibration_file``, ``audit_rate``, ``audit_seed``).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    models: list[str] = Field(min_length=2)
    escalate_on: list[str] | None = None
    margin: float | None = None
    min_tpr: float | None = None
    min_tnr: float | None = None
    calibration_file: str | None = None
    audit_rate: float | None = None
    audit_seed: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _models_alone(cls, data: Any) -> Any:
        return {"models": data} if isinstance(data, list) else data

    @model_validator(mode="after")
    def _a_cascade(self) -> CriterionJudgeCascade:
        # The cascade's own rules (escalation reasons, ranges) are checked where they live.
        self.cascade_of(judges_named(self.models))
        return self

    def cascade_of(self, stages: list[Any]) -> Any:
        """The JudgeCascade of these resolved stages with this config's settings."""
        from referee.judge.cascade import JudgeCascade

        settings = self.model_dump(exclude={"models"}, exclude_none=True)
        return JudgeCascade(stages, **settings)


class CriterionConfig(StrictModel):
    # A misspelt field in a config file (num_sampls) must be an error, not a silent default.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    threshold: float = 0.8
    match_type: MatchType = MatchType.EXACT
    judge_model: str = DEFAULT_JUDGE_MODEL
    num_samples: int = 3
    rubrics: list[Rubric] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    check_args: bool = False
    # referee extension: the tool criteria (trajectory, tool_name_match) also read the calls
    # made inside agents used as tools, each right after the call that ran its agent
    # (``referee.case.flattened``). Off: an agent used as a tool is one call, as recorded.
    include_nested: bool = False
    enabled: bool = True
    api_style: str = "responses"
    # referee extension: the judge's endpoint (an OpenAI-compatible local server or gateway
    # with judge_model="openai/<name>"); empty means the provider's variable, e.g.
    # OPENAI_BASE_URL.
    base_url: BaseURL = ""
    # referee extension: a judge panel in place of judge_model (judged criteria only).
    judge_panel: CriterionJudgePanel | None = None
    # referee extension: a judge cascade in place of judge_model (judged criteria only).
    judge_cascade: CriterionJudgeCascade | None = None

    @field_validator("threshold")
    @classmethod
    def _threshold_in_unit_interval(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"threshold must be between 0.0 and 1.0, got {value}")
        return value

    @field_validator("num_samples")
    @classmethod
    def _positive_samples(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"num_samples must be at least 1, got {value}")
        return value

    @model_validator(mode="after")
    def _panel_or_cascade(self) -> CriterionConfig:
        if self.judge_panel is not None and self.judge_cascade is not None:
            raise ValueError("judge_panel and judge_cascade: give one (a cascade's stages are "
                             "its judges)")
        return self

    def __repr_args__(self) -> Any:
        return mask_url_fields(super().__repr_args__())  # a base_url password is never printed

    @field_validator("api_style")
    @classmethod
    def _known_api_style(cls, value: str) -> str:
        return known_api_style(value)

    @classmethod
    def tool_name_match(cls, threshold: float = 1.0,
                        include_nested: bool = False) -> CriterionConfig:
        return cls(threshold=threshold, include_nested=include_nested)

    @classmethod
    def trajectory(cls, threshold: float = 1.0, match_type: MatchType = MatchType.EXACT,
                   check_args: bool = False, include_nested: bool = False) -> CriterionConfig:
        return cls(threshold=threshold, match_type=match_type, check_args=check_args,
                   include_nested=include_nested)

    @classmethod
    def node_order(cls, threshold: float = 1.0,
                   match_type: MatchType = MatchType.EXACT) -> CriterionConfig:
        return cls(threshold=threshold, match_type=match_type)

    @classmethod
    def response_match(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL,
                       num_samples: int = 3) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def rouge_match(cls, threshold: float = 0.5) -> CriterionConfig:
        return cls(threshold=threshold)

    @classmethod
    def contains_keywords(cls, keywords: list[str], threshold: float = 1.0) -> CriterionConfig:
        return cls(threshold=threshold, keywords=keywords)

    @classmethod
    def llm_judge(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL,
                  num_samples: int = 3) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def rubric_based(cls, rubrics: list[Rubric], threshold: float = 0.8,
                     judge_model: str = DEFAULT_JUDGE_MODEL) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, rubrics=rubrics)

    @classmethod
    def factual_accuracy(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL,
                         num_samples: int = 3) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def hallucination(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL,
                      num_samples: int = 3) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def safety(cls, threshold: float = 0.8, judge_model: str = DEFAULT_JUDGE_MODEL,
               num_samples: int = 3) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model, num_samples=num_samples)

    @classmethod
    def simulation_goals(cls, threshold: float = 0.8,
                         judge_model: str = DEFAULT_JUDGE_MODEL) -> CriterionConfig:
        return cls(threshold=threshold, judge_model=judge_model)


# The judged criteria whose config may name a judge panel (simulation_goals asks once for a
# list of goals: nothing to vote on).
PANEL_CRITERIA = ("response_match", "llm_judge", "rubric_based", "factual_accuracy",
                  "hallucination", "safety")


class CriteriaConfig(StrictModel):
    """Which AgentEvaluator-style criteria are on. Field names are registry keys; unknown names
    are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    tool_name_match: CriterionConfig | None = None
    trajectory: CriterionConfig | None = None
    node_order: CriterionConfig | None = None
    response_match: CriterionConfig | None = None
    rouge_match: CriterionConfig | None = None
    contains_keywords: CriterionConfig | None = None
    llm_judge: CriterionConfig | None = None
    rubric_based: CriterionConfig | None = None
    factual_accuracy: CriterionConfig | None = None
    hallucination: CriterionConfig | None = None
    safety: CriterionConfig | None = None
    simulation_goals: CriterionConfig | None = None

    @model_validator(mode="after")
    def _panels_where_judged(self) -> CriteriaConfig:
        for name in type(self).model_fields:
            cfg = getattr(self, name)
            if cfg is not None and cfg.judge_panel is not None and name not in PANEL_CRITERIA:
                raise ValueError(f"{name}.judge_panel: {name} takes no judge panel (only "
                                 f"{', '.join(PANEL_CRITERIA)} do)")
            if cfg is not None and cfg.judge_cascade is not None and name not in PANEL_CRITERIA:
                raise ValueError(f"{name}.judge_cascade: {name} takes no judge cascade (only "
                                 f"{', '.join(PANEL_CRITERIA)} do)")
        return self

    def enabled_items(self) -> list[tuple[str, CriterionConfig]]:
        return [
            (name, cfg) for name in type(self).model_fields
            if (cfg := getattr(self, name)) is not None and cfg.enabled
        ]


class UserSimulatorConfig(StrictModel):
    """The simulated user's model and limits; ``max_invocations`` is 10xgraph's name for
    ``max_turns``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    _input_aliases = frozenset({"max_invocations"})

    model: str = DEFAULT_JUDGE_MODEL
    max_turns: int = 10
    temperature: float = 0.7
    api_style: str = "responses"

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        move_alias(data, "max_invocations", "max_turns")
        return data

    @property
    def max_invocations(self) -> int:
        return self.max_turns

    @field_validator("api_style")
    @classmethod
    def _known_api_style(cls, value: str) -> str:
        return known_api_style(value)


def _field_names_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """Field names of the nested model that ``loc`` leads to (Optional[Model] unwrapped)."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return []
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        model = next((c for c in candidates
                      if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return []
    return list(model.model_fields)


class ReporterConfig(StrictModel):
    """10xgraph's switches for the reports written after an evaluation
    (``referee.report.ReporterManager``): which formats, where, and what they leave out.
    Set as ``EvalConfig(reporter=...)``, ``AgentEvaluator`` writes them after each run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    enabled: bool = True
    output_dir: str = "eval_reports"
    console: bool = True
    json_report: bool = True
    html: bool = True
    junit_xml: bool = False
    verbose: bool = True
    include_details: bool = True
    include_trajectory: bool = True
    include_node_responses: bool = True
    include_actual_response: bool = True
    include_tool_call_details: bool = True
    timestamp_files: bool = True


class EvalConfig(StrictModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    criteria: CriteriaConfig = Field(default_factory=CriteriaConfig)
    user_simulator_config: UserSimulatorConfig | None = None
    parallel: bool = False
    max_concurrency: int = 4
    timeout: float = 300.0
    verbose: bool = False
    # None: no reports beyond the run store's (10xgraph writes them unless told not to).
    reporter: ReporterConfig | None = None

    @classmethod
    def default(cls) -> EvalConfig:
        return cls(criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT),
            response_match=CriterionConfig.response_match(threshold=0.8),
        ))

    @classmethod
    def strict(cls) -> EvalConfig:
        return cls(criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT,
                                                  check_args=True),
            response_match=CriterionConfig.response_match(threshold=0.9),
            llm_judge=CriterionConfig.llm_judge(threshold=0.9, num_samples=5),
        ))

    @classmethod
    def relaxed(cls) -> EvalConfig:
        return cls(criteria=CriteriaConfig(
            trajectory=CriterionConfig.trajectory(threshold=0.8, match_type=MatchType.IN_ORDER),
            response_match=CriterionConfig.response_match(threshold=0.6),
        ))

    @classmethod
    def from_file(cls, path: str | Path) -> EvalConfig:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(exc.msg, source=str(path), line=exc.lineno,
                             expected="a JSON object") from None
        except FileNotFoundError:
            raise InputError("file not found", source=str(path)) from None
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                             source=str(path)) from None
        except OSError as exc:  # a directory, no permission
            raise InputError(f"cannot read file: {exc.strerror}", source=str(path)) from None
        except (ValueError, RecursionError) as exc:
            raise beyond_python_limits(exc, source=str(path), text=text) from None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = tuple(err["loc"])
            expected = None
            unknown = unknown_field(err)
            if unknown is not None:
                raise InputError(unknown.detail, source=str(path),
                                 field=".".join(str(p) for p in (*loc, unknown.field)),
                                 expected="one of: " + ", ".join(unknown.accepted)) from None
            if err["type"] == "extra_forbidden":
                # "Extra inputs are not permitted" alone does not say what the names could be.
                known = _field_names_at(cls, loc[:-1])
                expected = f"one of: {', '.join(known)}" if known else None
            raise InputError(str(err["msg"]).removeprefix("Value error, "), source=str(path),
                             field=".".join(str(p) for p in loc), expected=expected) from None

    def to_file(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.model_dump(mode="json"), indent=2), encoding="utf-8")

    def get_criterion_config(self, name: str) -> CriterionConfig | None:
        """The named criterion's config, None when it is not set: public in the 10xgraph-style
        ``AgentEvaluator`` API's ``EvalConfig``, which users call, though referee itself does not."""
        return getattr(self.criteria, name, None)

    def enable_criterion(self, name: str, config: CriterionConfig | None = None) -> None:
        if name not in CriteriaConfig.model_fields:
            raise ValueError(f"Unknown criterion field: {name!r}")
        setattr(self.criteria, name, config or CriterionConfig())

    def disable_criterion(self, name: str) -> None:
        criterion = getattr(self.criteria, name, None)
        if criterion is not None:
            criterion.enabled = False

    def with_rubrics(self, rubrics: list[Rubric]) -> EvalConfig:
        new_config = copy.deepcopy(self)
        new_config.criteria.rubric_based = CriterionConfig.rubric_based(rubrics=rubrics)
        return new_config


class EvalPresets:
    """Ready-made EvalConfigs under 10xgraph's preset names (``EvalPresets.tool_usage()`` ...).

    Each preset is only a way to build an EvalConfig: the result is an ordinary config that
    can be edited, saved with ``to_file`` and merged with :meth:`combine`. Presets that switch
    on judge criteria take ``judge_model``; the deterministic ones need no model at all.
    """

    @classmethod
    def response_quality(cls, threshold: float = 0.7, use_llm_judge: bool = True,
                         judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """The answer matches the expectation (semantic match, plus a one-sample LLM judge)."""
        return EvalConfig(criteria=CriteriaConfig(
            response_match=CriterionConfig.response_match(threshold=threshold,
                                                          judge_model=judge_model),
            llm_judge=CriterionConfig.llm_judge(threshold=threshold, judge_model=judge_model,
                                                num_samples=1) if use_llm_judge else None,
        ))

    @classmethod
    def tool_usage(cls, threshold: float = 1.0, strict: bool = True,
                   check_args: bool = True) -> EvalConfig:
        """The right tools were called: names, and the trajectory EXACT (strict) or IN_ORDER."""
        return EvalConfig(criteria=CriteriaConfig(
            tool_name_match=CriterionConfig.tool_name_match(threshold=threshold),
            trajectory=CriterionConfig.trajectory(
                threshold=threshold, check_args=check_args,
                match_type=MatchType.EXACT if strict else MatchType.IN_ORDER),
        ))

    @classmethod
    def conversation_flow(cls, threshold: float = 0.8,
                          judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """Multi-turn talks: each answer matches, and the tools come in the expected order."""
        return EvalConfig(criteria=CriteriaConfig(
            response_match=CriterionConfig.response_match(threshold=threshold,
                                                          judge_model=judge_model),
            trajectory=CriterionConfig.trajectory(threshold=threshold,
                                                  match_type=MatchType.IN_ORDER),
        ))

    @classmethod
    def quick_check(cls) -> EvalConfig:
        """A free sanity check with no model call: ROUGE-1 overlap of at least 0.5."""
        return EvalConfig(criteria=CriteriaConfig(
            rouge_match=CriterionConfig.rouge_match(threshold=0.5)))

    @classmethod
    def comprehensive(cls, threshold: float = 0.8, use_llm_judge: bool = True,
                      judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """Every deterministic check, plus (``use_llm_judge``) the judge, factual accuracy,
        hallucination and safety criteria."""
        judged = dict.fromkeys(_PRESET_JUDGED, threshold) if use_llm_judge else {}
        return EvalConfig(criteria=CriteriaConfig(
            tool_name_match=CriterionConfig.tool_name_match(threshold=1.0),
            trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER,
                                                  check_args=True),
            rouge_match=CriterionConfig.rouge_match(threshold=threshold),
            **_judged(judged, judge_model),
        ))

    @classmethod
    def safety_check(cls, threshold: float = 0.8,
                     judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """Hallucination and safety, both judged."""
        return EvalConfig(criteria=CriteriaConfig(**_judged(
            {"hallucination": threshold, "safety": threshold}, judge_model)))

    @classmethod
    def combine(cls, *configs: EvalConfig) -> EvalConfig:
        """The criteria of every config; where two set the same criterion, the later wins."""
        merged: dict[str, CriterionConfig] = {}
        for config in configs:
            merged.update({name: copy.deepcopy(cfg) for name in CriteriaConfig.model_fields
                           if (cfg := getattr(config.criteria, name)) is not None})
        return EvalConfig(criteria=CriteriaConfig(**merged))

    @classmethod
    def custom(cls, response_threshold: float | None = None, tool_threshold: float | None = None,
               llm_judge_threshold: float | None = None,
               tool_match_type: MatchType = MatchType.IN_ORDER, check_tool_args: bool = True,
               hallucination_threshold: float | None = None,
               safety_threshold: float | None = None,
               factual_accuracy_threshold: float | None = None,
               judge_model: str = DEFAULT_JUDGE_MODEL) -> EvalConfig:
        """Exactly the criteria whose threshold is given (``tool_threshold`` turns on both the
        tool-name and the trajectory criterion)."""
        criteria: dict[str, CriterionConfig] = {}
        if response_threshold is not None:
            criteria["response_match"] = CriterionConfig.response_match(
                threshold=response_threshold, judge_model=judge_model)
        if tool_threshold is not None:
            criteria["tool_name_match"] = CriterionConfig.tool_name_match(threshold=tool_threshold)
            criteria["trajectory"] = CriterionConfig.trajectory(
                threshold=tool_threshold, match_type=tool_match_type, check_args=check_tool_args)
        criteria.update(_judged({"llm_judge": llm_judge_threshold,
                                 "hallucination": hallucination_threshold,
                                 "safety": safety_threshold,
                                 "factual_accuracy": factual_accuracy_threshold}, judge_model))
        return EvalConfig(criteria=CriteriaConfig(**criteria))


# The judged criteria a preset can switch on, each by a threshold and a judge model.
_PRESET_JUDGED = {
    "llm_judge": CriterionConfig.llm_judge,
    "factual_accuracy": CriterionConfig.factual_accuracy,
    "hallucination": CriterionConfig.hallucination,
    "safety": CriterionConfig.safety,
}


def _judged(thresholds: Mapping[str, float | None], judge_model: str) -> dict[str, CriterionConfig]:
    """The judged criteria whose threshold is given, all asking ``judge_model``."""
    return {name: _PRESET_JUDGED[name](threshold=threshold, judge_model=judge_model)
            for name, threshold in thresholds.items() if threshold is not None}
