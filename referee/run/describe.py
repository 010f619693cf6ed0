"""The criteria and judges of a run, described once for its record.

``describe_run`` looks up each judged criterion's judge once, before the first case, and binds
it to the criterion (``JudgedCriterionBase.bind_judge``): scoring looks nothing up again, on any
backend (design decision 16). It keeps what meta.json, the report and the
before-the-first-case announcement say about those judges: ``criteria`` (what each criterion is
and how it is set up, which a resume compares) and ``judges`` (the judge each judged criterion
will call, by criterion label). Nothing here calls a model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any

from referee.case import canonical_json
from referee.criteria.base import Criterion, JudgedCriterion, criterion_label
from referee.criteria.judged import JudgedCriterionBase, is_judged, judged_criteria
from referee.judge.binding import JudgeBinding
from referee.judge.config import DEFAULT_JUDGES, EFFECTIVE_RELIABILITY_SAMPLE, EVAL_SUITE
from referee.judge.providers import rules_for
from referee.record import judged_labels
from referee.redact import mask_url, mask_url_passwords, redact, redact_secrets
from referee.result import unique_labels
from referee.terminal import terminal_safe

NO_PROVIDER = "no provider available"

# Each criterion's resolved judge (None: it has none, or it cannot be resolved), in order.
Resolved = Sequence["dict[str, Any] | None"]


@dataclass(frozen=True)
class RunDescription:
    """What the run record says about the criteria and their judges, each judge resolved once."""

    criteria: list[dict[str, Any]]  # describe_criteria: meta.json's "criteria", resume compares it
    judges: dict[str, dict[str, Any]]  # judges_by_criterion: by criterion label
    # By criterion label: the reliability_sample of each judged criterion whose judge has
    # reliability_check (run/reliability.py re-asks a sample of the run for it).
    reliability_samples: dict[str, int] = field(default_factory=dict)
    # By criterion label: the threshold a judged criterion takes from the built-in table for
    # its judge model, when none was given (it differs from judge to judge).
    judge_thresholds: dict[str, float] = field(default_factory=dict)

    @property
    def judged_criteria(self) -> list[str]:
        """The labels of the criteria a judge scores (``EvalReport.judged_criteria``)."""
        return judged_labels(self.criteria) or []

    @property
    def judge(self) -> dict[str, Any]:
        """The judge of the run for meta.json and the report (secrets are removed by the store).

        One judge shared by every judged criterion is reported as that config; several are
        reported per criterion under ``per_criterion``.
        """
        distinct = {canonical_json(v) for v in self.judges.values()}
        if len(distinct) == 1:
            return dict(next(iter(self.judges.values())))
        return {"per_criterion": self.judges} if self.judges else {}

    def announce(self, stream: IO[str] | None = None) -> None:
        """Say, before the first case, which judge each judged criterion will use: a judge
        that is not the one the user meant (or none at all) should not take a whole run to
        notice."""
        _announce(self.judges, stream)
        for name, threshold in self.judge_thresholds.items():
            model = self.judges.get(name, {}).get("model", "?")
            line = (f"referee: threshold for {name}: {threshold:g}, the built-in default for "
                    f"judge {model} (it differs by judge model; threshold= sets one)")
            print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)


def describe_run(criteria: Sequence[Criterion]) -> RunDescription:
    """Bind every judged criterion's judge (nested ones too), then describe the run."""
    for criterion in judged_criteria(criteria):
        criterion.bind_looked_up_judge()
    resolutions = [_resolution(c) for c in criteria]
    resolved = [judge for judge, _ in resolutions]
    labels = unique_labels([criterion_label(c) for c in criteria])
    return RunDescription(criteria=describe_criteria(criteria, resolved),
                          judges=judges_by_criterion(criteria, resolved),
                          reliability_samples={label: sample for label, (_, sample)
                                               in zip(labels, resolutions) if sample is not None},
                          judge_thresholds={label: threshold for label, threshold in (
                              (label, _judge_table_threshold(c)) for label, c in
                              zip(labels, criteria)) if threshold is not None})


def asks_by_batch_api(criteria: Sequence[Criterion]) -> bool:
    """Whether any bound judge of ``criteria`` (a panel member or cascade stage too) sends its
    requests by a provider's batch API."""
    for criterion in judged_criteria(criteria):
        binding = _binding(criterion)
        if binding is None:
            continue
        stages = binding.stages or (binding,)
        if any(member.effective_batch_api for stage in stages for member in stage.members):
            return True
    return False


def _judge_table_threshold(criterion: Criterion) -> float | None:
    """The threshold ``criterion`` takes from the built-in per-judge table; None when it was
    given one, or its threshold does not depend on the judge."""
    if getattr(criterion, "calibration_key", None) is None \
            or getattr(criterion, "_explicit_threshold", 0) is not None \
            or getattr(criterion, "calibration_required", False):
        return None
    panel = getattr(criterion, "judge_panel", None)
    if callable(panel) and panel() is not None:
        return None
    entry = getattr(criterion, "calibration_entry", None)
    try:
        if callable(entry) and entry(criterion.judge_config()) is not None:  # type: ignore[attr-defined]
            return None  # a calibration file's entry: the run's own record names it
        return float(criterion.threshold)
    except Exception:  # a judge that cannot be resolved is reported by the judge line
        return None


def judges_by_criterion(criteria: Sequence[Criterion],
                        resolved: Resolved | None = None) -> dict[str, dict[str, Any]]:
    """The judge each judged criterion will call (provider, model, endpoint; no secrets).

    An AgentEvaluator-style criterion whose ``judge_model`` no provider can serve is listed with
    ``"judge": "no provider available"``: it will score the 10xgraph-style API's 0.5 placeholder.
    """
    per: dict[str, dict[str, Any]] = {}
    labels = unique_labels([criterion_label(c) for c in criteria])
    if resolved is None:
        resolved = [_resolved_judge(c) for c in criteria]
    for name, criterion, judge in zip(labels, criteria, resolved):
        if judge is not None:
            per[name] = judge
            continue
        model = _unreachable_model(criterion)
        if model:
            per[name] = {"model": model, "judge": NO_PROVIDER}
    return per


def _unreachable_model(criterion: object) -> str | None:
    """The judge model no provider can serve, of a criterion whose config names its judge."""
    binding = _binding(criterion)
    if binding is not None:
        return binding.unreachable_model
    if not isinstance(criterion, JudgedCriterion) or not _named_by_config(criterion):
        return None
    return getattr(getattr(criterion, "config", None), "judge_model", None)


def _named_by_config(criterion: object) -> bool:
    """Whether the criterion's config names its judge (the 10xgraph-style rule) rather than a
    judge resolved in layers (the multivon-style one, also a protocol object's default)."""
    defaults = getattr(criterion, "judge_defaults", DEFAULT_JUDGES[EVAL_SUITE])
    return bool(getattr(defaults, "named_by_config", False))


def _binding(criterion: object) -> JudgeBinding | None:
    """A judged criterion's bound judge (bound now if no run did); None for another criterion,
    or when its judge cannot be looked up (each case then errors, not the description)."""
    if not isinstance(criterion, JudgedCriterionBase):
        return None
    try:
        return criterion.judge_binding()
    except Exception:
        return None


def describe_judges(criteria: Sequence[Criterion]) -> dict[str, Any]:
    """``RunDescription.judge`` of these criteria."""
    return RunDescription(criteria=[], judges=judges_by_criterion(criteria)).judge


_JUDGE_FIELDS = ("provider", "model", "base_url", "api_style", "temperature", "max_tokens")


def _resolved_judge(criterion: object) -> dict[str, Any] | None:
    """An EvalSuite-style evaluator's effective judge (per-evaluator > configure() > env >
    default)."""
    return _resolution(criterion)[0]


def _reliability_sample(configs: Sequence[Any]) -> int | None:
    """The largest reliability_sample among judges that have reliability_check; None if none."""
    samples = [getattr(c, "effective_reliability_sample", EFFECTIVE_RELIABILITY_SAMPLE)
               for c in configs if getattr(c, "reliability_check", False)]
    return max(samples) if samples else None


def _resolution(criterion: object) -> tuple[dict[str, Any] | None, int | None]:
    """``_resolved_judge``, and the reliability sample its judge asks for (None: no check)."""
    if isinstance(criterion, JudgedCriterionBase):
        binding = _binding(criterion)
        if binding is None:
            return None, None
        if binding.cascade is not None:  # cascade seam: every stage, cheapest first
            return (_cascade_fields(binding),
                    _reliability_sample([m for stage in binding.stages for m in stage.members]))
        if binding.panel is not None:
            return _panel_fields(binding.panel), _reliability_sample(binding.panel.members)
        if binding.judge is None:
            return None, None
        return _judge_fields(binding.judge), _reliability_sample([binding.judge])
    # A judged criterion of the user's own (the protocol alone): asked once, here.
    panel = getattr(criterion, "judge_panel", None)
    try:
        panel = panel() if callable(panel) else None
    except ValueError:  # as below: an unresolvable judge shows up as the case errors
        return None, None
    if panel is not None:
        return _panel_fields(panel), _reliability_sample(panel.members)
    config = None
    if isinstance(criterion, JudgedCriterion):
        try:
            config = criterion.judge_config()
        except Exception:  # an unresolvable judge shows up as the case errors, not here
            config = None
    if config is None:
        config = getattr(criterion, "judge", None)
    if config is None or not hasattr(config, "model_dump"):
        return None, None
    return _judge_fields(config), _reliability_sample([config])


def _panel_fields(panel: Any) -> dict[str, Any]:
    """Every member, as it is called, and how their answers combine."""
    return {"members": [_judge_fields(m) for m in panel.members], "aggregate": panel.aggregate,
            "quorum": panel.effective_quorum,
            **({"weights": panel.weights} if panel.aggregate == "weighted" else {})}


def _cascade_fields(binding: JudgeBinding) -> dict[str, Any]:
    """Each stage as it is called, and when the next one is asked."""
    cascade = binding.cascade
    assert cascade is not None
    stages = [_panel_fields(stage.panel) if stage.panel is not None
              else _judge_fields(stage.judge) if stage.judge is not None else {}
              for stage in binding.stages]
    return {"cascade": {"stages": stages,
                        **cascade.model_dump(mode="json", exclude={"stages"})}}


def _judge_fields(config: Any) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    if data.get("base_url"):
        data["base_url"] = mask_url(data["base_url"])
    return {k: data[k] for k in _JUDGE_FIELDS if data.get(k) not in (None, "")}


def announce_judges(criteria: Sequence[Criterion], stream: IO[str] | None = None) -> None:
    """``RunDescription.announce`` for these criteria."""
    _announce(judges_by_criterion(criteria), stream)


def _announce(per: dict[str, dict[str, Any]], stream: IO[str] | None) -> None:
    for name, judge in per.items():
        if judge.get("judge") == NO_PROVIDER:
            what = f"{judge['model']}: {NO_PROVIDER} (see below)"
        elif "cascade" in judge:
            what = "cascade " + " -> ".join(
                f"{s.get('provider', '?')}/{s.get('model', '?')}" if "members" not in s
                else "panel of " + ", ".join(f"{m.get('provider')}/{m.get('model')}"
                                             for m in s["members"])
                for s in judge["cascade"]["stages"])
        else:
            what = f"{judge.get('provider', '?')}/{judge.get('model', '?')}"
            if judge.get("base_url"):
                what += f" at {judge['base_url']}"
            # The API a judge is called through, where its provider offers several (a local
            # server may serve only one of them, or serve JSON mode on only one).
            api_names = rules_for(str(judge.get("provider"))).api_names
            if judge.get("api_style") in api_names:
                what += f" via {api_names[judge['api_style']]}"
        line = f"referee: judge for {name}: {what}"
        print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)
    unreachable = dict.fromkeys(judge["model"] for judge in per.values()
                                if judge.get("judge") == NO_PROVIDER)
    for line in _no_judge_reachable(list(unreachable)):
        print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)


def _no_judge_reachable(models: list[str]) -> list[str]:
    """Before the first case: why no judge can be reached, and how to pick one, or to go
    without. Nothing changes in the run itself (its judged scores stay the documented 0.5
    placeholder, counted as JUDGE_ERROR)."""
    if not models:
        return []
    from referee.judge.config import split_judge_model

    reasons = []
    for model in models:
        provider, _ = split_judge_model(model)
        if provider is None:
            reasons.append(f"{model}: no provider follows from the name (write it as "
                           f"openai/{model} for an OpenAI-compatible server)")
        else:
            name, credentials = rules_for(provider).credentials_hint or (provider, "its key")
            reasons.append(f"{model}: a {name} model, and {credentials} is not set")
    return [
        f"referee: no judge is reachable ({'; '.join(reasons)}): each score of those criteria "
        "will be the 0.5 placeholder \"No LLM provider available\", counted as JUDGE_ERROR, "
        "not a verdict",
        "referee: to pick a judge, set that variable, or name one you can reach as judge_model "
        "in an EvalConfig (referee run --config EVAL_CONFIG.json), e.g. openai/gpt-4o-mini with "
        "OPENAI_API_KEY, or openai/MODEL with OPENAI_BASE_URL=http://localhost:11434/v1 for a "
        "local server (Ollama, vLLM); or run deterministic criteria only (trajectory, "
        "node_order, rouge_match, contains_keywords: see examples/quickstart/eval_config.json)",
    ]


def describe_criteria(criteria: Sequence[Criterion],
                      resolved: Resolved | None = None) -> list[dict[str, Any]]:
    """What each criterion is and how it is set up, for meta.json: resume compares it.

    A criterion's public attributes (its config, substrings, rubric questions, judge...) are
    its settings; private ones are state it builds (generated questions, locks). ``judged``
    says whether a judge scores it: only such results are people's to label (labels measure a
    judge's errors), and a resume compares it no more than the class.
    """
    if resolved is None:
        resolved = [_resolved_judge(c) for c in criteria]
    return [{"name": criterion_label(c),
             "class": f"{type(c).__module__}.{type(c).__qualname__}",
             "judged": is_judged(c),
             "settings": _settings(c, judge=judge)} for c, judge in zip(criteria, resolved)]


_UNRESOLVED: Any = object()  # a criterion inside a criterion: its judge is resolved on the way


def _settings(criterion: Any, depth: int = 0, judge: Any = _UNRESOLVED) -> dict[str, Any]:
    try:
        attrs = vars(criterion)
    except TypeError:  # __slots__ or a C type: nothing to compare but the class
        attrs = {}
    settings = {k: _plain(v, depth) for k, v in sorted(attrs.items()) if not k.startswith("_")}
    threshold = getattr(criterion, "threshold", None)
    if isinstance(threshold, (int, float)):
        settings["threshold"] = threshold
    judged = isinstance(criterion, JudgedCriterion)
    if judged and not _named_by_config(criterion):
        _record_resolved_judge(criterion, settings,
                               _resolved_judge(criterion) if judge is _UNRESOLVED else judge)
    elif not judged and isinstance(settings.get("config"), dict):
        # A criterion that asks no judge records none: its config's judge defaults
        # (judge_model gemini-2.5-flash...) would name a judge that never judged it.
        settings["config"] = {k: v for k, v in settings["config"].items()
                              if k not in _JUDGE_CONFIG_FIELDS}
    return redact_secrets(settings)


# The CriterionConfig fields only a judged criterion reads.
_JUDGE_CONFIG_FIELDS = frozenset({"judge_model", "judge_panel", "judge_cascade", "num_samples",
                                  "api_style"})


def _record_resolved_judge(criterion: object, settings: dict[str, Any],
                           resolved: dict[str, Any] | None) -> None:
    """An EvalSuite-style evaluator is judged by its resolved judge (judge= > configure() >
    environment > default), never by its config's judge_model: record that judge as
    ``resolved_judge``, and of its config only what was set (the threshold), so meta.json
    names no judge that does not judge."""
    config = getattr(criterion, "config", None)
    if isinstance(settings.get("config"), dict) and config is not None \
            and hasattr(config, "model_fields_set"):
        settings["config"] = {k: v for k, v in settings["config"].items()
                              if k in config.model_fields_set}
    if resolved is not None:
        settings["resolved_judge"] = {k: v for k, v in resolved.items() if k not in _OPERATIONAL}


# How a judge is reached and paced, not what it judges: a resume may change these freely
# (a restarted local server, more retries after an outage).
_OPERATIONAL = frozenset({"base_url", "timeout", "max_concurrency", "max_retries",
                          "retry_max_total_s", "cache", "cache_path", "rpm", "tpm"})

def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON value that names ``value`` the same way in every process."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return mask_url_passwords(value)  # a judge's base_url password never reaches meta.json
    if hasattr(value, "model_dump"):
        try:
            data = value.model_dump(mode="json")
        except Exception:
            return type(value).__qualname__
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in _OPERATIONAL}
        return _plain(data, depth)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v, depth) for v in value]
        return sorted(items, key=canonical_json) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, Enum):
        return _plain(value.value, depth)
    if callable(getattr(value, "evaluate", None)) and depth < 4:
        # A criterion inside a criterion (composite, weighted): its own settings count too.
        return {"class": type(value).__qualname__, "settings": _settings(value, depth + 1)}
    # Callables and other objects: by name, never by repr (it holds a memory address).
    return getattr(value, "__qualname__", None) or type(value).__qualname__


def criteria_difference(stored: list[dict[str, Any]], current: list[dict[str, Any]]) -> str | None:
    """The first difference between two ``describe_criteria`` lists, in words; None if equal."""
    if [c.get("name") for c in stored] != [c.get("name") for c in current]:
        return (f"the stored run has {len(stored)} criteria "
                f"({', '.join(str(c.get('name')) for c in stored) or 'none'}), this one has "
                f"{len(current)} ({', '.join(str(c.get('name')) for c in current) or 'none'})")
    for before, now in zip(stored, current):
        name = before.get("name")
        if before.get("class") != now.get("class"):
            return f"criterion {name!r} is now a {now.get('class')} (was {before.get('class')})"
        found = _first_difference(*_comparable(before.get("settings") or {},
                                                now.get("settings") or {}), "")
        if found is not None:
            where, old, new = found
            return f"criterion {name!r} {where}: {short_json(old)} -> {short_json(new)}"
    return None


def _comparable(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two criteria settings as both record them: a run stored before an EvalSuite-style
    evaluator's resolved judge was recorded (it has no ``resolved_judge`` and its whole
    config) resumes as before. The resolved judge is left to the run's judge check, which
    names a changed judge in its own words."""
    old, new = dict(old), dict(new)
    old.pop("resolved_judge", None)
    new.pop("resolved_judge", None)
    if isinstance(old.get("config"), dict) and isinstance(new.get("config"), dict):
        shared = old["config"].keys() & new["config"].keys()
        old["config"] = {k: v for k, v in old["config"].items() if k in shared}
        new["config"] = {k: v for k, v in new["config"].items() if k in shared}
    return old, new


def _first_difference(old: Any, new: Any, where: str) -> tuple[str, Any, Any] | None:
    """(dotted path, old, new) of the first setting that differs, going into nested settings."""
    if canonical_json(old) == canonical_json(new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_difference(old.get(key), new.get(key), f"{where}.{key}" if where else key)
            if found is not None:
                return found
    return where, old, new


def judge_difference(stored: dict[str, Any], current: dict[str, Any]) -> str | None:
    """The first difference between a stored run's judge and this one's, in words; where a
    judge is reached (base_url) may change."""
    found = _first_difference(_without_base_url(redact_secrets(stored)),
                              _without_base_url(redact_secrets(current)), "judge")
    if found is None:
        return None
    where, old, new = found
    return f"{where.replace('.', ' ')}: {short_json(old)} -> {short_json(new)}"


def _without_base_url(judge: Any) -> Any:
    if not isinstance(judge, dict):
        return judge
    return {k: _without_base_url(v) for k, v in judge.items() if k != "base_url"}


def short_json(value: Any, limit: int = 80) -> str:
    text = canonical_json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
