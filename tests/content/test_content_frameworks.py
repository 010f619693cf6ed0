"""The live framework adapters send a turn's images and PDFs to the framework in its own shape:
LangGraph as LangChain's standard content blocks, the OpenAI Agents SDK as ``input_image``/
``input_file`` items. Each framework runs for real against the scripted server, whose recorded
request shows what reached the model; a later turn still continues the conversation."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from content_samples import pdf, picture

from referee.content import DocumentPart, ImagePart, TextPart
from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

CHART = picture(300, 200, seed=31)
FORM = pdf(1)
TURN = [TextPart(text="Which region sold most?"), ImagePart(data=CHART, path="chart.png"),
        DocumentPart(data=FORM, path="forms/q3.pdf")]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def from_data_url(url: str) -> tuple[str, str]:
    head, _, payload = url.partition(",")
    return head[5:].split(";")[0], sha(base64.b64decode(payload))


def chat_media(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(media type, sha256) of each image and file a Chat Completions request's user messages
    hold."""
    found = []
    for message in body["messages"]:
        content = message.get("content")
        for item in content if message["role"] == "user" and isinstance(content, list) else []:
            if item["type"] == "image_url":
                found.append(from_data_url(item["image_url"]["url"]))
            elif item["type"] == "file":
                found.append(from_data_url(item["file"]["file_data"]))
                assert item["file"]["filename"] == "q3.pdf"
    return found


def responses_media(body: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for item in body["input"]:
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if item.get("role") == "user" and isinstance(content, list) else []:
            if part["type"] == "input_image":
                found.append(from_data_url(part["image_url"]))
            elif part["type"] == "input_file":
                found.append(from_data_url(part["file_data"]))
                assert part["filename"] == "q3.pdf"
    return found


SENT = [("image/png", sha(CHART)), ("application/pdf", sha(FORM))]


def one_model_graph(server: ScriptedJudgeServer) -> Any:
    """A compiled graph of one node that sends the messages to ChatOpenAI on ``server``."""
    pytest.importorskip("langgraph")
    langchain_openai = pytest.importorskip("langchain_openai")
    from langgraph.graph import START, MessagesState, StateGraph

    model = langchain_openai.ChatOpenAI(model="scripted", base_url=server.base_url(),
                                        api_key=DUMMY_API_KEY, max_retries=0)

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    return graph.compile()


def analyst_agent(server: ScriptedJudgeServer, api: str) -> Any:
    """An Agents SDK agent on ``server`` through its Responses or Chat Completions model, as
    AgentEvaluator's agent under test."""
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    from referee.adapters import OpenAIAgentsAgent

    client = AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)
    model = (agents.OpenAIResponsesModel("scripted", client) if api == "responses"
             else agents.OpenAIChatCompletionsModel("scripted", client))
    return OpenAIAgentsAgent(agents.Agent(name="analyst", instructions="You read charts.",
                                          model=model),
                             run_config=agents.RunConfig(tracing_disabled=True))


async def test_langgraph_gets_a_turns_images_as_langchain_content_blocks():
    from referee.adapters import LangGraphAgent

    with ScriptedJudgeServer(reply="North sold most.") as server:
        adapter = LangGraphAgent(one_model_graph(server))
        first = await adapter(TURN, [])
        from referee.execution import TurnResult

        second = await adapter("And the least?", [TurnResult(
            user_content="Which region sold most?", response=first.actual_response)])

    assert first.actual_response == "North sold most."
    assert first.node_visits == ["agent"] and second.actual_response == "North sold most."
    one, two = server.requests
    assert chat_media(one.body) == SENT
    assert "Which region sold most?" in one.prompt
    # The second turn resends the first turn's message, images and all, then its own text.
    assert chat_media(two.body) == SENT and "And the least?" in two.prompt


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_the_agents_sdk_gets_a_turns_images_as_input_items(api):
    from referee.execution import TurnResult

    with ScriptedJudgeServer(reply="North sold most.") as server:
        adapter = analyst_agent(server, api)
        first = await adapter(TURN, [])
        second = await adapter("And the least?", [TurnResult(
            user_content="Which region sold most?", response=first.actual_response)])

    assert first.actual_response == second.actual_response == "North sold most."
    read = responses_media if api == "responses" else chat_media
    one, two = server.requests
    assert read(one.body) == SENT and "Which region sold most?" in one.prompt
    assert read(two.body) == SENT and "And the least?" in two.prompt


async def test_a_text_turn_is_sent_as_text():
    agents = pytest.importorskip("agents")
    from openai import AsyncOpenAI

    from referee.adapters import OpenAIAgentsAgent

    with ScriptedJudgeServer(reply="Hello.") as server:
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY))
        adapter = OpenAIAgentsAgent(agents.Agent(name="a", instructions="Hi.", model=model),
                                    run_config=agents.RunConfig(tracing_disabled=True))
        await adapter([TextPart(text="Hi")], [])  # parts without media: the text alone
    (request,) = server.requests
    assert request.body["input"] in ("Hi", [{"role": "user", "content": "Hi"}],
                                     [{"content": "Hi", "role": "user"}])


async def test_a_langgraph_image_turn_recorded_by_openinference_imports_its_image(tmp_path):
    """The same turn under the real OpenInference LangChain instrumentation: its spans, written
    by the OTel SDK's OTLP/JSON file exporter, import the image the model was sent."""
    instrumentation = pytest.importorskip("openinference.instrumentation.langchain")
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from referee.adapters import LangGraphAgent, read_traces

    spans = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(spans))))
    instrumentor = instrumentation.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with ScriptedJudgeServer(reply="North sold most.") as server:
            await LangGraphAgent(one_model_graph(server))(TURN[:2], [])
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    (run,) = read_traces(spans)

    said = run.user_turns[0]
    assert said[0].text == "Which region sold most?"
    assert [(p.media_type, p.sha256) for p in said[1:]] == [("image/png", sha(CHART))]
    assert run.execution.actual_response == "North sold most."
    assert not run.execution.metadata.get("trace_notes")
