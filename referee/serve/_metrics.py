"""The counters ``/metrics`` serves, in the Prometheus text exposition format (0.0.4)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from referee.record import CaseResult
from referee.serve._budget import BUDGET_KEY

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def read_metrics(text: str) -> dict[str, float]:
    """A scrape of ``/metrics`` as ``{'name{labels}': value}`` (benchmarks and tests read it)."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@dataclass
class ServeMetrics:
    spans_received: int = 0
    log_records_received: int = 0
    # (signal, answer): the HTTP status (200, 503...) or the gRPC status name (OK, UNAVAILABLE...)
    requests: Counter[tuple[str, int | str]] = field(default_factory=Counter)
    rejected: int = 0  # answered 503 / UNAVAILABLE: the exporter keeps the data and retries
    cases_scored: Counter[str] = field(default_factory=Counter)  # by case status
    sampled_out: Counter[str] = field(default_factory=Counter)  # by the rule that decided
    # By criterion label: passed, failed, skipped, skipped_for_budget, error.
    criterion_outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    judge_requests: int = 0
    scoring_failures: int = 0  # cases left in the spool by a fault (scored after a restart)
    alerts: Counter[str] = field(default_factory=Counter)  # by criterion
    webhook_failures: int = 0
    spool_write_failures: int = 0  # answered 503: the request was not kept
    without_spans: int = 0  # late log records of a trace already scored: nothing to score

    def observe(self, result: CaseResult) -> None:
        self.cases_scored[result.status.value] += 1
        for r in result.criterion_results:
            if r.details.get(BUDGET_KEY):
                outcome = "skipped_for_budget"
            elif r.error is not None or r.error_kind is not None:
                outcome = "error"
            elif r.skipped:
                outcome = "skipped"
            else:
                outcome = "passed" if r.passed else "failed"
            self.criterion_outcomes[(r.criterion, outcome)] += 1
            if r.token_usage is not None:
                self.judge_requests += r.token_usage.requests

    def render(self, gauges: dict[str, float], spend_usd: float,
               unpriced: int) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, text: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

        metric("referee_serve_spans_received_total", "counter", "Spans accepted (spooled).",
               [("", self.spans_received)])
        metric("referee_serve_log_records_received_total", "counter",
               "Log records accepted (spooled).", [("", self.log_records_received)])
        metric("referee_serve_requests_total", "counter",
               "OTLP requests by signal and answer (an HTTP status or a gRPC status name).",
               [(f'{{signal="{s}",code="{c}"}}', n) for (s, c), n in sorted(
                   self.requests.items(), key=lambda item: (item[0][0], str(item[0][1])))])
        metric("referee_serve_rejected_total", "counter",
               "Requests refused with 503 or UNAVAILABLE and a retry delay (the exporter "
               "retries them).",
               [("", self.rejected)])
        metric("referee_serve_dropped_total", "counter",
               "Accepted spans never scored: always 0 (spooled before the answer).",
               [("", 0)])
        metric("referee_serve_scoring_failures_total", "counter",
               "Cases a fault kept from being scored (left in the spool for a restart).",
               [("", self.scoring_failures)])
        metric("referee_serve_cases_scored_total", "counter", "Cases scored, by case status.",
               [(f'{{status="{_label(s)}"}}', n) for s, n in sorted(self.cases_scored.items())])
        metric("referee_serve_cases_sampled_out_total", "counter",
               "Cases not scored by a sampling rule, by rule.",
               [(f'{{rule="{_label(r)}"}}', n) for r, n in sorted(self.sampled_out.items())])
        metric("referee_serve_criterion_results_total", "counter",
               "Criterion results by criterion and outcome.",
               [(f'{{criterion="{_label(c)}",outcome="{o}"}}', n)
                for (c, o), n in sorted(self.criterion_outcomes.items())])
        rates = []
        for criterion in sorted({c for c, _ in self.criterion_outcomes}):
            passed = self.criterion_outcomes[(criterion, "passed")]
            failed = self.criterion_outcomes[(criterion, "failed")]
            if passed + failed:
                rates.append((f'{{criterion="{_label(criterion)}"}}', passed / (passed + failed)))
        metric("referee_serve_criterion_pass_rate", "gauge",
               "Passed / (passed + failed) per criterion since start (skips and errors left out).",
               rates)
        metric("referee_serve_spool_write_failures_total", "counter",
               "Requests answered 503 because the spool could not be written.",
               [("", self.spool_write_failures)])
        metric("referee_serve_cases_without_spans_total", "counter",
               "Log records that came after their trace was scored (no spans to score).",
               [("", self.without_spans)])
        metric("referee_serve_alerts_total", "counter",
               "Windows in which a criterion's pass rate fell below its --alert gate.",
               [(f'{{criterion="{_label(c)}"}}', n) for c, n in sorted(self.alerts.items())])
        metric("referee_serve_webhook_failures_total", "counter",
               "Alert webhook posts that failed.", [("", self.webhook_failures)])
        metric("referee_serve_judge_spend_usd_total", "counter",
               "Judge spend priced by the judge layer, USD.", [("", spend_usd)])
        metric("referee_serve_judge_requests_total", "counter", "Judge requests made.",
               [("", self.judge_requests)])
        metric("referee_serve_judge_unpriced_requests_total", "counter",
               "Judge requests of a model with no known price (not in the spend).",
               [("", unpriced)])
        for name, value in gauges.items():
            metric(f"referee_serve_{name}", "gauge", name.replace("_", " ") + ".", [("", value)])
        return "\n".join(lines) + "\n"
