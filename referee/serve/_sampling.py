"""Which traces are scored: rules with a rate each, decided by the case's id.

A rule is ``KEY=VALUE[,KEY=VALUE...]:RATE``; keys are ``service`` (the resource's
service.name), ``route`` (http.route/url.path), ``agent`` (gen_ai.agent.name), ``tag`` (a value
of the spans' ``referee.tags``) and ``error`` (``true``/``false``: a span with error status);
values may use shell wildcards (``/chat/*``). The first rule whose every condition matches sets
the rate; no rule matching leaves the default rate. Errors and marked traces
(``referee.score=true``) are always scored unless told otherwise. The decision hashes the case
id (the conversation id, else the trace id), so every replica decides alike.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from referee.errors import InputError
from referee.serve._assembly import TraceFacts

RULE_KEYS = ("service", "route", "agent", "tag", "error")


@dataclass(frozen=True)
class SamplingRule:
    conditions: tuple[tuple[str, str], ...]
    rate: float
    text: str

    @classmethod
    def parse(cls, text: str) -> SamplingRule:
        where, sep, rate_text = text.rpartition(":")
        expected = "KEY=VALUE[,KEY=VALUE...]:RATE with RATE from 0 to 1"
        try:
            rate = float(rate_text)
        except ValueError:
            rate = -1.0
        if not sep or not where.strip() or not 0.0 <= rate <= 1.0:
            raise InputError(f"sampling rule {text!r}", source="--sample", expected=expected)
        conditions = []
        for part in where.replace(" ", ",").split(","):
            if not part:
                continue
            key, eq, value = part.partition("=")
            if not eq or key not in RULE_KEYS or not value:
                raise InputError(f"sampling rule {text!r}: condition {part!r}",
                                 source="--sample",
                                 expected=f"KEY=VALUE with KEY one of {', '.join(RULE_KEYS)}")
            if key == "error" and value not in ("true", "false"):
                raise InputError(f"sampling rule {text!r}: error={value}", source="--sample",
                                 expected="error=true or error=false")
            conditions.append((key, value))
        return cls(tuple(conditions), rate, text)

    def matches(self, facts: TraceFacts) -> bool:
        return all(_holds(key, value, facts) for key, value in self.conditions)


def _holds(key: str, pattern: str, facts: TraceFacts) -> bool:
    if key == "error":
        return facts.error == (pattern == "true")
    values = {"service": facts.services, "route": facts.routes, "agent": facts.agents,
              "tag": facts.tags}[key]
    return any(fnmatch.fnmatchcase(value, pattern) for value in values)


def unit_fraction(key: str) -> float:
    """A uniform number in [0, 1) fixed by ``key``: the same on every replica and restart."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


@dataclass(frozen=True)
class Decision:
    sampled: bool
    reason: str  # the rule, "default", "error" or "marked"


@dataclass(frozen=True)
class Sampler:
    rules: Sequence[SamplingRule] = ()
    default_rate: float = 1.0
    always_errors: bool = True
    always_marked: bool = True

    def decide(self, key: str, facts: TraceFacts) -> Decision:
        if self.always_marked and facts.marked:
            return Decision(True, "marked")
        if self.always_errors and facts.error:
            return Decision(True, "error")
        rule = next((r for r in self.rules if r.matches(facts)), None)
        rate = rule.rate if rule is not None else self.default_rate
        return Decision(unit_fraction(key) < rate, rule.text if rule is not None else "default")
