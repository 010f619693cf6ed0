"""Spans and log records, as they arrive, -> whole traces and conversations ready to score.

A trace is complete once its root span (no parent) has arrived and nothing more of it came
for the quiet period; one whose root never comes is taken after ``trace_timeout`` as it is
(the trace import notes what is missing). Traces that share ``gen_ai.conversation.id`` (or
OpenInference's ``session.id``) are one case, as ``referee run --traces`` reads them: a
conversation is ready when each of its traces is complete and no trace of it came for the
conversation quiet period (a person may take a while to answer). What arrives for a trace or
a conversation already taken is a case of its own (late), keyed apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from referee.serve._spool import SpoolRecord

_CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
_ROUTE_KEYS = ("http.route", "url.path", "http.target")
_AGENT_KEYS = ("gen_ai.agent.name", "agent.name")
# A user marks a trace for scoring with referee.score=true, and tags it with referee.tags.
MARK_KEY = "referee.score"
TAGS_KEY = "referee.tags"
_FACT_KEYS = frozenset((*_CONVERSATION_KEYS, *_ROUTE_KEYS, *_AGENT_KEYS, MARK_KEY, TAGS_KEY))
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")


def _plain(value: Any) -> Any:
    """An OTLP/JSON AnyValue as a Python value (only what the facts read)."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "intValue", "doubleValue"):
        if key in value:
            return value[key]
    if "arrayValue" in value:
        return [_plain(v) for v in (value["arrayValue"] or {}).get("values") or []]
    return None


def _wanted_attributes(raw: Any) -> dict[str, Any]:
    found = {}
    for item in raw or []:
        if isinstance(item, dict) and item.get("key") in _FACT_KEYS:
            found[item["key"]] = _plain(item.get("value"))
    return found


@dataclass
class TraceFacts:
    """What sampling rules match: across every span of the case."""

    services: set[str] = field(default_factory=set)
    routes: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    error: bool = False
    marked: bool = False

    def merge(self, other: TraceFacts) -> None:
        self.services |= other.services
        self.routes |= other.routes
        self.agents |= other.agents
        self.tags |= other.tags
        self.error = self.error or other.error
        self.marked = self.marked or other.marked


@dataclass
class _Trace:
    trace_id: str
    first_seen: float
    last_seen: float
    spans: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    root_seen: bool = False
    max_seq: int = -1
    conversation: str | None = None
    facts: TraceFacts = field(default_factory=TraceFacts)

    @property
    def items(self) -> int:
        return len(self.spans) + len(self.logs)


@dataclass
class ReadyCase:
    """One case's traces, taken out of the assembler (their items still count as pending
    until ``release``)."""

    key: str  # the conversation id, else the trace id
    traces: list[_Trace]
    facts: TraceFacts

    @property
    def items(self) -> int:
        return sum(t.items for t in self.traces)

    @property
    def scored_seqs(self) -> dict[str, int]:
        """What the ledger records once this case is scored: each trace's highest seq."""
        return {t.trace_id: t.max_seq for t in self.traces}

    @property
    def trace_ids(self) -> list[str]:
        return [t.trace_id for t in self.traces]

    def documents(self) -> list[tuple[int | None, dict[str, Any]]]:
        """OTLP/JSON records the trace import reads: the spans, then the logs if any."""
        spans = [s for t in self.traces for s in t.spans]
        records: list[tuple[int | None, dict[str, Any]]] = [
            (None, {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})]
        logs = [r for t in self.traces for r in t.logs]
        if logs:
            records.append((None, {"resourceLogs": [{"scopeLogs": [{"logRecords": logs}]}]}))
        return records


class Assembler:
    """Open traces by id, and the conversations they belong to."""

    def __init__(self, *, quiet_period: float, trace_timeout: float,
                 conversation_quiet: float | None = None) -> None:
        self.quiet_period = quiet_period
        self.conversation_quiet = quiet_period if conversation_quiet is None \
            else max(quiet_period, conversation_quiet)
        self.trace_timeout = trace_timeout
        self.traces: dict[str, _Trace] = {}
        self.conversations: dict[str, set[str]] = {}
        self.pending_items = 0  # held in memory, open or taken and not yet released
        self.peak_pending_items = 0
        self.items_received = 0

    def add(self, record: SpoolRecord, *, scored: dict[str, int] | None = None,
            now: float | None = None) -> None:
        """Take a durable request's items; with ``scored`` (a replay), skip those the ledger
        says were scored already."""
        seen_at = record.received_at if now is None else now
        for resource in record.document.get("resourceSpans") or []:
            service = self._service(resource)
            for scope in (resource or {}).get("scopeSpans") or []:
                for span in (scope or {}).get("spans") or []:
                    if not isinstance(span, dict) or not span.get("traceId"):
                        continue
                    trace = self._trace(str(span["traceId"]), record.seq, scored, seen_at)
                    if trace is None:
                        continue
                    trace.spans.append(span)
                    self._span_facts(trace, span, service)
        for resource in record.document.get("resourceLogs") or []:
            for scope in (resource or {}).get("scopeLogs") or []:
                for log in (scope or {}).get("logRecords") or []:
                    if not isinstance(log, dict) or not log.get("traceId"):
                        continue  # a log outside any trace belongs to no case
                    trace = self._trace(str(log["traceId"]), record.seq, scored, seen_at)
                    if trace is not None:
                        trace.logs.append(log)

    @staticmethod
    def _service(resource: Any) -> str | None:
        attrs = (resource or {}).get("resource", {}).get("attributes") if isinstance(
            resource, dict) else None
        for item in attrs or []:
            if isinstance(item, dict) and item.get("key") == "service.name":
                value = _plain(item.get("value"))
                return str(value) if value is not None else None
        return None

    def _trace(self, trace_id: str, seq: int, scored: dict[str, int] | None,
               seen_at: float) -> _Trace | None:
        if scored is not None and seq <= scored.get(trace_id, -1):
            return None
        trace = self.traces.get(trace_id)
        if trace is None:
            trace = self.traces[trace_id] = _Trace(trace_id, seen_at, seen_at)
        trace.last_seen = max(trace.last_seen, seen_at)
        trace.max_seq = max(trace.max_seq, seq)
        self.pending_items += 1
        self.peak_pending_items = max(self.peak_pending_items, self.pending_items)
        self.items_received += 1
        return trace

    def _span_facts(self, trace: _Trace, span: dict[str, Any], service: str | None) -> None:
        if not span.get("parentSpanId"):
            trace.root_seen = True
        facts = trace.facts
        if service:
            facts.services.add(service)
        if (span.get("status") or {}).get("code") in _STATUS_ERROR:
            facts.error = True
        attrs = _wanted_attributes(span.get("attributes"))
        if not attrs:
            return
        for key in _CONVERSATION_KEYS:
            if attrs.get(key) not in (None, "") and trace.conversation is None:
                trace.conversation = str(attrs[key])
                self.conversations.setdefault(trace.conversation, set()).add(trace.trace_id)
                break
        facts.routes.update(str(attrs[k]) for k in _ROUTE_KEYS if attrs.get(k) is not None)
        facts.agents.update(str(attrs[k]) for k in _AGENT_KEYS if attrs.get(k) is not None)
        if attrs.get(MARK_KEY) in (True, "true", "1", 1):
            facts.marked = True
        tags = attrs.get(TAGS_KEY)
        if isinstance(tags, str):
            facts.tags.update(t.strip() for t in tags.split(",") if t.strip())
        elif isinstance(tags, list):
            facts.tags.update(str(t) for t in tags if t is not None)

    def _complete(self, trace: _Trace, now: float) -> bool:
        return (trace.root_seen and now - trace.last_seen >= self.quiet_period) \
            or now - trace.first_seen >= self.trace_timeout

    def take_ready(self, now: float, limit: int) -> list[ReadyCase]:
        """Up to ``limit`` complete cases, oldest first, taken out of the open traces."""
        ready: list[ReadyCase] = []
        for trace_id in list(self.traces):
            if len(ready) >= limit:
                break
            trace = self.traces.get(trace_id)
            if trace is None or not self._complete(trace, now):
                continue
            key = trace.conversation or trace.trace_id
            members = sorted(self.conversations.get(key, ())) if trace.conversation \
                else [trace.trace_id]
            if not all(m in self.traces and self._complete(self.traces[m], now)
                       for m in members):
                continue
            if trace.conversation and now - max(self.traces[m].last_seen for m in members) \
                    < self.conversation_quiet:
                continue
            taken = [self.traces.pop(m) for m in members]
            if trace.conversation:
                del self.conversations[key]
            facts = TraceFacts()
            for member in taken:
                facts.merge(member.facts)
            taken.sort(key=lambda t: t.first_seen)
            ready.append(ReadyCase(key, taken, facts))
        return ready

    def release(self, cases: Iterable[ReadyCase]) -> None:
        for case in cases:
            self.pending_items -= case.items
