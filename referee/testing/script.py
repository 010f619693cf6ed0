"""What a scripted judge answers: replies, faults, rules and the record of each request.

Shared by the loopback HTTP server and the in-process fake so both are scripted the same way.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from referee.judge.caching import estimate_tokens


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the scripted model asks for; ``call_id`` defaults to a fresh ``call_...``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A successful judge reply. Token counts default to estimates (about 4 characters each).

    With ``tool_calls`` it is an assistant turn that calls tools (an agent's model step): every
    API answers with its own tool-call shape, and ``text`` (empty by default there) rides along.
    """

    text: str = "Yes"
    input_tokens: int | None = None
    output_tokens: int | None = None
    thinking: str | None = None  # a reasoning block sent before the answer, where the API has one
    latency_s: float = 0.0
    tool_calls: tuple[ScriptedToolCall, ...] = ()

    @classmethod
    def calling(cls, *calls: ScriptedToolCall | tuple[str, dict[str, Any]], text: str = "",
                **fields: Any) -> "Reply":
        """A turn that calls tools: ``Reply.calling(("get_weather", {"city": "Paris"}))``."""
        scripted = tuple(c if isinstance(c, ScriptedToolCall) else ScriptedToolCall(*c)
                         for c in calls)
        if not scripted:
            raise ValueError("Reply.calling needs at least one tool call")
        return cls(text=text, tool_calls=scripted, **fields)


@dataclass(frozen=True)
class Fault:
    """A failure to inject instead of a reply.

    kinds: ``status`` (any HTTP error, optionally with Retry-After), ``reset`` (TCP reset),
    ``hang`` (no answer for ``seconds``, or until the server stops), ``truncated`` (the body
    stops half-way), ``non_json`` (a 200 whose body is not JSON), ``empty`` (a 200 with empty
    text), ``latency`` (answer normally after ``seconds``).
    """

    kind: str
    status: int = 0
    retry_after: str | None = None
    seconds: float | None = None
    body: str | None = None

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = None) -> "Fault":
        return cls("status", status=429,
                   retry_after=None if retry_after is None else _header_value(retry_after))

    @classmethod
    def http(cls, status: int, retry_after: float | str | None = None,
             body: str | None = None) -> "Fault":
        if not 400 <= status <= 599:
            raise ValueError(f"an HTTP fault needs a 4xx/5xx status, got {status}")
        return cls("status", status=status,
                   retry_after=None if retry_after is None else _header_value(retry_after),
                   body=body)

    @classmethod
    def server_error(cls, status: int = 500) -> "Fault":
        return cls.http(status)

    @classmethod
    def reset(cls) -> "Fault":
        return cls("reset")

    @classmethod
    def hang(cls, seconds: float | None = None) -> "Fault":
        return cls("hang", seconds=seconds)

    @classmethod
    def truncated(cls) -> "Fault":
        return cls("truncated")

    @classmethod
    def non_json(cls, body: str = "<html><body>502 Bad Gateway</body></html>") -> "Fault":
        return cls("non_json", body=body)

    @classmethod
    def empty(cls) -> "Fault":
        return cls("empty")

    @classmethod
    def latency(cls, seconds: float) -> "Fault":
        return cls("latency", seconds=seconds)


def _header_value(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass
class RecordedRequest:
    index: int
    method: str
    path: str
    provider: str
    api_style: str
    model: str
    prompt: str
    system: str | None
    temperature: float | None
    max_tokens: int | None
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    connection_id: int = 0
    # Where the Anthropic cache_control breakpoint ends the cacheable prefix of cache_text.
    cache_breakpoint: int | None = None
    # What the reply reported, once answered (time.monotonic() clock).
    arrived_at: float = 0.0
    answered_at: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def cache_text(self) -> str:
        """The prompt as a provider's prefix cache sees it: system text, then the user text."""
        return f"{self.system or ''}\n\n{self.prompt}"

    @property
    def tool_outputs(self) -> list[str]:
        """Tool results sent back since the last user message, oldest first (any of the APIs).

        An agent's loop asks again once its tools answered: a responder tells the first request
        of a user turn (empty list) from the follow-up without parsing each API's body itself.
        """
        outputs: list[str] = []
        for item in _conversation_items(self.body):
            if item[0] == "user":
                outputs.clear()
            else:
                outputs.append(item[1])
        return outputs


def _conversation_items(body: dict[str, Any]) -> list[tuple[str, str]]:
    """("user", text) and ("tool", result) entries of a request body, in order."""
    items: list[tuple[str, str]] = []
    for message in body.get("messages") or []:  # Chat Completions, Anthropic
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if message.get("role") == "tool":
            items.append(("tool", _plain_text(content)))
        elif message.get("role") == "user":
            results = [block for block in content if isinstance(block, dict)
                       and block.get("type") == "tool_result"] if isinstance(content, list) else []
            items.extend(("tool", _plain_text(block.get("content"))) for block in results)
            if not results:
                items.append(("user", _plain_text(content)))
    raw_input = body.get("input")
    for item in raw_input if isinstance(raw_input, list) else []:  # Responses
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            items.append(("tool", _plain_text(item.get("output"))))
        elif isinstance(item, dict) and item.get("role") == "user":
            items.append(("user", _plain_text(item.get("content"))))
    for content in body.get("contents") or []:  # Gemini
        parts = content.get("parts") or [] if isinstance(content, dict) else []
        responses = [p["functionResponse"] for p in parts
                     if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        items.extend(("tool", _plain_text(r.get("response"))) for r in responses)
        if not responses and isinstance(content, dict) and content.get("role", "user") == "user":
            items.append(("user", _plain_text(parts)))
    return items


def _plain_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_plain_text(v.get("text") if isinstance(v, dict) else v) for v in value)
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True)


Outcome = Union[str, Reply, Fault]
Responder = Callable[[RecordedRequest], Outcome]
Matcher = Union[str, "re.Pattern[str]", Callable[[RecordedRequest], bool]]


def _as_predicate(match: Matcher) -> Callable[[RecordedRequest], bool]:
    if isinstance(match, str):
        return lambda request: match in request.prompt
    if isinstance(match, re.Pattern):
        return lambda request: match.search(request.prompt) is not None
    if callable(match):
        return match
    raise TypeError(f"a rule matches a substring, a compiled regex or a predicate, got {match!r}")


class Script:
    """Decides each request's outcome: queued faults first, then rules in order, then default."""

    def __init__(self, default: Outcome | Responder = "Yes") -> None:
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._rules: list[tuple[Callable[[RecordedRequest], bool], Outcome | Responder]] = []
        self._default: Outcome | Responder = default

    def set_default(self, outcome: Outcome | Responder) -> None:
        with self._lock:
            self._default = outcome

    def add_rule(self, match: Matcher, outcome: Outcome | Responder) -> None:
        predicate = _as_predicate(match)
        with self._lock:
            self._rules.append((predicate, outcome))

    def enqueue_faults(self, *faults: Fault) -> None:
        for fault in faults:
            if not isinstance(fault, Fault):
                raise TypeError(f"enqueue_faults takes Fault objects, got {fault!r}")
        with self._lock:
            self._faults.extend(faults)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._rules.clear()

    def decide(self, request: RecordedRequest) -> Reply | Fault:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            rules = list(self._rules)
            default = self._default
        chosen: Outcome | Responder = default
        for predicate, outcome in rules:
            if predicate(request):
                chosen = outcome
                break
        if callable(chosen) and not isinstance(chosen, (Reply, Fault)):
            chosen = chosen(request)
        if isinstance(chosen, str):
            return Reply(text=chosen)
        if isinstance(chosen, (Reply, Fault)):
            return chosen
        raise TypeError(f"a scripted judge outcome must be str, Reply or Fault, got {chosen!r}")


def token_counts(reply: Reply, request: RecordedRequest) -> tuple[int, int]:
    """Scripted counts, else referee's estimate (about 4 characters a token)."""
    estimated = estimate_tokens(request.prompt) + estimate_tokens(request.system or "")
    input_tokens = reply.input_tokens if reply.input_tokens is not None else max(estimated, 1)
    output_tokens = (reply.output_tokens if reply.output_tokens is not None
                     else max(estimate_tokens(reply.text), 1))
    return input_tokens, output_tokens


class ScriptedJudge:
    """What both scripted judges share: the script, the record of requests and the in-flight
    count. ``ScriptedJudgeServer`` answers over HTTP, ``FakeJudge`` in-process."""

    def __init__(self, reply: Outcome | Responder = "Yes") -> None:
        self.script = Script(reply)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0

    # scripting
    def set_reply(self, reply: Outcome | Responder) -> None:
        """The default outcome: a text, a Reply, a Fault or a callback(RecordedRequest)."""
        self.script.set_default(reply)

    def add_rule(self, match: Matcher, outcome: Outcome | Responder) -> None:
        """When the prompt contains ``match`` (str/regex) or ``match(request)`` is true."""
        self.script.add_rule(match, outcome)

    def enqueue_faults(self, *faults: Fault) -> None:
        """Faults answered, in order, by the next requests before any scripted reply."""
        self.script.enqueue_faults(*faults)

    # the record
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        with self._lock:
            return self._max_in_flight

    def reset_record(self) -> None:
        with self._lock:
            self._requests.clear()
            self._max_in_flight = self._in_flight

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _append_request(self, **fields: Any) -> RecordedRequest:
        """Record one request, numbered in arrival order."""
        with self._lock:
            request = RecordedRequest(index=len(self._requests), **fields)
            self._requests.append(request)
        return request
