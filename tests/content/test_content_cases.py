"""Images and PDFs in the case model and in case files: ``input``, ``context``, expected output
and turns hold typed parts; text-only cases dump and hash as they always did; a media case's id
is its content's, whatever path it was read from; case files read paths relative to the file
(YAML, JSON, JSONL, CSV) and ADK's inline data, and write them back; bad input is one line;
the model and the agent under test are sent the parts."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

import pytest
from content_samples import pdf, picture

from referee import AgentEvaluator, EvalCase, EvalSet, EvalSuite, Invocation
from referee.content import ContentError, DocumentPart, ImagePart, TextPart
from referee.evaluators.deterministic import Contains
from referee.messages import content_text

CHART = picture(120, 80, seed=5)
OTHER = picture(120, 80, seed=6)
REPORT = pdf(1)


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


# The data model ---------------------------------------------------------------------------

def test_text_only_cases_keep_the_ids_and_dumps_they_had():
    # Ids computed by main before content parts existed, for these fixed cases.
    case = EvalCase(input="What is 2+2?", expected_output="4", context=["math", "arith"],
                    tags=["t"])
    assert case.eval_id == "case-fed0e14d1019"
    assert EvalCase.multi_turn([("hi", "hello"), ("bye", "ciao")]).eval_id == "case-cd0bbec5d757"
    assert EvalCase(input="a \udc80 b").eval_id == "case-929e557cc029"  # a lone surrogate
    assert "expected_media" not in case.model_dump()
    assert "expected_media" not in case.conversation[0].model_dump()
    # Text given as parts is the same case.
    parts = EvalCase(input=["What is 2+2?", {"type": "text", "text": "Be brief."}],
                     expected_output=["4"])
    assert parts.input == "What is 2+2?\nBe brief." and parts.expected_output == "4"
    assert parts.eval_id == EvalCase(input="What is 2+2?\nBe brief.",
                                     expected_output="4").eval_id


def test_a_media_case_is_known_by_its_content_never_its_path(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "chart.png").write_bytes(CHART)
    (tmp_path / "moved.png").write_bytes(CHART)
    from_file = EvalCase(input=["What does it show?", {"image": str(tmp_path / "a/chart.png")}])
    moved = EvalCase(input=["What does it show?", {"image": str(tmp_path / "moved.png")}])
    inline = EvalCase(input=["What does it show?", {"image": data_url(CHART)}])
    other = EvalCase(input=["What does it show?", {"image": data_url(OTHER)}])
    assert from_file.eval_id == moved.eval_id == inline.eval_id != other.eval_id
    assert from_file.eval_id != EvalCase(input="What does it show?").eval_id
    # The hash covers the image's sha256, never its base64 bytes.
    identity = json.dumps(from_file._identity())
    assert ImagePart(data=CHART).sha256 in identity
    assert base64.b64encode(CHART).decode()[:40] not in identity and "chart.png" not in identity


def test_the_views_of_a_case_with_parts():
    case = EvalCase(input=["Which region?", {"image": data_url(CHART)}, "Answer briefly."],
                    context=["The report:", {"pdf": data_url(REPORT, "application/pdf")}],
                    expected_output=["North", {"image": data_url(OTHER)}])
    assert [type(p) for p in case.input] == [TextPart, ImagePart, TextPart]
    assert case.input_text == "Which region?\nAnswer briefly."
    assert case.context_chunks == ["The report:"] and case.context_text == "The report:"
    assert case.expected_output == "North"
    assert [p.data for p in case.expected_media] == [OTHER]
    assert [p.data for p in case.media] == [CHART, REPORT, OTHER]
    turn = case.conversation[0]
    assert turn.user_content == case.input and turn.user_text == case.input_text
    assert turn.user_parts == case.input and turn.expected_media == case.expected_media
    # An image holds no text: it is no part of a message's text.
    assert content_text([TextPart(text="a"), ImagePart(data=CHART)]) == "a"
    assert EvalCase(input="plain").input_text == "plain" and EvalCase(
        conversation=[Invocation(user_content="x")]).media == []


def test_turns_hold_parts_and_the_input_follows_the_last_turn():
    case = EvalCase(conversation=[
        {"user_content": "Hello", "expected_final_response": "Hi"},
        {"user_content": {"parts": [{"text": "And this?"},
                                    {"inline_data": {"mime_type": "image/png",
                                                     "data": base64.b64encode(CHART).decode()}}],
                          "role": "user"},
         "expected_final_response": ["A chart", {"image": data_url(OTHER)}]}])
    last = case.conversation[-1]
    assert [type(p) for p in last.user_content] == [TextPart, ImagePart]
    assert last.expected_final_response == "A chart" and last.expected_media[0].data == OTHER
    assert case.input == last.user_content and case.input_text == "And this?"
    assert [p.data for p in case.media] == [CHART, OTHER]
    assert case.expected_output == "A chart" and case.expected_media == last.expected_media


def test_the_model_and_the_agent_are_sent_the_parts(tmp_path):
    sent: list = []

    def model(prompt):
        sent.append(prompt)
        return "North"

    suite = EvalSuite("vision").add_cases([
        EvalCase(input=["Which region?", {"image": data_url(CHART)}]), EvalCase(input="text")])
    suite.add_evaluators(Contains(["North"]))
    assert suite.run(model, verbose=False, runs_dir=tmp_path).passed == 2
    assert [type(p) for p in sent[0]] == [TextPart, ImagePart] and sent[0][1].data == CHART
    assert sent[1] == "text"

    turns: list = []

    def agent(message):
        turns.append(message)
        return "North"

    AgentEvaluator(agent=agent).evaluate_sync(EvalSet(eval_cases=[EvalCase(conversation=[
        {"user_content": "Hello"},
        {"user_content": ["Which region?", {"image": data_url(CHART)}]}])]),
        runs_dir=tmp_path)
    assert turns[0] == "Hello" and [type(p) for p in turns[1]] == [TextPart, ImagePart]


# Case files -------------------------------------------------------------------------------

@pytest.fixture
def case_dir(tmp_path):
    folder = tmp_path / "suite"
    (folder / "shots").mkdir(parents=True)
    (folder / "docs").mkdir()
    (folder / "shots" / "chart.png").write_bytes(CHART)
    (folder / "shots" / "other.png").write_bytes(OTHER)
    (folder / "docs" / "q3.pdf").write_bytes(REPORT)
    return folder


def test_yaml_json_and_jsonl_read_paths_relative_to_the_case_file(case_dir, monkeypatch,
                                                                  tmp_path):
    monkeypatch.chdir(tmp_path)  # not the case file's folder
    case = {"input": ["What does it show?", {"image": "shots/chart.png"}],
            "context": ["text", {"pdf": "docs/q3.pdf"}],
            "expected_output": ["A chart", {"image": "shots/other.png"}],
            "tags": ["vision"]}
    turned = {"conversation": [{"user_content": ["And now?", {"image": "shots/other.png"}],
                                "expected_final_response": "B"}]}
    import yaml

    (case_dir / "cases.yaml").write_text(yaml.safe_dump({"eval_cases": [case, turned]}))
    (case_dir / "cases.json").write_text(json.dumps([case, turned]))
    (case_dir / "cases.jsonl").write_text(json.dumps(case) + "\n" + json.dumps(turned) + "\n")
    loaded = [EvalSet.load(case_dir / name) for name in ("cases.yaml", "cases.json",
                                                         "cases.jsonl")]
    for eval_set in loaded:
        first, second = eval_set.cases
        assert [p.data for p in first.media] == [CHART, REPORT, OTHER]
        assert first.input[1].path == "shots/chart.png" and first.input_text == "What does it show?"
        assert second.conversation[0].user_parts[1].data == OTHER
    assert len({s.cases[0].eval_id for s in loaded}) == 1
    # Saved and read back: the same cases.
    for name in ("saved.yaml", "saved.json", "saved.jsonl"):
        loaded[0].save(tmp_path / name)
        again = EvalSet.load(tmp_path / name)
        assert [c.eval_id for c in again] == [c.eval_id for c in loaded[0]]
        assert [p.data for p in again.cases[0].media] == [CHART, REPORT, OTHER]


def test_data_urls_and_remote_urls_in_a_case_file(case_dir):
    (case_dir / "cases.jsonl").write_text(json.dumps({"input": [
        "Compare", {"image": data_url(CHART)}, {"image": "https://example.com/x.png"}]}) + "\n")
    (case,) = EvalSet.load(case_dir / "cases.jsonl")
    inline, remote = case.media
    assert inline.data == CHART and remote.url == "https://example.com/x.png"
    assert remote.data is None


def test_csv_image_and_document_columns_add_media_to_the_rows_input(case_dir):
    (case_dir / "cases.csv").write_text(
        "input,images,document,expected_output\n"
        "What is it?,shots/chart.png | shots/other.png,docs/q3.pdf,a chart\n"
        "plain,,,x\n")
    first, second = EvalSet.load(case_dir / "cases.csv")
    assert [p.data for p in first.input if not isinstance(p, TextPart)] == [CHART, OTHER, REPORT]
    assert first.input_text == "What is it?" and isinstance(first.media[2], DocumentPart)
    assert second.input == "plain"
    EvalSet(eval_cases=[first, second]).save(case_dir / "saved.csv")
    text = (case_dir / "saved.csv").read_text()
    assert "shots/chart.png|shots/other.png" in text and "docs/q3.pdf" in text
    again = EvalSet.load(case_dir / "saved.csv")
    assert [c.eval_id for c in again] == [first.eval_id, second.eval_id]


def test_an_adk_eval_set_with_inline_data_reads_as_parts_and_writes_back(case_dir):
    from google.genai import types

    content = types.Content(role="user", parts=[
        types.Part(text="What is shown?"), types.Part.from_bytes(data=CHART, mime_type="image/png"),
        types.Part.from_uri(file_uri="gs://bucket/q3.pdf", mime_type="application/pdf")])
    user_content = json.loads(content.model_dump_json(exclude_none=True))
    final_response = json.loads(types.Content(role="model", parts=[
        types.Part(text="A chart"), types.Part.from_bytes(data=OTHER, mime_type="image/png")
    ]).model_dump_json(exclude_none=True))
    document = {"eval_set_id": "vision", "name": "vision", "description": "", "eval_cases": [{
        "eval_id": "chart", "conversation": [{
            "invocation_id": "i-1", "user_content": user_content,
            "final_response": final_response}],
        "session_input": {"app_name": "app", "user_id": "u"}}]}
    path = case_dir / "vision.evalset.json"
    path.write_text(json.dumps(document, indent=2))
    (case,) = EvalSet.load(path)
    assert case.input_text == "What is shown?"
    image, remote, _ = case.media
    assert image.data == CHART and remote.url == "gs://bucket/q3.pdf"
    assert case.expected_output == "A chart" and [p.data for p in case.expected_media] == [OTHER]
    assert "adk" not in case.conversation[0].metadata  # nothing kept twice: the parts say it all
    written = EvalSet.load(path).to_adk()
    assert written == document
    # ADK's own model reads what referee writes.
    turn = written["eval_cases"][0]["conversation"][0]
    parsed = types.Content.model_validate(turn["user_content"])
    assert parsed.parts[1].inline_data.data == CHART
    # Edited, the expected response is written from referee's fields.
    edited = case.model_copy(update={"conversation": [case.conversation[0].model_copy(
        update={"expected_final_response": "A bar chart"})]})
    response = EvalSet(eval_cases=[edited]).to_adk()["eval_cases"][0]["conversation"][0][
        "final_response"]
    parsed = types.Content.model_validate(response)
    assert parsed.parts[0].text == "A bar chart" and parsed.parts[1].inline_data.data == OTHER


def _problem(path) -> str:
    with pytest.raises(ContentError) as raised:
        EvalSet.load(path)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_bad_media_in_a_case_file_is_one_line_naming_file_line_and_field(case_dir):
    (case_dir / "cases.jsonl").write_text(
        json.dumps({"input": "fine"}) + "\n"
        + json.dumps({"input": "also fine"}) + "\n"
        + json.dumps({"input": ["Look", {"image": "shots/missing.png"}]}) + "\n")
    assert _problem(case_dir / "cases.jsonl") == (
        f"{case_dir / 'cases.jsonl'}:3: field 'input[1]': image file not found: "
        f"shots/missing.png (looked in {case_dir / 'shots'})")

    (case_dir / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (case_dir / "cases.yaml").write_text(
        "eval_cases:\n"
        "  - input: fine\n"
        "  - conversation:\n"
        "      - user_content:\n"
        "          - Look\n"
        "          - {type: image, path: logo.svg, media_type: image/svg+xml}\n")
    message = _problem(case_dir / "cases.yaml")
    assert message.startswith(f"{case_dir / 'cases.yaml'}:6: field "
                              "'eval_cases[1].conversation[0].user_content[1]': image part "
                              "(logo.svg): unsupported image media type image/svg+xml")

    (case_dir / "cases.csv").write_text("input,document\nok,\nform,docs/none.pdf\n")
    assert _problem(case_dir / "cases.csv") == (
        f"{case_dir / 'cases.csv'}:3: field 'document': document file not found: "
        f"docs/none.pdf (looked in {case_dir / 'docs'})")

    (case_dir / "cases.json").write_text(json.dumps(
        [{"input": "ok"}, {"input": "q", "context": ["c", {"pdf": "shots/chart.png"}]}]))
    assert _problem(case_dir / "cases.json").startswith(
        f"{case_dir / 'cases.json'}:1: field '[1].context[1]': document part (shots/chart.png): "
        "unsupported document media type image/png")


def test_a_case_built_in_code_with_a_missing_image_names_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"field 'input\[1\]': image file not found: "
                                         r".*nowhere\.png"):
        EvalCase(input=["Look", {"image": str(tmp_path / "nowhere.png")}])


def test_a_case_file_given_by_a_relative_path_names_the_folder_it_looked_in(case_dir,
                                                                          monkeypatch):
    # Run from the case file's parent: the message names the folder in full, not "shots".
    (case_dir / "cases.jsonl").write_text(
        json.dumps({"input": ["Look", {"image": "shots/missing.png"}]}) + "\n")
    monkeypatch.chdir(case_dir.parent)
    assert _problem(Path(case_dir.name) / "cases.jsonl") == (
        f"{case_dir.name}/cases.jsonl:1: field 'input[1]': image file not found: "
        f"shots/missing.png (looked in {case_dir / 'shots'})")


def test_an_svg_named_by_its_path_alone_is_refused_by_its_media_type(case_dir):
    (case_dir / "shots" / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (case_dir / "cases.yaml").write_text(
        "eval_cases:\n  - input: [Look, {image: shots/logo.svg}]\n")
    assert _problem(case_dir / "cases.yaml").startswith(
        f"{case_dir / 'cases.yaml'}:2: field 'eval_cases[0].input[1]': image part "
        "(shots/logo.svg): unsupported image media type image/svg+xml (expected image/bmp")


def test_a_csv_saved_in_another_folder_keeps_every_image_pdf_and_expected_image(case_dir,
                                                                                tmp_path):
    # The paths the CSV was read with name nothing from another folder: the parts go as data
    # URLs there (as paths beside the source); context parts and expected images are kept too.
    (case_dir / "cases.yaml").write_text(
        "eval_cases:\n"
        "  - input: ['Which region?', {image: shots/chart.png}]\n"
        "    context: [The report, {pdf: docs/q3.pdf}]\n"
        "    expected_output: [North, {image: shots/other.png}]\n")
    cases = EvalSet.load(case_dir / "cases.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for target in (elsewhere / "copy.csv", case_dir / "copy.csv"):
        cases.save(target)
        (again,) = EvalSet.load(target)
        assert again.eval_id == cases.eval_cases[0].eval_id
        assert [p.data for p in again.media] == [CHART, REPORT, OTHER]
        assert [p.data for p in again.expected_media] == [OTHER]
    images = [next(csv.DictReader(target.open()))["images"]
              for target in (elsewhere / "copy.csv", case_dir / "copy.csv")]
    assert images[0].startswith("data:image/png;base64,") and images[1] == "shots/chart.png"
