"""Real instrumented runs exported live to `referee serve` score as `referee run --traces`.

The OpenAI Agents SDK and LangGraph run against the scripted model server under their real
instrumentations; one TracerProvider sends every span both to the receiver (the OTel SDK's
OTLP/HTTP exporter, protobuf or JSON) and to a file (the SDK's OTLP/JSON file exporter). The
verdicts of the online run, read back from its run directory, equal those of scoring the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.exporter.otlp.json.http")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "adapters"))

from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from otlp_receiver import exporting, receiver, shut_down  # noqa: E402
from test_instrumented_traces import (  # noqa: E402  # the same runs as the file-based tests
    CONFIG,
    ORDERS,
    PerTurnSpans,
    case_id_of,
    langgraph_example,
    order_cases,
    order_desk,
    session_of,
    stock_cases,
    verdicts,
)

from referee import AgentEvaluator  # noqa: E402
from referee.adapters import score_traces_async  # noqa: E402
from referee.criteria.registry import build_criteria  # noqa: E402
from referee.record import CaseStatus, EvalReport  # noqa: E402
from referee.store import list_runs, load_run  # noqa: E402
from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer  # noqa: E402


def online_report(runs_dir: Path) -> EvalReport:
    (run,) = list_runs(runs_dir)
    return load_run(run.path)


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
async def test_openai_agents_spans_exported_live_score_like_run_traces(tmp_path, encoding):
    agents = pytest.importorskip("agents")
    instrumentor_module = pytest.importorskip("openinference.instrumentation.openai_agents")
    from openai import AsyncOpenAI

    from referee.adapters import OpenAIAgentsAgent

    @agents.function_tool
    def lookup_order(order_id: str) -> dict:
        """The status of an order."""
        return {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}

    spans_file = tmp_path / "spans.jsonl"
    instrumentor = instrumentor_module.OpenAIAgentsInstrumentor()
    async with receiver(build_criteria(CONFIG), tmp_path, cases=order_cases()) as (scorer, url):
        with ScriptedJudgeServer(order_desk) as server, exporting(url, encoding) as provider:
            provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(spans_file))))
            instrumentor.instrument(tracer_provider=provider)
            try:
                model = agents.OpenAIResponsesModel(
                    "scripted", AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY))
                orders = agents.Agent(name="orders", instructions="You answer order questions.",
                                      tools=[lookup_order], model=model)
                triage = agents.Agent(name="triage", instructions="You route customers.",
                                      handoffs=[orders], model=model)
                await AgentEvaluator(OpenAIAgentsAgent(triage), config=CONFIG, save=False,
                                     case_context=session_of).evaluate(
                    order_cases(), verbose=False, parallel=False)
            finally:
                instrumentor.uninstrument()
                await shut_down(provider)
        await scorer.drain()
        assert scorer.metrics.spans_received == len(spans_file.read_text().splitlines())

    online = online_report(tmp_path / "runs")
    recorded = await score_traces_async(spans_file, cases=order_cases(), config=CONFIG,
                                        verbose=False, save=False)
    assert [c.status for c in recorded.cases] == [CaseStatus.PASSED, CaseStatus.FAILED]
    assert verdicts(online) == verdicts(recorded)
    assert online.finished_at is not None and online.model_id == "recorded"


# LangGraph ------------------------------------------------------------------------------------

async def test_langgraph_spans_exported_live_score_like_run_traces(tmp_path):
    example = langgraph_example()
    instrumentor_module = pytest.importorskip("openinference.instrumentation.langchain")
    from referee.adapters import LangGraphAgent

    spans_file = tmp_path / "spans.jsonl"
    instrumentor = instrumentor_module.LangChainInstrumentor()
    async with receiver(build_criteria(CONFIG), tmp_path, cases=stock_cases()) as (scorer, url):
        with ScriptedJudgeServer(example.scripted_model) as server, \
                exporting(url, "protobuf") as provider:
            provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(spans_file))))
            instrumentor.instrument(tracer_provider=provider)
            try:
                await AgentEvaluator(LangGraphAgent(example.build_graph(server.base_url())),
                                     config=CONFIG, save=False, case_context=session_of
                                     ).evaluate(stock_cases(), verbose=False, parallel=False)
            finally:
                instrumentor.uninstrument()
                await shut_down(provider)
        await scorer.drain()

    online = online_report(tmp_path / "runs")
    recorded = await score_traces_async(spans_file, cases=stock_cases(), config=CONFIG,
                                        verbose=False, save=False)
    assert [c.status for c in recorded.cases] == [CaseStatus.PASSED, CaseStatus.PASSED]
    assert verdicts(online) == verdicts(recorded)
    first = next(c for c in online.cases if c.eval_id == "stock-questions")
    assert [t.user_content for t in first.execution.turns] == [
        "Is the keyboard in stock?", "And the mouse?"]


async def test_message_content_sent_as_otlp_logs_scores_like_run_traces_with_logs(
        tmp_path, monkeypatch):
    """openai-v2 puts the messages in log records (the GenAI conventions before 1.37): the
    receiver takes them at /v1/logs from the SDK's OTLP/HTTP log exporter and joins them to
    their spans, as --traces-logs does for files."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor

    from referee.adapters import LangGraphAgent

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    example = langgraph_example()
    spans_file, logs_file = tmp_path / "spans.jsonl", tmp_path / "logs.jsonl"
    cases = stock_cases()
    async with receiver(build_criteria(CONFIG), tmp_path, cases=cases) as (scorer, url):
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{url}/v1/logs"), schedule_delay_millis=50))
        logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(FileLogExporter(str(logs_file))))
        with ScriptedJudgeServer(example.scripted_model) as server, \
                exporting(url, "protobuf") as provider:
            provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(spans_file))))
            instrumentor = instrumentation.OpenAIInstrumentor()
            instrumentor.instrument(tracer_provider=provider, logger_provider=logger_provider)
            agent = PerTurnSpans(LangGraphAgent(example.build_graph(server.base_url())),
                                 provider)
            try:
                await AgentEvaluator(agent, config=CONFIG, save=False,
                                     case_context=case_id_of).evaluate(
                    cases, verbose=False, parallel=False)
            finally:
                instrumentor.uninstrument()
                await shut_down(provider)
                await shut_down(logger_provider)
        await scorer.drain()
        assert scorer.metrics.log_records_received > 0

    online = online_report(tmp_path / "runs")
    recorded = await score_traces_async(spans_file, logs=logs_file, cases=cases, config=CONFIG,
                                        verbose=False, save=False)
    assert verdicts(online) == verdicts(recorded)
    judged = [r for c in online.cases for r in c.criterion_results if not r.skipped]
    assert judged and all(r.passed for r in judged)  # the logs gave the spans their content
