"""What a scripted judge answers: replies, faults, rules and the record of each request.

Shared by the loopback HTTP server and the in-process fake so both are scripted the same way.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from referee.judge.prompt_caching import estimate_tokens


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
    # True: the provider says it cut the reply off at max_tokens (finish_reason "length",
    # stop_reason "max_tokens", finishReason MAX_TOKENS, Responses status "incomplete").
    cut_off: bool = False
    # Chat Completions only: the message's content as this JSON text instead of ``text``
    # ("null", an object, a number, a list of parts), as OpenAI-compatible servers may send.
    content_json: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()

    @classmethod
    def calling(cls, *calls: ScriptedToolCall | tuple[str, dict[str, Any]], text: str = "",
                **fields: Any) -> Reply:
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
    retry_after_ms: str | None = None  # OpenAI's ``retry-after-ms`` header

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = None, *,
                   retry_after_ms: float | str | None = None) -> Fault:
        return cls("status", status=429,
                   retry_after=None if retry_after is None else _header_value(retry_after),
                   retry_after_ms=None if retry_after_ms is None
                   else _header_value(retry_after_ms))

    @classmethod
    def quota_exhausted(cls) -> Fault:
        """OpenAI's 429 for an account out of credit (``insufficient_quota``): not a pace."""
        return cls("status", status=429, body=(
            '{"error": {"message": "You exceeded your current quota, please check your plan '
            'and billing details.", "type": "insufficient_quota", "param": null, '
            '"code": "insufficient_quota"}}'))

    @classmethod
    def http(cls, status: int, retry_after: float | str | None = None,
             body: str | None = None) -> Fault:
        if not 400 <= status <= 599:
            raise ValueError(f"an HTTP fault needs a 4xx/5xx status, got {status}")
        return cls("status", status=status,
                   retry_after=None if retry_after is None else _header_value(retry_after),
                   body=body)

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls.http(status)

    @classmethod
    def reset(cls) -> Fault:
        return cls("reset")

    @classmethod
    def hang(cls, seconds: float | None = None) -> Fault:
        return cls("hang", seconds=seconds)

    @classmethod
    def truncated(cls) -> Fault:
        return cls("truncated")

    @classmethod
    def non_json(cls, body: str = "<html><body>502 Bad Gateway</body></html>") -> Fault:
        return cls("non_json", body=body)

    @classmethod
    def empty(cls) -> Fault:
        return cls("empty")

    @classmethod
    def latency(cls, seconds: float) -> Fault:
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
    # time.monotonic() clock: when the request arrived and, once answered, when its reply went.
    arrived_at: float = field(default_factory=time.monotonic)
    answered_at: float | None = None
    rate_limited: bool = False  # answered 429 by the enforced rate limit
    # What the reply reported, once answered.
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


    @property
    def reply_schema(self) -> dict[str, Any] | None:
        """The JSON schema the request asks its reply to follow (structured output), in any of
        the APIs' shapes; None for a free-text or plain JSON-mode request."""
        return requested_schema(self.body)


def _structured_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenAI ``json_schema`` format object of a Chat Completions or Responses body."""
    chat = body.get("response_format")
    if isinstance(chat, dict) and chat.get("type") == "json_schema":
        inner = chat.get("json_schema")
        return inner if isinstance(inner, dict) else {}
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return form
    return None


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """See ``RecordedRequest.reply_schema``."""
    form = _structured_format(body)
    if form is not None:
        schema = form.get("schema")
        return schema if isinstance(schema, dict) else None
    choice = body.get("tool_choice")  # Anthropic: one tool the model must call
    if isinstance(choice, dict) and choice.get("type") == "tool":
        for tool in body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") == choice.get("name"):
                schema = tool.get("input_schema")
                return schema if isinstance(schema, dict) else None
    generation = body.get("generationConfig", body.get("generation_config"))
    if isinstance(generation, dict):
        for key in ("responseJsonSchema", "response_json_schema", "responseSchema",
                    "response_schema"):
            if isinstance(generation.get(key), dict):
                return generation[key]
    return None


_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def schema_problem(body: dict[str, Any]) -> str | None:
    """Why OpenAI would refuse the request's ``json_schema`` response format (400), or None.

    The checks OpenAI makes before answering: a name of letters, digits, ``_`` and ``-``; a
    schema object; in strict mode, every object closed (``additionalProperties: false``) with
    every property required.
    """
    form = _structured_format(body)
    if form is None:
        return None
    name = form.get("name")
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        return f"Invalid 'json_schema.name': expected a string matching {_SCHEMA_NAME.pattern}"
    schema = form.get("schema")
    if not isinstance(schema, dict):
        return "Invalid 'json_schema.schema': expected an object"
    if form.get("strict"):
        return _strict_problem(schema, "schema")
    return None


def _strict_problem(node: Any, where: str) -> str | None:
    if not isinstance(node, dict):
        return None
    if node.get("type") == "object":
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False:
            return (f"Invalid schema for response_format: In context={where}, "
                    "'additionalProperties' is required to be supplied and to be false")
        if sorted(node.get("required") or []) != sorted(properties):
            return (f"Invalid schema for response_format: In context={where}, 'required' is "
                    "required to be supplied and to be an array including every key in "
                    "properties")
        for key, child in properties.items():
            problem = _strict_problem(child, f"{where}.properties.{key}")
            if problem:
                return problem
    if node.get("type") == "array":
        return _strict_problem(node.get("items"), f"{where}.items")
    return None


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



@dataclass(frozen=True)
class RateLimitState:
    """The enforced limits as a provider reports them, and whether this request got through."""

    admitted: bool
    retry_after_s: float
    rpm: float | None
    remaining_requests: float
    reset_requests_s: float
    tpm: float | None
    remaining_tokens: float
    reset_tokens_s: float


class RateLimit:
    """Token buckets on requests and tokens per minute, as providers enforce them.

    Each bucket holds ``burst_s`` seconds' worth of its limit and refills continuously. A request
    is admitted when one request and its prompt tokens are available; its reply's tokens are
    charged when it is answered (the bucket may go below zero, delaying the next ones).
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None,
                 burst_s: float = 1.0) -> None:
        if rpm is None and tpm is None:
            raise ValueError("a rate limit needs rpm, tpm or both")
        for name, value in (("rpm", rpm), ("tpm", tpm), ("burst_s", burst_s)):
            if value is not None and not 0 < value < math.inf:
                raise ValueError(f"{name} must be positive, got {value}")
        self.rpm, self.tpm = rpm, tpm
        self._lock = threading.Lock()
        now = time.monotonic()
        self._requests = _ServerBucket(rpm, burst_s, now) if rpm else None
        self._tokens = _ServerBucket(tpm, burst_s, now) if tpm else None

    def admit(self, prompt_tokens: int) -> RateLimitState:
        with self._lock:
            now = time.monotonic()
            buckets = [(self._requests, 1.0), (self._tokens, float(prompt_tokens))]
            waits = [b.wait_for(cost, now) for b, cost in buckets if b is not None]
            admitted = max(waits) <= 0
            if admitted:
                for bucket, cost in buckets:
                    if bucket is not None:
                        bucket.take(cost, now)
            return self._state(admitted, max(max(waits), 0.0), now)

    def charge(self, tokens: int) -> None:
        if self._tokens is not None:
            with self._lock:
                self._tokens.take(float(tokens), time.monotonic())

    def state(self) -> RateLimitState:
        with self._lock:
            return self._state(True, 0.0, time.monotonic())

    def _state(self, admitted: bool, retry_after_s: float, now: float) -> RateLimitState:
        requests, tokens = self._requests, self._tokens
        return RateLimitState(
            admitted=admitted, retry_after_s=retry_after_s, rpm=self.rpm,
            remaining_requests=requests.level(now) if requests else 0.0,
            reset_requests_s=requests.time_to_full(now) if requests else 0.0,
            tpm=self.tpm, remaining_tokens=tokens.level(now) if tokens else 0.0,
            reset_tokens_s=tokens.time_to_full(now) if tokens else 0.0)


class _ServerBucket:
    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(self.rate * burst_s, 1.0)
        self._level = self.capacity
        self._at = now

    def level(self, now: float) -> float:
        return min(self.capacity, self._level + (now - self._at) * self.rate)

    def wait_for(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` is available (a cost above the size needs a full bucket)."""
        return (min(cost, self.capacity) - self.level(now)) / self.rate

    def take(self, cost: float, now: float) -> None:
        self._level, self._at = self.level(now) - cost, now

    def time_to_full(self, now: float) -> float:
        return max(self.capacity - self.level(now), 0.0) / self.rate


Outcome = str | Reply | Fault
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
    schema = request.reply_schema
    if schema is not None:  # the provider bills a reply schema as input
        estimated += estimate_tokens(json.dumps(schema, sort_keys=True))
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
        self._rate_limit: RateLimit | None = None

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

    def set_rate_limit(self, rpm: float | None = None, tpm: float | None = None,
                       burst_s: float = 1.0) -> None:
        """Enforce requests/tokens per minute as providers do: over the limit, answer 429 with
        Retry-After and rate-limit headers (which every reply carries). No arguments: off."""
        limit = RateLimit(rpm, tpm, burst_s) if (rpm or tpm) else None
        with self._lock:
            self._rate_limit = limit

    @property
    def rate_limit(self) -> RateLimit | None:
        with self._lock:
            return self._rate_limit

    # the record
    @property
    def rate_limited_count(self) -> int:
        """Requests answered 429 by the enforced rate limit."""
        with self._lock:
            return sum(r.rate_limited for r in self._requests)

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

    def _admit(self, request: RecordedRequest) -> RateLimitState | None:
        """Check the enforced rate limit (None when there is none) and mark a refused request."""
        limit = self.rate_limit
        if limit is None:
            return None
        state = limit.admit(token_counts(Reply(), request)[0])
        if not state.admitted:
            with self._lock:
                request.rate_limited = True
        return state

    def _charge_reply(self, request: RecordedRequest, reply: Reply) -> None:
        limit = self.rate_limit
        if limit is not None:
            limit.charge(token_counts(reply, request)[1])

    def _append_request(self, **fields: Any) -> RecordedRequest:
        """Record one request, numbered in arrival order."""
        with self._lock:
            request = RecordedRequest(index=len(self._requests), **fields)
            self._requests.append(request)
        return request
