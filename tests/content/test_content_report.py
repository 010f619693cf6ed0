"""People see a run's images: thumbnails in the self-contained report (inline data: URLs, so
it works offline), within a size budget, with a link to the stored file past it; the
metadata block shows each part's hash and size, never its base64."""

from __future__ import annotations

import base64

import pytest
from content_samples import pdf, picture, report_in_chromium

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.content import DocumentPart, ImageCheck, ImagePart
from referee.content import _gallery as _media
from referee.report.html import render_html
from referee.report.store import load_run
from referee.report.writers import write_reports

CASES = 200


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    """A stored run of 200 cases, each output holding a different picture."""
    runs = tmp_path_factory.mktemp("runs")
    suite = EvalSuite("gallery").add_cases(
        [EvalCase(input=f"draw {i}") for i in range(CASES)])
    suite.add_evaluators(ImageCheck(media_types=["image/png"]))

    def painter(prompt: str) -> ExecutionResult:
        seed = int(prompt.split()[-1])
        return ExecutionResult(actual_response="drawn", metadata={
            "picture": ImagePart(data=picture(480, 360, seed=seed), path=f"out/{seed}.png")})

    report = suite.run(painter, verbose=False, runs_dir=runs)
    assert report.passed == CASES
    return next(p for p in runs.iterdir() if p.is_dir())


def test_the_report_of_200_image_cases_has_thumbnails_and_stays_under_budget(image_run):
    html = render_html(load_run(image_run))
    assert html.count('<img src="data:image/') == CASES
    assert len(html.encode()) < _media.THUMBNAIL_BUDGET + 1_000_000
    originals = [base64.b64encode(picture(480, 360, seed=s)).decode()[:200] for s in (0, 9)]
    assert not any(original in html for original in originals)
    assert 'href="blobs/' in html and "img-src data:" in html


def test_past_the_budget_images_are_links_to_the_stored_file(image_run, monkeypatch):
    monkeypatch.setattr(_media, "THUMBNAIL_BUDGET", 20_000)
    html = render_html(load_run(image_run))
    inline = html.count('<img src="data:image/')
    assert 0 < inline < 10
    assert html.count("past the report&#39;s image budget: open the file") == CASES - inline


def test_metadata_shows_a_part_by_hash_and_size_not_base64(tmp_path):
    document = pdf(2)
    suite = EvalSuite("forms").add_case(EvalCase(input="fill"))

    def filler(prompt: str) -> ExecutionResult:
        return ExecutionResult(actual_response="filled", metadata={
            "form": DocumentPart(data=document, path="claim.pdf", pages=2),
            "preview": "data:image/png;base64," + base64.b64encode(picture()).decode()})

    report = suite.run(filler, verbose=False, runs_dir=tmp_path, save=False)
    html = render_html(report)
    assert base64.b64encode(document).decode()[:100] not in html
    assert base64.b64encode(picture()).decode()[:100] not in html
    assert "claim.pdf" in html and "PDF, 2 pages" in html
    assert "of base64 not shown" in html


def test_chromium_renders_the_thumbnails_of_the_200_case_report(image_run, tmp_path):
    written = write_reports(load_run(image_run), image_run, "html", console=None)
    with report_in_chromium(written["html"], tmp_path, "#case-7") as (page, decoded):
        assert decoded == CASES
        opened = page.evaluate("document.querySelector('#case-7').open && "
                               "document.querySelector('#case-7 figure.media img')"
                               ".getBoundingClientRect().width")
        assert 0 < opened <= 160


def _viewer_get(handle, path: str) -> tuple[int, bytes, dict[str, str]]:
    import http.client

    port = handle.server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def test_the_viewer_shows_thumbnails_and_serves_the_stored_files(image_run):
    import re

    from referee.report.viewer import start_viewer

    with start_viewer(None, image_run.parent) as handle:
        status, page, _ = _viewer_get(handle, f"/run/{image_run.name}")
        assert status == 200
        text = page.decode("utf-8")
        assert text.count('<img src="data:image/') == CASES
        links = re.findall(rf'href="(/run/{image_run.name}/blob/[0-9a-f]{{64}})"', text)
        assert len(links) == CASES
        status, body, headers = _viewer_get(handle, links[0])
        assert status == 200 and headers["Content-Type"] == "image/png"
        assert body in {picture(480, 360, seed=s) for s in range(CASES)}
        status, _, _ = _viewer_get(handle, f"/run/{image_run.name}/blob/{'0' * 64}")
        assert status == 404


def test_the_viewers_labelling_page_shows_each_cases_images(tmp_path, openai_judge_server):
    from chromium_cdp import Browser

    from referee.evaluators import GEval
    from referee.report.viewer import start_viewer

    server = openai_judge_server('{"score": 8, "reason": "fine"}')
    suite = EvalSuite("to-label").add_cases([EvalCase(input=f"draw {i}") for i in range(3)])
    suite.add_evaluators(GEval(criteria="Is the drawing right?", judge=server.judge_config()))

    def painter(prompt: str) -> ExecutionResult:
        seed = int(prompt.split()[-1])
        return ExecutionResult(actual_response="drawn", metadata={
            "picture": ImagePart(data=picture(480, 360, seed=seed), path=f"out/{seed}.png")})

    report = suite.run(painter, verbose=False, runs_dir=tmp_path / "runs")
    key = report.run_id
    with start_viewer(None, tmp_path / "runs") as handle, Browser(tmp_path) as page:
        page.goto(f"{handle.base_url}/run/{key}/label")
        items = page.evaluate("document.querySelectorAll('section.item').length")
        assert items == 3
        decoded = page.wait_for(
            "Array.from(document.querySelectorAll('section.item figure.media img'))"
            ".filter(img => img.complete && img.naturalWidth > 0).length")
        assert decoded == 3
        links = page.evaluate("Array.from(document.querySelectorAll('section.item figure a'))"
                              ".map(a => a.getAttribute('href'))")
        assert all(link.startswith(f"/run/{key}/blob/") for link in links) and len(links) == 3


def test_compare_shows_both_runs_images_side_by_side(tmp_path):
    from referee.report.compare import compare_reports
    from referee.report.html import render_compare_html

    def run_with(seed_offset: int):
        suite = EvalSuite("pair").add_cases([EvalCase(input=f"draw {i}") for i in range(2)])
        suite.add_evaluators(ImageCheck(media_types=["image/png"]))

        def painter(prompt: str) -> ExecutionResult:
            seed = int(prompt.split()[-1]) + seed_offset
            return ExecutionResult(actual_response=f"drawn {seed}", metadata={
                "picture": ImagePart(data=picture(320, 240, seed=seed))})

        return load_run(tmp_path / "runs" / suite.run(
            painter, verbose=False, runs_dir=tmp_path / "runs").run_id)

    first, second = run_with(0), run_with(10)
    html = render_compare_html(compare_reports(first, second))
    assert html.count('class="side media-pair"') == 2
    assert html.count('<img src="data:image/') == 4
    blob = ImagePart(data=picture(320, 240, seed=10)).sha256
    assert f'/blobs/{blob[:2]}/{blob}"' in html and 'href="file://' in html
