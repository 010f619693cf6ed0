"""Recorded traces from the real instrumentations score exactly like the live run.

Each test runs a real framework (the Agents SDK, LangGraph) against the scripted server under a
real instrumentation, exports the spans with the OTel SDK's OTLP/JSON file exporter, and scores
the file with ``score_traces``: tool calls, arguments, results, call ids, node visits, turns,
usage and verdicts must equal the live adapter's on the same run.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")

from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from referee import AgentEvaluator, EvalCase, Invocation, ToolCall  # noqa: E402
from referee.adapters import score_traces_async  # noqa: E402
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType  # noqa: E402
from referee.execution import ExecutionResult  # noqa: E402
from referee.report.model import CaseStatus, EvalReport  # noqa: E402
from referee.testing import DUMMY_API_KEY, RecordedRequest, Reply, ScriptedJudgeServer  # noqa: E402

CONFIG = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
    node_order=CriterionConfig.node_order(match_type=MatchType.EXACT),
    rouge_match=CriterionConfig(threshold=0.8)))


@contextmanager
def span_file(path: Path) -> Iterator[TracerProvider]:
    """A tracer provider that writes every ended span to ``path`` as OTLP/JSON lines."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    try:
        yield provider
    finally:
        provider.shutdown()


@contextmanager
def instrumented(instrumentor: Any, provider: TracerProvider) -> Iterator[None]:
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def _calls(calls: list[ToolCall]) -> list[tuple[Any, ...]]:
    """Each call and, for an agent used as a tool, the inner run nested under it."""
    return [(c.name, c.args, c.result, c.call_id, c.nested_node_visits, _calls(c.nested_calls))
            for c in calls]


def run_fields(execution: ExecutionResult) -> dict[str, Any]:
    """What the criteria read, field by field."""
    usage = execution.token_usage
    return {
        "response": execution.actual_response,
        "tool_calls": _calls(execution.tool_calls),
        "node_visits": execution.node_visits,
        "turns": [(t.user_content, t.response, _calls(t.tool_calls), t.node_visits)
                  for t in execution.turns],
        "usage": (usage.input_tokens, usage.output_tokens, usage.requests,
                  usage.cached_input_tokens) if usage else None,
    }


def verdicts(report: EvalReport) -> dict[str, Any]:
    return {case.eval_id: (case.status, [(r.criterion, round(r.score, 6), r.passed, r.skipped)
                                         for r in case.criterion_results])
            for case in report.cases}


def assert_same_run(live: EvalReport, recorded: EvalReport) -> None:
    assert verdicts(recorded) == verdicts(live)
    for live_case, recorded_case in zip(live.cases, recorded.cases):
        assert run_fields(recorded_case.execution) == run_fields(live_case.execution)
        assert not recorded_case.execution.metadata.get("trace_notes")


def session_of(case: EvalCase) -> Any:
    from openinference.instrumentation import using_session

    return using_session(case.eval_id)


async def live_run(agent: Any, cases: list[EvalCase], case_context: Any = None) -> EvalReport:
    """The agent's live run of ``cases``, one case at a time, scored with CONFIG."""
    return await AgentEvaluator(agent, config=CONFIG, save=False,
                                case_context=case_context or session_of).evaluate(
        cases, verbose=False, parallel=False)


async def recorded_run(spans: Path, cases: list[EvalCase], **options: Any) -> EvalReport:
    """The same cases scored from the recorded spans, nothing re-run."""
    return await score_traces_async(spans, cases=cases, config=CONFIG, verbose=False,
                                    save=False, **options)


# OpenAI Agents SDK + openinference-instrumentation-openai-agents --------------------------------

ORDERS = {"1001": "shipped", "1002": "being packed"}


def order_desk(request: RecordedRequest) -> Reply | str:
    """Triage hands off to orders; orders looks the order up once (a dict), then answers."""
    if "You route" in (request.system or ""):
        return Reply.calling(("transfer_to_orders", {}))
    order_id = re.findall(r"\d{4}", request.prompt)[-1]
    looked_up = [out for out in request.tool_outputs if order_id in out and "status" in out]
    if looked_up:
        return f"Order {order_id} is {ORDERS[order_id]}."
    return Reply.calling(("lookup_order", {"order_id": order_id}))


def order_cases() -> list[EvalCase]:
    def turn(order_id: str, nodes: list[str]) -> Invocation:
        return Invocation(user_content=f"Where is order {order_id}?",
                          expected_final_response=f"Order {order_id} is {ORDERS[order_id]}.",
                          expected_tool_trajectory=[ToolCall(name="lookup_order",
                                                             args={"order_id": order_id})],
                          expected_node_order=nodes)

    return [EvalCase.multi_turn([turn("1001", ["triage", "orders"]),
                                 turn("1002", ["triage", "orders"])], eval_id="two-orders"),
            # Scored FAILED both ways: the node order expects no triage.
            EvalCase.multi_turn([turn("1002", ["orders"])], eval_id="wrong-nodes")]


async def test_openai_agents_trace_scores_like_the_live_run(tmp_path):
    agents = pytest.importorskip("agents")
    instrumentor_module = pytest.importorskip("openinference.instrumentation.openai_agents")
    from openai import AsyncOpenAI

    from referee.adapters import OpenAIAgentsAgent

    @agents.function_tool
    def lookup_order(order_id: str) -> dict:
        """The status of an order."""
        return {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}

    spans = tmp_path / "spans.jsonl"
    with ScriptedJudgeServer(order_desk) as server, span_file(spans) as provider, \
            instrumented(instrumentor_module.OpenAIAgentsInstrumentor(), provider):
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY))
        orders = agents.Agent(name="orders", instructions="You answer order questions.",
                              tools=[lookup_order], model=model)
        triage = agents.Agent(name="triage", instructions="You route customers.",
                              handoffs=[orders], model=model)
        live = await live_run(OpenAIAgentsAgent(triage), order_cases())

    recorded = await recorded_run(spans, order_cases())

    assert [c.status for c in live.cases] == [CaseStatus.PASSED, CaseStatus.FAILED]
    assert live.cases[0].execution.node_visits == ["triage", "orders"] * 2
    assert live.cases[0].execution.tool_calls[0].result == {"order_id": "1001",
                                                            "status": "shipped"}
    assert_same_run(live, recorded)


def agent_tool_desks() -> list[Any]:
    from agent_tool_desk import (
        SUPPORT_NESTING,
        build_orchestrator,
        build_support,
        delegation_case,
        desk,
        expected_nesting,
        support_case,
        support_desk,
    )

    # Parallel agent tools with an agent tool inside; an agent tool whose agent hands off.
    return [pytest.param(desk, build_orchestrator, delegation_case, expected_nesting(),
                         id="parallel-and-deep"),
            pytest.param(support_desk, build_support, support_case, SUPPORT_NESTING,
                         id="handoff-inside")]


@pytest.mark.parametrize("script,build,case_of,nested", agent_tool_desks())
async def test_openai_agents_trace_nests_agents_used_as_tools_like_the_live_run(
        tmp_path, script, build, case_of, nested):
    agents = pytest.importorskip("agents")
    instrumentor_module = pytest.importorskip("openinference.instrumentation.openai_agents")
    from agent_tool_desk import nesting
    from openai import AsyncOpenAI

    from referee.adapters import OpenAIAgentsAgent

    spans = tmp_path / "spans.jsonl"
    with ScriptedJudgeServer(script) as server, span_file(spans) as provider, \
            instrumented(instrumentor_module.OpenAIAgentsInstrumentor(), provider):
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY))
        live = await AgentEvaluator(OpenAIAgentsAgent(build(agents, model)), config=CONFIG,
                                    save=False, case_context=session_of).evaluate(
            [case_of()], verbose=False)

    recorded = await recorded_run(spans, [case_of()])

    assert live.cases[0].status == CaseStatus.PASSED, live.cases[0].criterion_results
    assert nesting(live.cases[0].execution.tool_calls) == nested
    assert_same_run(live, recorded)


# LangGraph + openinference-instrumentation-langchain ---------------------------------------------

def langgraph_example() -> Any:
    """examples/langgraph: a stock desk graph (a one-argument tool) and its scripted model."""
    pytest.importorskip("langgraph")
    pytest.importorskip("langchain_openai")
    from test_examples import EXAMPLES, load

    return load(EXAMPLES / "langgraph" / "eval_langgraph.py")


STOCK = {"keyboard": 4, "mouse": 0}  # what the example's check_stock tool answers


def stock_cases() -> list[EvalCase]:
    nodes = ["assistant", "tools", "assistant"]

    def turn(question: str, item: str) -> Invocation:
        return Invocation(user_content=question,
                          expected_final_response=f"We have {STOCK[item]} of the {item} in stock.",
                          expected_tool_trajectory=[ToolCall(name="check_stock",
                                                             args={"item": item})],
                          expected_node_order=nodes)

    return [EvalCase.multi_turn([turn("Is the keyboard in stock?", "keyboard"),
                                 turn("And the mouse?", "mouse")], eval_id="stock-questions"),
            EvalCase.multi_turn([turn("Is the mouse in stock?", "mouse")], eval_id="one-mouse")]


async def test_langgraph_trace_scores_like_the_live_run(tmp_path):
    example = langgraph_example()
    instrumentor_module = pytest.importorskip("openinference.instrumentation.langchain")
    from referee.adapters import LangGraphAgent

    spans = tmp_path / "spans.jsonl"
    with ScriptedJudgeServer(example.scripted_model) as server, span_file(spans) as provider, \
            instrumented(instrumentor_module.LangChainInstrumentor(), provider):
        live = await live_run(LangGraphAgent(example.build_graph(server.base_url())),
                              stock_cases())

    recorded = await recorded_run(spans, stock_cases())

    assert [c.status for c in live.cases] == [CaseStatus.PASSED, CaseStatus.PASSED]
    first = live.cases[0].execution
    assert _calls(first.tool_calls)[0][:3] == ("check_stock", {"item": "keyboard"}, "4")
    assert [t.user_content for t in recorded.cases[0].execution.turns] == [
        "Is the keyboard in stock?", "And the mouse?"]
    assert_same_run(live, recorded)


# LangGraph's prebuilt ReAct agent + openinference-instrumentation-langchain ------------------------

def refund_desk(request: RecordedRequest) -> Reply | str:
    """Two tool rounds per question: look the order up, refund its total, then answer."""
    order_id = re.findall(r"\d{4}", request.prompt)[-1]
    if not request.tool_outputs:
        return Reply.calling(("lookup_order", {"order_id": order_id}))
    if "total" in request.tool_outputs[-1]:
        return Reply.calling(("refund", {"order_id": order_id, "amount": "25.00"}))
    return f"Refunded 25.00 for order {order_id}."


def refund_cases() -> list[EvalCase]:
    def turn(question: str, order_id: str) -> Invocation:
        return Invocation(user_content=question,
                          expected_final_response=f"Refunded 25.00 for order {order_id}.",
                          expected_tool_trajectory=[
                              ToolCall(name="lookup_order", args={"order_id": order_id}),
                              ToolCall(name="refund", args={"order_id": order_id,
                                                            "amount": "25.00"})],
                          expected_node_order=["agent", "tools", "agent", "tools", "agent"])

    return [EvalCase.multi_turn([turn("Please refund order 1001.", "1001")], eval_id="one-refund"),
            EvalCase.multi_turn([turn("Please refund order 1001.", "1001"),
                                 turn("And order 1002 too.", "1002")], eval_id="two-refunds")]


class SessionPerCase:
    """One LangGraphAgent per case whose runs name the case as their session: LangChain's
    instrumentation takes the session from the run's ``metadata`` (``session_id`` before
    ``thread_id``), as an application tags its own conversations."""

    def __init__(self, graph: Any) -> None:
        self.graph, self.agents = graph, {}
        self.__name__ = "react agent"

    async def __call__(self, message: str, history: list[Any]) -> ExecutionResult:
        from referee.adapters import LangGraphAgent

        case_id = CASE_ID.get()
        agent = self.agents.setdefault(case_id, LangGraphAgent(
            self.graph, config={"metadata": {"session_id": case_id}}))
        return await agent(message, history)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # create_react_agent moved in 1.0
@pytest.mark.parametrize("same_thread", [True, False], ids=["checkpointed-thread",
                                                            "history-sent-again"])
async def test_prebuilt_react_agent_trace_is_one_turn_per_user_message(tmp_path, same_thread):
    pytest.importorskip("langgraph.prebuilt")
    pytest.importorskip("langchain_openai")
    instrumentor_module = pytest.importorskip("openinference.instrumentation.langchain")
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.prebuilt import create_react_agent

    @tool
    def lookup_order(order_id: str) -> dict:
        """An order and its total."""
        return {"order_id": order_id, "total": "25.00"}

    @tool
    def refund(order_id: str, amount: str) -> str:
        """Refund an order."""
        return f"refunded {amount} on {order_id}"

    spans = tmp_path / "spans.jsonl"
    with ScriptedJudgeServer(refund_desk) as server, span_file(spans) as provider, \
            instrumented(instrumentor_module.LangChainInstrumentor(), provider):
        model = ChatOpenAI(model="scripted-model", base_url=server.base_url(),
                           api_key=DUMMY_API_KEY, max_retries=0)
        graph = create_react_agent(model, [lookup_order, refund],
                                   checkpointer=MemorySaver() if same_thread else None)
        live = await live_run(SessionPerCase(graph), refund_cases(), case_id_of)

    recorded = await recorded_run(spans, refund_cases())

    assert [c.status for c in live.cases] == [CaseStatus.PASSED, CaseStatus.PASSED]
    assert live.cases[0].execution.node_visits == ["agent", "tools", "agent", "tools", "agent"]
    assert [[(t.user_content, t.response) for t in c.execution.turns]
            for c in recorded.cases] == [[], [
                ("Please refund order 1001.", "Refunded 25.00 for order 1001."),
                ("And order 1002 too.", "Refunded 25.00 for order 1002.")]]
    assert_same_run(live, recorded)


# LangGraph's model calls + opentelemetry-instrumentation-openai-v2 -------------------------------

@contextmanager
def openai_v2(provider: TracerProvider, logs_path: Path | None = None) -> Iterator[None]:
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    options: dict[str, Any] = {"tracer_provider": provider}
    logger_provider = None
    if logs_path is not None:
        from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(FileLogExporter(str(logs_path))))
        options["logger_provider"] = logger_provider
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(**options)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        if logger_provider is not None:
            logger_provider.shutdown()


CASE_ID: contextvars.ContextVar[str] = contextvars.ContextVar("case_id", default="")


@contextmanager
def case_id_of(case: EvalCase) -> Iterator[None]:
    token = CASE_ID.set(case.eval_id)
    try:
        yield
    finally:
        CASE_ID.reset(token)


class PerTurnSpans:
    """A LangGraphAgent with the application's own span around each turn, as a service that
    answers one request per turn: openai-v2's model-call spans are roots otherwise, and the
    span's conversation id pairs the turns with their case."""

    def __init__(self, agent: Any, provider: TracerProvider) -> None:
        self.agent, self.tracer = agent, provider.get_tracer("shop-app")
        self.__name__ = "langgraph graph"

    async def __call__(self, message: str, history: list[Any]) -> ExecutionResult:
        from opentelemetry import context

        with self.tracer.start_as_current_span("turn", context=context.Context(),
                                               attributes={"gen_ai.conversation.id":
                                                           CASE_ID.get()}):
            return await self.agent(message, history)


async def _openai_v2_run(tmp_path: Path, logs: bool) -> tuple[EvalReport, Path, Path | None]:
    example = langgraph_example()
    from referee.adapters import LangGraphAgent

    spans = tmp_path / "spans.jsonl"
    logs_path = tmp_path / "logs.jsonl" if logs else None
    with ScriptedJudgeServer(example.scripted_model) as server, span_file(spans) as provider, \
            openai_v2(provider, logs_path):
        agent = PerTurnSpans(LangGraphAgent(example.build_graph(server.base_url())), provider)
        live = await live_run(agent, stock_cases(), case_id_of)
    return live, spans, logs_path


def assert_same_run_but_nodes(live: EvalReport, recorded: EvalReport) -> None:
    """The same run, except what model-call spans cannot carry: the graph's nodes."""
    def without_nodes(report: EvalReport) -> dict[str, Any]:
        return {key: (status, [r for r in results if r[0] != "node_order_score"])
                for key, (status, results) in verdicts(report).items()}

    assert without_nodes(recorded) == without_nodes(live)
    for live_case, recorded_case in zip(live.cases, recorded.cases):
        expected = {**run_fields(live_case.execution), "node_visits": []}
        expected["turns"] = [(*turn[:3], []) for turn in expected["turns"]]
        assert run_fields(recorded_case.execution) == expected


async def test_openai_v2_content_in_logs_scores_like_the_live_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    live, spans, logs = await _openai_v2_run(tmp_path, logs=True)

    recorded = await recorded_run(spans, stock_cases(), logs=logs)

    assert_same_run_but_nodes(live, recorded)
    for recorded_case in recorded.cases:
        node_order = next(r for r in recorded_case.criterion_results
                          if r.criterion == "node_order_score")
        assert node_order.skipped and "no node visits" in node_order.details["reason"]
    # Without the logs the same spans say that their content is elsewhere, and nothing is
    # scored against the empty texts they leave.
    spans_only = await recorded_run(spans, stock_cases())
    first = spans_only.cases[0]
    assert first.status == CaseStatus.SKIPPED, first.criterion_results
    assert all(r.skipped for r in first.criterion_results)
    assert any("record no message content" in note and "--traces-logs" in note
               for note in first.execution.metadata["trace_notes"])


async def test_openai_v2_latest_conventions_on_spans_score_like_the_live_run(tmp_path,
                                                                             monkeypatch):
    semconv = pytest.importorskip("opentelemetry.instrumentation._semconv")
    stability = semconv._OpenTelemetrySemanticConventionStability
    # The opt-in is read once per process; this test's setting is restored after it.
    monkeypatch.setattr(stability, "_initialized", True)
    monkeypatch.setattr(stability, "_OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING", {
        semconv._OpenTelemetryStabilitySignalType.GEN_AI:
            semconv._StabilityMode.GEN_AI_LATEST_EXPERIMENTAL})
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    live, spans, _ = await _openai_v2_run(tmp_path, logs=False)

    recorded = await recorded_run(spans, stock_cases())

    assert "gen_ai.input.messages" in spans.read_text(encoding="utf-8")
    assert_same_run_but_nodes(live, recorded)


async def test_openai_v2_without_content_reads_unrecorded_arguments_as_not_recorded(
        tmp_path, monkeypatch):
    """The instrumentation's default (no content capture): its gen_ai.choice events name each
    tool call, without arguments. They read as not recorded, and only an expectation that
    accepts any arguments scores them."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    live, spans, logs = await _openai_v2_run(tmp_path, logs=True)

    def any_arguments(cases: list[EvalCase]) -> list[EvalCase]:
        for case in cases:
            for turn in case.conversation:
                turn.expected_tool_trajectory = [ToolCall(name=call.name) for call in
                                                 turn.expected_tool_trajectory]
        return cases

    specific = await recorded_run(spans, stock_cases(), logs=logs)
    accepting = await recorded_run(spans, any_arguments(stock_cases()), logs=logs)

    for live_case, recorded in zip(live.cases, specific.cases):
        calls = recorded.execution.tool_calls
        assert [(c.name, c.call_id) for c in calls] == [
            (c.name, c.call_id) for c in live_case.execution.tool_calls]
        assert all(c.args is None and c.result is None for c in calls)
        notes = recorded.execution.metadata["trace_notes"]
        assert any("records no arguments" in note for note in notes)
        trajectory = next(r for r in recorded.criterion_results
                          if r.criterion == "tool_trajectory_avg_score")
        assert trajectory.skipped and "cannot be checked" in trajectory.details["reason"]
    for recorded in accepting.cases:
        trajectory = next(r for r in recorded.criterion_results
                          if r.criterion == "tool_trajectory_avg_score")
        assert (trajectory.passed, trajectory.skipped) == (True, False), trajectory.details
