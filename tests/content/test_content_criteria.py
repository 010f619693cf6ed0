"""The deterministic image criteria: found wherever the run put its images, scored without a
judge, and usable in an EvalSuite run like any other evaluator."""

from __future__ import annotations

import base64
import io

import pytest
from content_samples import picture
from PIL import Image

from referee import EvalCase, EvalSuite, ExecutionResult, ToolCall
from referee.content import ContentError, ImageCheck, ImageMatches, ImagePart, find_parts

CASE = EvalCase(input="Draw the sales chart")


def shrunk_jpeg(data: bytes) -> bytes:
    out = io.BytesIO()
    with Image.open(io.BytesIO(data)) as image:
        image.resize((image.width // 2, image.height // 2)).save(out, format="JPEG", quality=75)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def test_images_are_found_in_tool_results_turn_metadata_and_data_urls():
    chart, logo = picture(seed=1), picture(seed=2)
    run = ExecutionResult(
        actual_response="done",
        tool_calls=[ToolCall(name="plot", result={"type": "image_url",
                                                  "image_url": {"url": data_url(chart)}})],
        metadata={"attachments": [ImagePart(data=logo, path="logo.png"), "not an image"],
                  "preview": data_url(chart)})
    found = find_parts(run)
    assert [part.sha256 for part in found] == [ImagePart(data=chart).sha256,
                                               ImagePart(data=logo).sha256,
                                               ImagePart(data=chart).sha256]


async def test_image_matches_passes_a_copy_and_fails_another_picture():
    reference = picture(640, 480, seed=4)
    criterion = ImageMatches(reference)
    copy = ExecutionResult(actual_response="", metadata={"image": data_url(
        shrunk_jpeg(reference), "image/jpeg")})
    result = await criterion.evaluate(copy, CASE)
    assert result.passed and result.score == 1.0 and result.details["distance"] <= 4
    other = ExecutionResult(actual_response="", metadata={"image": data_url(
        picture(640, 480, seed=7))})
    result = await criterion.evaluate(other, CASE)
    assert not result.passed and result.score == 0.0
    assert result.details["distance"] > 10
    assert result.details["reason"].startswith("no output image matches the reference")


async def test_an_output_without_an_image_fails_the_image_criteria():
    for criterion in (ImageMatches(picture()), ImageCheck(max_width=100)):
        result = await criterion.evaluate(ExecutionResult(actual_response="no chart"), CASE)
        assert not result.passed and result.details["reason"] == "The output holds no image."


async def test_image_check_scores_the_share_of_images_within_bounds():
    small, large = picture(200, 100), picture(800, 600, fmt="JPEG")
    run = ExecutionResult(actual_response="", metadata={
        "images": [ImagePart(data=small, path="small.png"),
                   ImagePart(data=large, path="large.jpg")]})
    result = await ImageCheck(media_types=["image/png"], max_width=640).evaluate(run, CASE)
    assert result.score == 0.5 and not result.passed
    assert result.details["problems"] == {
        "large.jpg": ["format image/jpeg is not one of image/png", "width 800 px is over 640 px"]}


def test_a_bad_reference_is_refused_when_the_criterion_is_built(tmp_path):
    with pytest.raises(ContentError, match="field 'reference': image file not found: "):
        ImageMatches(str(tmp_path / "missing.png"))
    with pytest.raises(ContentError, match="needs its bytes"):
        ImageMatches("https://example.com/ref.png")
    with pytest.raises(ContentError, match="max_distance must be between 0 and 64"):
        ImageMatches(picture(), max_distance=65)


def test_the_image_criteria_score_a_suite_run(tmp_path):
    reference = picture(320, 240, seed=5)
    (tmp_path / "reference.png").write_bytes(reference)
    suite = EvalSuite("charts").add_cases([EvalCase(input="good"), EvalCase(input="bad")])
    suite.add_evaluators(ImageMatches(tmp_path / "reference.png"),
                         ImageCheck(media_types=["image/png", "image/jpeg"]))

    def draw(prompt: str) -> ExecutionResult:
        image = shrunk_jpeg(reference) if prompt == "good" else picture(320, 240, seed=9)
        return ExecutionResult(actual_response="here is the chart",
                               metadata={"chart": data_url(image, "image/jpeg"
                                                           if prompt == "good" else "image/png")})

    report = suite.run(draw, verbose=False, runs_dir=tmp_path / "runs")
    statuses = {case.case_input: case.status.value for case in report.cases}
    assert statuses == {"good": "PASSED", "bad": "FAILED"}


def test_image_matches_without_a_reference_compares_each_cases_expected_image(tmp_path):
    chart, other = picture(seed=41), picture(seed=42)
    suite = EvalSuite("expected").add_cases([
        EvalCase(input="chart", expected_output=["the chart", {"image": data_url(chart)}]),
        EvalCase(input="other", expected_output=["the other", {"image": data_url(other)}]),
        EvalCase(input="none")])
    suite.add_evaluators(ImageMatches())
    report = suite.run(lambda prompt: {"response": "here", "outputs": [
        data_url(shrunk_jpeg(chart), "image/jpeg")]}, verbose=False, runs_dir=tmp_path)
    results = {case.case_input: case.criterion_results[0] for case in report.cases}
    assert results["chart"].passed and results["chart"].details["reference_sha256"] == \
        ImagePart(data=chart).sha256
    assert not results["other"].passed
    assert results["none"].skipped


def test_a_rescored_run_reads_its_stored_images_back_for_the_image_criteria(tmp_path):
    # The stored run keeps each image by hash alone: re-scored, the criteria see the bytes
    # from blobs/, never "the output holds no image".
    chart = picture(seed=43)
    suite = EvalSuite("rescored").add_case(
        EvalCase(input="chart", expected_output=["the chart", {"image": data_url(chart)}]))
    suite.add_evaluators(ImageMatches(), ImageCheck(media_types=["image/png"]))

    def model(prompt: str) -> dict:
        return {"response": "here", "outputs": [data_url(chart)]}

    first = suite.run(model, verbose=False, runs_dir=tmp_path)
    again = suite.run(model, verbose=False, runs_dir=tmp_path,
                      resume=tmp_path / first.run_id, rescore=True)
    for report in (first, again):
        assert [(r.criterion, r.passed) for r in report.cases[0].criterion_results] == [
            ("image_matches", True), ("image_check", True)]
