"""A run of image cases read from a case file, end to end: the judge receives each case's image
in its provider's format (through the OpenAI SDK against the scripted judge server), the run
store keeps each distinct image once and cases.jsonl small, the report shows the thumbnails
within its budget (rendered in headless Chromium), and a resumed or re-scored run still shows
the judge the images, read back from blobs/."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from content_samples import picture, report_in_chromium, sent_media

from referee import EvalSet, EvalSuite
from referee.content import _gallery, _prepare
from referee.evaluators import CustomRubric
from referee.record import CaseStatus
from referee.report.store import load_run
from referee.report.writers import write_reports

CASES = 200
IMAGES = [picture(480, 360, seed=seed) for seed in range(4)]


def sent_images(body: dict) -> list[bytes]:
    """The PNG images of an OpenAI Chat Completions request, read in its own format only."""
    found = sent_media(body, "openai", "chat")
    assert {media_type for media_type, _ in found} <= {"image/png"}
    return [data for _, data in found]


def write_case_file(folder, count: int = CASES):
    """A YAML case file whose cases name their screenshots by paths relative to it; the four
    distinct pictures are shared by the cases."""
    shots = folder / "shots"
    shots.mkdir(parents=True)
    for index, data in enumerate(IMAGES):
        (shots / f"screen-{index}.png").write_bytes(data)
    cases = [{"input": [f"Which screen is this? ({i})", {"image": f"shots/screen-{i % 4}.png"}],
              "expected_output": f"screen {i % 4}"} for i in range(count)]
    path = folder / "cases.yaml"
    path.write_text(yaml.safe_dump({"eval_set_id": "screens", "eval_cases": cases}))
    return path


def answer(parts) -> str:
    return f"It is {parts[0].text.split()[-1]}"


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """200 image cases from a case file, judged by a rubric through the OpenAI SDK."""
    from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

    root = tmp_path_factory.mktemp("case-runs")
    monkeypatch = pytest.MonkeyPatch()
    with ScriptedJudgeServer(reply="Yes") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
        try:
            eval_set = EvalSet.load(write_case_file(root / "suite"))
            suite = EvalSuite("screens").add_cases(eval_set.cases)
            suite.add_evaluators(CustomRubric([("Does the answer name the screen?", True)],
                                              judge=server.judge_config(provider="openai",
                                                                        model="gpt-4.1")))
            report = suite.run(answer, verbose=False, runs_dir=root / "runs")
            requests = list(server.requests)
        finally:
            monkeypatch.undo()
    return report, root / "runs" / report.run_id, requests, eval_set


def test_each_judge_request_carries_its_cases_image_in_openais_format(judged_run):
    report, _, requests, eval_set = judged_run
    assert report.total == CASES and not report.errors
    by_case = {}
    for request in requests:
        images = sent_images(request.body)
        if "Which screen is this?" in request.prompt:
            number = int(request.prompt.split("Which screen is this? (")[1].split(")")[0])
            by_case[number] = images
    assert sorted(by_case) == list(range(CASES))
    assert all(images == [IMAGES[number % 4]] for number, images in by_case.items())
    # The paths were read relative to the case file, and the ids do not depend on them.
    assert eval_set.cases[5].input[1].path == "shots/screen-1.png"


def test_cases_jsonl_stays_small_and_each_image_is_stored_once(judged_run):
    _, run_dir, _, eval_set = judged_run
    blobs = sorted(p for p in (run_dir / "blobs").rglob("*") if p.is_file())
    assert sorted(p.read_bytes() for p in blobs) == sorted(IMAGES)
    lines = (run_dir / "cases.jsonl").read_bytes().splitlines()
    assert len(lines) == CASES
    assert max(len(line) for line in lines) < 2_000 < min(len(i) for i in IMAGES)
    # Lines are written as cases finish: case 7's is found by its index.
    stored = next(line for line in map(json.loads, lines) if line["index"] == 7)["case"]["input"][1]
    assert "data" not in stored and stored["path"] == "shots/screen-3.png"
    again = load_run(run_dir)
    case = next(c for c in again.cases if c.case_input == "Which screen is this? (7)").case
    assert case.eval_id == eval_set.cases[7].eval_id
    (image,) = case.media
    assert image.data is None and image.sha256 == eval_set.cases[3].media[0].sha256


def test_the_report_of_the_run_has_a_thumbnail_per_case_within_its_budget(judged_run,
                                                                         tmp_path):
    _, run_dir, _, _ = judged_run
    written = write_reports(load_run(run_dir), run_dir, "html", console=None)
    html = written["html"].read_text(encoding="utf-8")
    assert html.count('<img src="data:image/') == CASES
    assert len(html.encode()) < _gallery.THUMBNAIL_BUDGET + 1_000_000
    assert base64.b64encode(IMAGES[0]).decode()[:200] not in html  # thumbnails, not originals
    with report_in_chromium(written["html"], tmp_path, "#case-3") as (_, decoded):
        assert decoded == CASES


def test_a_resumed_and_a_rescored_run_show_the_judge_the_stored_images(
        tmp_path, openai_judge_server):
    server = openai_judge_server("Yes")
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    cases = EvalSet.load(write_case_file(tmp_path / "suite", count=6)).cases

    def suite() -> EvalSuite:
        return EvalSuite("screens").add_cases(cases).add_evaluators(
            CustomRubric([("Does the answer name the screen?", True)], judge=judge))

    def flaky(parts):
        if parts[0].text.endswith("(4)"):
            raise RuntimeError("the model was down")
        return answer(parts)

    first = suite().run(flaky, verbose=False, runs_dir=tmp_path / "runs")
    run_dir = tmp_path / "runs" / first.run_id
    assert [c.status for c in first.cases].count(CaseStatus.MODEL_ERROR) == 1

    # Resumed: the stored cases (their images kept by hash) are the same cases as the file's,
    # so they are kept, and the errored one runs again with its image.
    server.reset_record()
    resumed = suite().run(answer, verbose=False, runs_dir=tmp_path / "runs", resume=run_dir,
                          retry_errors=True)
    assert resumed.total == 6 and not resumed.errors
    assert {tuple(sent_images(r.body)) for r in server.requests
            if "(4)" in r.prompt} == {(IMAGES[0],)}

    # Re-scored: the judge is shown each stored case's image, read back from blobs/.
    server.reset_record()
    _prepare._PREPARED.clear()  # as a new process re-scoring the stored run would start

    def never(parts):
        raise AssertionError("a re-scored run does not call the model")

    suite().run(never, verbose=False, runs_dir=tmp_path / "runs", resume=run_dir, rescore=True)
    judged = [r for r in server.requests if "Which screen is this?" in r.prompt]
    assert len({r.prompt for r in judged}) == 6
    for request in judged:
        number = int(request.prompt.split("Which screen is this? (")[1].split(")")[0])
        assert sent_images(request.body) == [IMAGES[number % 4]]


def test_an_oversized_pdf_in_a_case_file_errors_that_case_alone_in_one_line(
        tmp_path, openai_judge_server):
    from content_samples import pdf

    server = openai_judge_server("Yes")
    folder = tmp_path / "suite"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "manual.pdf").write_bytes(pdf(101))
    (folder / "docs" / "form.pdf").write_bytes(pdf(2))
    (folder / "cases.jsonl").write_text(
        json.dumps({"input": ["Summarise", {"pdf": "docs/manual.pdf"}], "name": "manual"}) + "\n"
        + json.dumps({"input": ["Summarise", {"pdf": "docs/form.pdf"}], "name": "form"}) + "\n")
    suite = EvalSuite("docs").add_cases(EvalSet.load(folder / "cases.jsonl").cases)
    suite.add_evaluators(CustomRubric([("Is it a summary?", True)],
                                      judge=server.judge_config(provider="openai",
                                                                model="gpt-4.1")))
    report = suite.run(lambda parts: "A summary.", verbose=False, runs_dir=tmp_path / "runs")
    by_name = {c.name: c for c in report.cases}
    (result,) = by_name["manual"].criterion_results
    assert by_name["manual"].status.is_error and "\n" not in str(result.error)
    assert str(result.error).endswith(
        "document docs/manual.pdf has 101 pages; OpenAI takes PDFs up to 100 pages")
    assert by_name["form"].status == CaseStatus.PASSED


def test_a_judge_without_vision_is_refused_before_a_case_files_image_cases_run(
        tmp_path, openai_judge_server):
    from referee.content import ContentError

    server = openai_judge_server("Yes")
    cases = EvalSet.load(write_case_file(tmp_path / "suite", count=3)).cases
    suite = EvalSuite("blind").add_cases(cases).add_evaluators(CustomRubric(
        [("Does the answer name the screen?", True)],
        judge=server.judge_config(provider="openai", model="gpt-3.5-turbo")))
    with pytest.raises(ContentError) as refused:
        suite.run(answer, verbose=False, runs_dir=tmp_path / "runs")
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(
        "criterion 'custom_rubric': judge openai/gpt-3.5-turbo takes text only, and case "
        "'Which screen is this? (0)' holds images")
    assert server.request_count == 0 and not (tmp_path / "runs").exists()
