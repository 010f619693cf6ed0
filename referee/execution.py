"""What the model or agent under test actually did."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import (
    AliasChoices,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from referee._strict import StrictModel, checked_again, validated, with_positions
from referee.content._load import holds_media, load_part, load_parts
from referee.content._parts import ContentError, ContentPart, DocumentPart, ImagePart, TextPart
from referee.messages import ToolCall, content_text
from referee.redact import RedactedText
from referee.usage import TokenUsage

# What a recording could not carry, kept in ``ExecutionResult.metadata`` as {field: why}: a trace
# format without node visits, an instrumentation that left message content out. Fields:
# "actual_response", "tool_calls", "tool_args", "tool_results", "node_visits". A criterion whose
# ``reads`` names one of them is skipped with the reason instead of scoring what is not there.
UNRECORDED_KEY = "unrecorded"


def add_visit(visits: list[str], node: str) -> None:
    """Record that ``node`` held control: a stretch of messages or events by the node already
    in control is one visit, not one per message."""
    if not visits or visits[-1] != node:
        visits.append(node)

# The keys a model's dict may carry its response under, preferred first.
RESPONSE_KEYS = ("actual_response", "output", "response", "content", "text")


class StepType(str, Enum):
    """Kinds of step in 10xgraph's recorded trajectory."""

    NODE = "node"
    TOOL = "tool"
    MESSAGE = "message"
    CONDITIONAL = "conditional"


class TrajectoryStep(StrictModel):
    """One step of a run as 10xgraph records it. An ExecutionResult given a ``trajectory``
    takes its node visits and tool calls from the NODE and TOOL steps (unless given too)."""

    step_type: StepType
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    timestamp: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def node(cls, name: str, timestamp: float | None = None, **metadata: Any) -> TrajectoryStep:
        return cls(step_type=StepType.NODE, name=name, timestamp=timestamp, metadata=metadata)

    @classmethod
    def tool(cls, name: str, args: dict[str, Any] | None = None, timestamp: float | None = None,
             **metadata: Any) -> TrajectoryStep:
        return cls(step_type=StepType.TOOL, name=name, args=args or {}, timestamp=timestamp,
                   metadata=metadata)


class AgentStep(StrictModel):
    """One step of an agent's run as multivon-eval records it: a thought, the tools it called,
    and what it said. An ExecutionResult given an ``agent_trace`` of steps takes its tool calls
    (every step's, in order) and its response (the last step's output) from them, unless given
    too, and keeps the steps (``ExecutionResult.agent_trace``)."""

    thought: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    output: str = ""

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's AgentStep is a dataclass: AgentStep("thought", [ToolCall(...)], "output").
        super().__init__(**with_positions("AgentStep", ("thought", "tool_calls", "output"),
                                          positional, fields))


class TurnResult(StrictModel):
    """One turn of a multi-turn run."""

    # What the agent was sent: the turn's parts when it held an image or a PDF (so an agent
    # that rebuilds the conversation from its history sees the earlier turns' images), else
    # its text, stored as before.
    user_content: str | list[ContentPart] = ""
    response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)

    @field_validator("user_content", mode="before")
    @classmethod
    def _text_unless_media(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if holds_media(value):
            return load_parts(value, field="user_content")
        return content_text(value)

    @property
    def user_text(self) -> str:
        """The text of what the user said (an image or a PDF has none)."""
        return content_text(self.user_content)

    @property
    def user_parts(self) -> list[TextPart | ImagePart | DocumentPart] | None:
        """What the user sent as parts when it held an image or a PDF, else None."""
        return None if isinstance(self.user_content, str) else list(self.user_content)


class NodeDetail(StrictModel):
    """What one node of an agent sent to its model and got back (10xgraph's per-node record).
    referee scores none of it; a 10xgraph ``EvalCaseResult(node_details=[...])`` keeps these
    in the case's ``metadata["node_details"]``, which the reports show."""

    node_name: str = ""
    input_messages: list[dict[str, Any]] = Field(default_factory=list)
    response_text: str = ""
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    timestamp: float = 0.0


# 10xgraph's ExecutionResult fields that referee has no field for; they are kept in metadata.
_KEPT_IN_METADATA = ("messages", "trajectory", "node_responses")


def as_steps(agent_trace: Any) -> list[AgentStep]:
    """multivon's agent steps, given as AgentStep objects or their dicts."""
    return [step if isinstance(step, AgentStep) else AgentStep.model_validate(step)
            for step in agent_trace]


def store_trace(data: dict[str, Any], steps: list[AgentStep]) -> dict[str, Any]:
    """Keep ``steps`` in the input's ``metadata["agent_trace"]`` (a run's or a case's)."""
    stored = [step.model_dump(mode="json") for step in steps]
    data["metadata"] = {**(data.get("metadata") or {}), "agent_trace": stored}
    return data


def stored_trace(metadata: dict[str, Any]) -> list[AgentStep] | None:
    """The steps ``store_trace`` kept, else None."""
    stored = metadata.get("agent_trace")
    return None if stored is None else [AgentStep.model_validate(step) for step in stored]


def _from_agent_trace(data: dict[str, Any], agent_trace: Any) -> dict[str, Any]:
    steps = as_steps(agent_trace)
    if "tool_calls" not in data:
        data["tool_calls"] = [call for step in steps for call in step.tool_calls]
    if not data.get("actual_response"):
        data["actual_response"] = next((s.output for s in reversed(steps) if s.output), "")
    return store_trace(data, steps)


class ExecutionResult(StrictModel):
    """What the model or agent did. 10xgraph's ``duration_seconds`` is read as ``latency_s``;
    its ``messages``, ``trajectory`` and ``node_responses`` are kept in ``metadata``."""

    _input_aliases = frozenset(_KEPT_IN_METADATA) | {"agent_trace"}

    actual_response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    turns: list[TurnResult] = Field(default_factory=list)
    latency_s: float | None = Field(default=None,
                                    validation_alias=AliasChoices("latency_s", "duration_seconds"))
    token_usage: TokenUsage | None = None
    error: RedactedText | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Issue 34: the images and PDFs the model or agent produced (a chart, a filled form), in
    # any shape referee.content reads; stored once under the run's blobs/, shown in its
    # reports, seen by its judges. Left out of dumps when empty.
    outputs: list[ImagePart | DocumentPart] = Field(default_factory=list)

    @field_validator("outputs", mode="before")
    @classmethod
    def _read_outputs(cls, value: Any) -> Any:
        items = value if isinstance(value, (list, tuple)) else [value]
        parts = []
        for index, item in enumerate(items):
            if isinstance(item, str):  # a data: URL, a URL or a path, never text
                item = ({"path": item} if "://" not in item and not item.startswith("data:")
                        else {"type": "document" if "/pdf" in item[:40] else "image",
                              "url": item})
            part = load_part(item, field=f"outputs[{index}]")
            if not isinstance(part, (ImagePart, DocumentPart)):
                raise ContentError("text goes in actual_response", field=f"outputs[{index}]",
                                   expected="an image or a PDF")
            parts.append(part)
        return parts

    @model_serializer(mode="wrap")
    def _without_empty_outputs(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("outputs", True):
            data.pop("outputs")
        return data

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        steps = [s if isinstance(s, TrajectoryStep) else TrajectoryStep.model_validate(s)
                 for s in data.get("trajectory") or []]
        if steps and "tool_calls" not in data:
            data["tool_calls"] = [ToolCall(name=s.name, args=s.args,
                                           call_id=s.metadata.get("tool_call_id"))
                                  for s in steps if s.step_type == StepType.TOOL]
        if steps and "node_visits" not in data:
            data["node_visits"] = [s.name for s in steps if s.step_type == StepType.NODE]
        agent_trace = data.pop("agent_trace", None)
        if agent_trace is not None:  # [] records an observed run that took no steps
            data = _from_agent_trace(data, agent_trace)
        kept = {key: data.pop(key) for key in _KEPT_IN_METADATA if key in data}
        if kept:
            data["metadata"] = {**(data.get("metadata") or {}), **kept}
        return data

    @property
    def duration_seconds(self) -> float:
        return self.latency_s or 0.0

    @property
    def agent_trace(self) -> list[AgentStep]:
        """multivon's agent steps this result was built from (empty when none were given)."""
        return stored_trace(self.metadata) or []

    def get_tool_names(self) -> list[str]:
        return [call.name for call in self.tool_calls]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def coerce(cls, value: Any) -> ExecutionResult:
        """Accept what a model function may return: a str, a dict or an ExecutionResult."""
        if isinstance(value, ExecutionResult):
            # Checked again: fields assigned after it was built were never validated, and a
            # wrong type there would only fail when the stored run is read back.
            return checked_again(value, f"model returned an {type(value).__name__}")
        if isinstance(value, str):
            return cls(actual_response=value)
        if isinstance(value, dict):
            data = dict(value)
            if "actual_response" not in data:
                key = next((k for k in RESPONSE_KEYS[1:] if k in data), None)
                if key is None:
                    # Scoring an empty response instead would call a broken model merely wrong.
                    found = ", ".join(repr(k) for k in list(data)[:10]) or "none"
                    raise ValueError(
                        f"model returned a dict with no response key (its keys: {found}); "
                        f"expected one of {', '.join(RESPONSE_KEYS)}")
                data["actual_response"] = data.pop(key)
            return validated(cls, data, "model returned a dict")
        kind = type(value)
        # Another package's ExecutionResult (a peer's, one import left unchanged) is named by
        # its module: "returned ExecutionResult; expected ... ExecutionResult" says nothing.
        shown = (f"{kind.__module__}.{kind.__qualname__}" if kind.__name__ == cls.__name__
                 else kind.__name__)
        raise TypeError(f"model returned {shown}; expected str, dict or ExecutionResult")
