"""The JSON report: the full report model, minus what nobody should ship around.

It is lean on purpose: raw HTTP payloads a provider or a user's agent may have tucked into
``details`` or ``metadata`` are dropped, and secret-looking keys in the run's judge/config
metadata are removed. Everything the model defines survives, so ``EvalReport.from_dict``
reads the result back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from referee.record import EvalReport
from referee.redact import redact_secrets
from referee.report.cascade import run_cascades
from referee.report.label_estimates import label_estimates_dict

# Keys that carry transport-level payloads (request/response bodies, headers), not results.
# Judge replies as text ("reply", "raw_reply", "reasonings") are results and are kept.
_RAW_HTTP_KEY = re.compile(
    r"^(raw_)?(http_(request|response|body)\w*|(request|response)_(body|bodies|headers|json)"
    r"|headers|raw_request|raw_http\w*)$",
    re.I,
)


def strip_raw_http(value: Any) -> Any:
    """A copy of ``value`` without raw HTTP payload keys, at any depth."""
    if isinstance(value, dict):
        return {
            k: strip_raw_http(v) for k, v in value.items()
            if not (isinstance(k, str) and _RAW_HTTP_KEY.match(k))
        }
    if isinstance(value, list):
        return [strip_raw_http(v) for v in value]
    return value


def lean_report_dict(report: EvalReport, *, with_cases: bool = True) -> dict[str, Any]:
    """The report as plain data, as every renderer should see it."""
    data = strip_raw_http(report.to_dict(with_cases=with_cases))
    for key in ("judge", "config_used", "metadata"):
        data[key] = redact_secrets(data.get(key) or {})
    cascades = run_cascades(report)
    if cascades:
        data["judge_cascade"] = cascades
    by_labels = label_estimates_dict(report)
    if by_labels is not None:
        data["corrected_by_labels"] = by_labels
    return data


def render_json(report: EvalReport, indent: int | None = 2) -> str:
    return json.dumps(lean_report_dict(report), indent=indent, ensure_ascii=False)


def iter_json(report: EvalReport) -> Iterator[str]:
    """The JSON report in pieces, one case at a time: a stored run's cases are read from
    cases.jsonl as they are written out, so the file can be far larger than memory.

    The same document as ``render_json``; cases sit one per line instead of indented.
    """
    head = lean_report_dict(report, with_cases=False)
    text = json.dumps(head, indent=2, ensure_ascii=False)
    yield text[:-2] + ',\n  "cases": ['
    for i, case in enumerate(report.cases):
        line = json.dumps(strip_raw_http(case.model_dump(mode="json")), ensure_ascii=False)
        yield ("\n    " if i == 0 else ",\n    ") + line
    yield "\n  ]\n}\n"
