"""Images and PDFs in imported traces (issue 34): OpenAI-style message lists, OTel GenAI spans
(``blob``/``uri``/``file`` parts) and OpenInference spans (image contents), written by the real
OTel SDK and its exporters, read into the case's turn (what the user sent), the run's outputs
(what the model answered with) and tool results; a judged criterion scoring the imported trace
shows the judge those images; what cannot be read is one note naming the span and attribute."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from content_samples import pdf, picture

from referee.adapters import TRACE_NOTES_KEY, read_traces, score_traces
from referee.adapters._traces import MessageListReader
from referee.content import DocumentPart, ImagePart, TextPart
from referee.evaluators import GEval
from referee.testing import ScriptedJudgeServer

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")

CHART = picture(400, 300, seed=21)  # the user's screenshot
ANSWER = picture(320, 200, seed=22)  # the chart the model drew
SCREEN = picture(200, 160, seed=23)  # a tool's screenshot
PHOTO = picture(240, 180, seed=24, fmt="JPEG")
FORM = pdf(1)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{b64(data)}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def media(parts: Any) -> list[tuple[str, str | None, str | None]]:
    """(type, media type, sha256 or url) of each image or PDF, in order."""
    return [(p.type, p.media_type, p.sha256 or p.url) for p in parts
            if isinstance(p, (ImagePart, DocumentPart))]


# Spans written by the real OTel SDK -------------------------------------------------------------

@contextmanager
def span_file(path: Path) -> Iterator[Any]:
    """A tracer whose ended spans the SDK's OTLP/JSON file exporter writes to ``path``."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    try:
        yield provider.get_tracer("vision-agent")
    finally:
        provider.shutdown()


def genai_turn(tracer: Any, conversation: str, inputs: list[dict], outputs: list[dict],
               tool: tuple[str, list[dict]] | None = None) -> None:
    """One agent turn in the current GenAI conventions: a model call that asks for a tool
    (when ``tool`` is given, whose result message ``tool[1]`` the next call is sent), then the
    model call that answers with ``outputs``."""
    with tracer.start_as_current_span("invoke_agent vision", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "vision",
            "gen_ai.conversation.id": conversation}):
        sent = list(inputs)
        if tool is not None:
            call = {"role": "assistant", "parts": [
                {"type": "tool_call", "id": "shot-1", "name": tool[0], "arguments": {}}]}
            with tracer.start_as_current_span("chat gpt-4.1", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(sent),
                    "gen_ai.output.messages": json.dumps([call])}):
                pass
            with tracer.start_as_current_span(f"execute_tool {tool[0]}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool[0],
                    "gen_ai.tool.call.id": "shot-1", "gen_ai.tool.call.arguments": "{}"}):
                pass
            sent += [call, {"role": "tool", "parts": tool[1]}]
        with tracer.start_as_current_span("chat gpt-4.1", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(sent),
                "gen_ai.output.messages": json.dumps(outputs),
                "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 12}):
            pass


def user(text: str, *parts: dict) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}, *parts]}


def assistant(text: str, *parts: dict) -> dict:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}, *parts],
            "finish_reason": "stop"}


def blob(data: bytes, mime_type: str = "image/png", modality: str = "image") -> dict:
    return {"type": "blob", "modality": modality, "mime_type": mime_type, "content": b64(data)}


def test_genai_blob_and_uri_parts_become_the_turns_content_outputs_and_tool_results(tmp_path):
    spans = tmp_path / "spans.jsonl"
    with span_file(spans) as tracer:
        genai_turn(tracer, "conv-vision",
                   [user("Which region sold most?", blob(CHART),
                         {"type": "uri", "modality": "image", "mime_type": "image/png",
                          "uri": "https://example.com/legend.png"})],
                   [assistant("North; here is its chart.", blob(ANSWER))],
                   tool=("screenshot", [{"type": "tool_call_response", "id": "shot-1",
                                         "response": "captured"}, blob(SCREEN)]))
    (run,) = read_traces(spans)

    case = run.case or None
    assert case is None  # a trace carries no case of its own: pair_runs builds it
    said = run.user_turns[0]
    assert [type(p) for p in said] == [TextPart, ImagePart, ImagePart]
    assert said[0].text == "Which region sold most?"
    # The blob's bytes decide its hash and type; the uri is kept as a reference, never fetched.
    assert media(said) == [("image", "image/png", sha(CHART)),
                           ("image", "image/png", "https://example.com/legend.png")]
    assert said[2].data is None
    execution = run.execution
    assert execution.actual_response == "North; here is its chart."
    assert media(execution.outputs) == [("image", "image/png", sha(ANSWER))]
    (call,) = execution.tool_calls
    assert call.result[0] == "captured" and media(call.result[1:]) == [
        ("image", "image/png", sha(SCREEN))]
    assert not execution.metadata.get(TRACE_NOTES_KEY)

    from referee.adapters import pair_runs

    ((paired, _),), _ = pair_runs([run])
    assert paired.input_text == "Which region sold most?"  # the text view
    assert media(paired.conversation[0].user_content) == media(said)


@pytest.fixture
def judge_server(isolated_judge, monkeypatch) -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer(reply='{"score": 1.0, "reason": "ok"}') as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", f"scripted-{running.port}")
        yield running


def sent_images(body: dict) -> list[str]:
    """The sha256 of each image a Chat Completions request shows the judge."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        for item in content if isinstance(content, list) else []:
            if item["type"] == "image_url":
                found.append(sha(base64.b64decode(item["image_url"]["url"].partition(",")[2])))
    return found


def test_a_judged_criterion_scoring_an_imported_trace_sends_its_images(tmp_path, judge_server):
    spans = tmp_path / "spans.jsonl"
    with span_file(spans) as tracer:
        genai_turn(tracer, "conv-judged", [user("Which region sold most?", blob(CHART))],
                   [assistant("North.", blob(ANSWER))])
    judge = judge_server.judge_config(provider="openai", model="gpt-4.1")
    report = score_traces(spans, criteria=[GEval(criteria="Is the chart right?", judge=judge)],
                          verbose=False, runs_dir=tmp_path / "runs")

    (case,) = report.cases
    assert case.status.value == "PASSED", case
    assert media(case.execution.outputs) == [("image", "image/png", sha(ANSWER))]
    assert judge_server.requests
    for request in judge_server.requests:
        # What the user sent (the case), then what the model answered with (its output).
        assert sent_images(request.body) == [sha(CHART), sha(ANSWER)]
        assert "Which region sold most?" in request.prompt


# OpenInference ----------------------------------------------------------------------------------

def openinference_llm(tracer: Any, session: str, contents: dict[str, Any],
                      answer: str = "A bar chart.") -> None:
    attributes = {"openinference.span.kind": "LLM", "session.id": session,
                  "llm.input_messages.0.message.role": "user",
                  "llm.output_messages.0.message.role": "assistant",
                  "llm.output_messages.0.message.content": answer}
    attributes.update({f"llm.input_messages.0.message.contents.{key}": value
                       for key, value in contents.items()})
    with tracer.start_as_current_span("ChatCompletion", attributes=attributes):
        pass


def test_openinference_image_contents_are_read_and_redacted_ones_noted(tmp_path):
    spans = tmp_path / "spans.jsonl"
    with span_file(spans) as tracer:
        openinference_llm(tracer, "s-photo", {
            "0.message_content.type": "text", "0.message_content.text": "What is in the photo?",
            "1.message_content.type": "image",
            "1.message_content.image.image.url": data_url(PHOTO, "image/jpeg")})
        # TraceConfig(hide_input_images=True), or a base64 image over its length limit.
        openinference_llm(tracer, "s-hidden", {
            "0.message_content.type": "text", "0.message_content.text": "And this one?",
            "1.message_content.type": "image",
            "1.message_content.image.image.url": "__REDACTED__"})
    photo, hidden = read_traces(spans)

    said = photo.user_turns[0]
    assert said[0].text == "What is in the photo?"
    assert media(said) == [("image", "image/jpeg", sha(PHOTO))]  # the bytes decide the type
    assert photo.execution.actual_response == "A bar chart."
    assert not photo.execution.metadata.get(TRACE_NOTES_KEY)

    assert hidden.user_turns == ["And this one?"]  # no fake image in its place
    (note,) = hidden.execution.metadata[TRACE_NOTES_KEY]
    assert "'ChatCompletion'" in note and "field 'attributes.llm.input_messages.0.message." \
        "contents.1.message_content.image.image.url'" in note and "left out" in note
    assert hidden.execution.actual_response == "A bar chart."


# Bad input -------------------------------------------------------------------------------------

def test_unreadable_parts_are_one_note_each_and_the_rest_of_the_trace_imports(tmp_path):
    spans = tmp_path / "spans.jsonl"
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"/>'
    with span_file(spans) as tracer:
        genai_turn(tracer, "conv-bad", [user(
            "Compare these.",
            {"type": "blob", "modality": "image", "mime_type": "image/png",
             "content": "iVBORw0KGgo!!not base64"},
            blob(svg, "image/svg+xml"),
            {"type": "blob", "modality": "image", "mime_type": "image/png"},  # not captured
            {"type": "file", "modality": "image", "mime_type": "image/png",
             "file_id": "file-abc123"},
            blob(b"ID3audio", "audio/mpeg", "audio"),
            blob(CHART))],
            [assistant("They differ.")])
        genai_turn(tracer, "conv-bad", [user("And now?", blob(ANSWER))],
                   [assistant("Still different.")])
        genai_turn(tracer, "conv-fine", [user("Only this.", blob(SCREEN))],
                   [assistant("Fine.")])
    bad, fine = read_traces(spans)

    assert bad.execution.error is None
    first, second = bad.user_turns
    assert media(first) == [("image", "image/png", sha(CHART))]  # the readable one is kept
    assert media(second) == [("image", "image/png", sha(ANSWER))]
    assert [t.response for t in bad.execution.turns] == ["They differ.", "Still different."]
    notes = bad.execution.metadata[TRACE_NOTES_KEY]
    assert len(notes) == 5
    field = "field 'attributes.gen_ai.input.messages[0].parts[{}]'"
    expected = {1: "image 'data' is not base64 text", 2: "unsupported image media type "
                "image/svg+xml", 3: "content was left out by the instrumentation",
                4: "uploaded file named by its id 'file-abc123'",
                5: "a blob part of modality 'audio' (audio/mpeg)"}
    for index, words in expected.items():
        (note,) = [n for n in notes if field.format(index) in n]
        assert words in note and "'chat gpt-4.1'" in note and "left out" in note, note
        assert "\n" not in note
    assert media(fine.user_turns[0]) == [("image", "image/png", sha(SCREEN))]
    assert not fine.execution.metadata.get(TRACE_NOTES_KEY)


# OpenAI-style message lists ---------------------------------------------------------------------

def read_record(messages: list[dict], where: str = "msgs.json") -> Any:
    return MessageListReader._read_one({"id": "r1", "messages": messages}, where)


@pytest.mark.parametrize("shape", ["chat", "responses", "anthropic", "langchain"])
def test_a_user_messages_images_and_pdfs_are_its_turns_parts(shape):
    image, document = {
        "chat": ({"type": "image_url", "image_url": {"url": data_url(CHART)}},
                 {"type": "file", "file": {"filename": "form.pdf",
                                           "file_data": data_url(FORM, "application/pdf")}}),
        "responses": ({"type": "input_image", "image_url": data_url(CHART)},
                      {"type": "input_file", "filename": "form.pdf",
                       "file_data": data_url(FORM, "application/pdf")}),
        "anthropic": ({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                   "data": b64(CHART)}},
                      {"type": "document", "source": {"type": "base64",
                                                      "media_type": "application/pdf",
                                                      "data": b64(FORM)}}),
        "langchain": ({"type": "image", "base64": b64(CHART), "mime_type": "image/png"},
                      {"type": "file", "base64": b64(FORM), "mime_type": "application/pdf",
                       "extras": {"filename": "form.pdf"}}),
    }[shape]
    run = read_record([
        {"role": "user", "content": [{"type": "text", "text": "Is the form filled in?"},
                                     image, document]},
        {"role": "assistant", "content": [{"type": "text", "text": "Yes; I marked it up."},
                                          {"type": "image_url",
                                           "image_url": {"url": data_url(ANSWER)}}]}])

    assert run.execution.error is None
    turn = run.case.conversation[0].user_content
    assert media(turn) == [("image", "image/png", sha(CHART)),
                           ("document", "application/pdf", sha(FORM))]
    assert run.case.input_text == "Is the form filled in?"
    assert run.execution.actual_response == "Yes; I marked it up."
    assert media(run.execution.outputs) == [("image", "image/png", sha(ANSWER))]
    # The judge scope finds the case's parts (each once), then the output's.
    assert [p.sha256 for p in run.case.media] == [sha(CHART), sha(FORM)]


def test_a_text_only_conversation_is_unchanged():
    run = read_record([{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                       {"role": "assistant", "content": "Hello"}])
    assert run.case.conversation[0].user_content == "Hi" and run.execution.outputs == []


def test_a_corrupt_image_in_a_message_list_fails_that_record_only(tmp_path):
    bad = [{"role": "user", "content": [
        {"type": "text", "text": "Look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "I see."}]
    good = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(CHART)}}]},
        {"role": "assistant", "content": "A chart."}]
    path = tmp_path / "msgs.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "messages": m})
                              for i, m in (("bad", bad), ("good", good))) + "\n")
    failed, read = read_traces(path)

    assert failed.execution.error == (
        f"{path}:1: field 'messages[0].content[1]': image part: image bytes are in no format "
        "referee reads (declared image/png) (expected image/bmp, image/gif, image/heic, "
        "image/heif, image/jpeg, image/png, image/tiff, image/webp)")
    assert read.execution.error is None
    assert media(read.case.conversation[0].user_content) == [("image", "image/png", sha(CHART))]
    assert read.case.input_text == ""


# `referee serve`: spans exported live through the SDK's OTLP/HTTP exporter ---------------------

async def test_referee_serve_keeps_a_traces_images_and_shows_them_to_the_judge(
        tmp_path, judge_server):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
    from otlp_receiver import exporting, receiver, shut_down

    from referee.store import list_runs, load_run

    judge = judge_server.judge_config(provider="openai", model="gpt-4.1")
    criteria = [GEval(criteria="Is the chart right?", judge=judge)]
    async with receiver(criteria, tmp_path) as (scorer, url):
        with exporting(url, "protobuf") as provider:
            genai_turn(provider.get_tracer("vision-agent"), "conv-live",
                       [user("Which region sold most?", blob(CHART))],
                       [assistant("North.", blob(ANSWER))])
            await shut_down(provider)
        await scorer.drain()

    assert judge_server.requests
    for request in judge_server.requests:
        assert sent_images(request.body) == [sha(CHART), sha(ANSWER)]
    (run,) = list_runs(tmp_path / "runs")
    (case,) = load_run(run.path).cases
    assert case.status.value == "PASSED", case
    # The stored run keeps the parts by hash (their bytes once, under blobs/).
    assert [p.sha256 for p in case.execution.outputs] == [sha(ANSWER)]
    assert (run.path / "blobs" / sha(ANSWER)[:2] / sha(ANSWER)).is_file()


def test_pre_1_37_event_messages_and_a_tools_content_list_carry_images(tmp_path):
    """The v1.28-1.36 events (a span event's ``gen_ai.event.content``, as Azure AI Inference
    writes it) and a tool span whose result is an MCP-style content list."""
    spans = tmp_path / "spans.jsonl"
    with span_file(spans) as tracer:
        with tracer.start_as_current_span("invoke_agent vision", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "vision"}):
            with tracer.start_as_current_span("execute_tool screenshot", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "screenshot",
                    "gen_ai.tool.call.id": "t1", "gen_ai.tool.call.arguments": "{}",
                    "gen_ai.tool.call.result": json.dumps([
                        {"type": "text", "text": "captured"},
                        {"type": "image", "data": b64(SCREEN), "mimeType": "image/png"}])}):
                pass
            with tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat"}) as chat:
                chat.add_event("gen_ai.user.message", {"gen_ai.event.content": json.dumps({
                    "role": "user", "content": [
                        {"type": "text", "text": "What changed?"},
                        {"type": "image_url", "image_url": {"url": data_url(CHART)}}]})})
                chat.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps({
                    "index": 0, "message": {"role": "assistant", "content": [
                        {"type": "text", "text": "The legend."},
                        {"type": "image_url", "image_url": {"url": data_url(ANSWER)}}]}})})
    (run,) = read_traces(spans)

    assert media(run.user_turns[0]) == [("image", "image/png", sha(CHART))]
    assert run.execution.actual_response == "The legend."
    assert media(run.execution.outputs) == [("image", "image/png", sha(ANSWER))]
    (call,) = run.execution.tool_calls
    assert call.result[0] == "captured" and media(call.result[1:]) == [
        ("image", "image/png", sha(SCREEN))]


def test_the_openai_v2_instrumentations_logged_image_is_read(tmp_path, monkeypatch):
    """The real OpenAI SDK under opentelemetry-instrumentation-openai-v2 with content capture:
    the user's image_url part goes to its ``gen_ai.user.message`` log record (the conventions
    before 1.37, its default), read with the logs export as --traces-logs does."""
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    from openai import OpenAI
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from referee.testing import DUMMY_API_KEY

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    spans, logs = tmp_path / "spans.jsonl", tmp_path / "logs.jsonl"
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(spans))))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(str(logs))))
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        with ScriptedJudgeServer(reply="A bar chart.") as server:
            OpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": [
                    {"type": "text", "text": "What is it?"},
                    {"type": "image_url", "image_url": {"url": data_url(CHART)}}]}])
    finally:
        instrumentor.uninstrument()
        tracer_provider.shutdown()
        logger_provider.shutdown()
    (run,) = read_traces(spans, logs)

    said = run.user_turns[0]
    assert said[0].text == "What is it?"
    assert media(said) == [("image", "image/png", sha(CHART))]
    assert run.execution.actual_response == "A bar chart."
