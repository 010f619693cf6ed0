"""Pairwise judges see the images: through the official SDKs against the scripted judge server,
each provider's recorded request holds the case's image and each response's images in its own
format, each group under the label of the response it is shown as, swapped with the order; a
pair that differs only in its images is judged; the reply cache keys the images by content;
``referee compare --judge`` reads a stored run's images back from its blobs/."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from content_samples import picture
from test_content_judged import JUDGES

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.cli import main
from referee.content import ImagePart, _prepare
from referee.pairwise import PairwiseJudge
from referee.pairwise._media import CASE_LABEL
from referee.pairwise._store import ComparisonFile, StoredPair, output_hash
from referee.testing import DUMMY_API_KEY, ScriptedBatchService

CASE_IMAGE = picture(400, 300, seed=21)
IMAGE_A = picture(320, 240, seed=22)
IMAGE_B = picture(320, 240, seed=23)
TEXT_A, TEXT_B = "Chart A attached.", "Chart B attached."
ONE = "Images and documents of RESPONSE 1:"
TWO = "Images and documents of RESPONSE 2:"


def winner(which: str) -> str:
    return json.dumps({"reason": "judged", "winner": which})


def sent(body: dict[str, Any], provider: str, api_style: str) -> list[Any]:
    """The user content of a request in order, read in the provider's own format only: each
    text as a str, each image as (media type, bytes)."""
    def from_url(url: str) -> tuple[str, bytes]:
        head, _, payload = url.partition(",")
        return head[5:].split(";")[0], base64.b64decode(payload)

    found: list[Any] = []
    if provider == "openai" and api_style == "chat":
        for item in body["messages"][-1]["content"]:
            found.append(item["text"] if item["type"] == "text"
                         else from_url(item["image_url"]["url"]))
    elif provider == "openai":
        for item in body["input"][0]["content"]:
            found.append(item["text"] if item["type"] == "input_text"
                         else from_url(item["image_url"]))
    elif provider == "anthropic":
        for block in body["messages"][0]["content"]:
            found.append(block["text"] if block["type"] == "text" else
                         (block["source"]["media_type"], base64.b64decode(block["source"]["data"])))
    else:
        for part in body["contents"][0]["parts"]:
            blob = part.get("inlineData") or part.get("inline_data")
            found.append(part["text"] if blob is None else
                         (blob.get("mimeType", blob.get("mime_type")),
                          base64.urlsafe_b64decode(blob["data"])))
    return found


def png(data: bytes) -> tuple[str, bytes]:
    return ("image/png", data)


def shown_first(request_text: str) -> str:
    """Which output the request shows as RESPONSE 1 (read from its material)."""
    first = request_text.split("RESPONSE 1", 1)[1].split("RESPONSE 2", 1)[0]
    return "a" if TEXT_A in first else "b"


def labelled_media(content: list[Any]) -> list[Any]:
    """The labels and images of a request: all between the material (the user input and both
    responses' text) and the task."""
    assert isinstance(content[0], str) and "<<<BEGIN RESPONSE 2" in content[0]
    assert isinstance(content[-1], str) and "Which one better meets" in content[-1]
    return content[1:-1]


def assert_swapped_with_their_labels(requests: list[Any], provider: str, api_style: str,
                                     *, count: int = 2) -> None:
    """Each request shows the case's image, then the image of the output shown first under
    RESPONSE 1's label and the other's under RESPONSE 2's; both orders were asked."""
    orders = []
    for request in requests:
        content = sent(request.body, provider, api_style)
        first = shown_first("".join(item for item in content if isinstance(item, str)))
        pictures = (IMAGE_A, IMAGE_B) if first == "a" else (IMAGE_B, IMAGE_A)
        assert labelled_media(content) == [CASE_LABEL, png(CASE_IMAGE), ONE, png(pictures[0]),
                                           TWO, png(pictures[1])]
        orders.append(first)
    assert len(orders) == count and sorted(set(orders)) == ["a", "b"]


def pictured_case() -> EvalCase:
    return EvalCase(input="Which chart shows the quarterly sales better?", eval_id="charts",
                    metadata={"brief": ImagePart(data=CASE_IMAGE, path="brief.png")})


def output(text: str, image: bytes | None) -> ExecutionResult:
    return ExecutionResult(actual_response=text,
                           outputs=[ImagePart(data=image)] if image is not None else [])


@pytest.mark.parametrize(("provider", "api_style", "model"), JUDGES)
async def test_a_pair_shows_the_case_image_then_each_responses_images_swapped_with_the_order(
        server, provider, api_style, model):
    server.set_reply(winner("1"))
    judge = server.judge_config(provider=provider, model=model, api_style=api_style)
    verdict = await PairwiseJudge("The chart is clearer.", judge=judge).compare(
        pictured_case(), output(TEXT_A, IMAGE_A), output(TEXT_B, IMAGE_B))
    assert verdict.preferred == "tie" and verdict.position_consistent is False
    assert len(server.requests) == 2
    assert_swapped_with_their_labels(server.requests, provider, api_style)


async def test_a_response_without_images_is_named_as_holding_none(server):
    server.set_reply(winner("2"))
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    await PairwiseJudge("The chart is clearer.", judge=judge, both_orders=False).compare(
        "Draw the sales chart.", output(TEXT_A, None), output(TEXT_B, IMAGE_B))
    (request,) = server.requests
    assert labelled_media(sent(request.body, "openai", "chat")) == [
        "RESPONSE 1 holds no images or documents.", TWO, png(IMAGE_B)]


async def test_a_text_only_pair_sends_no_parts(server):
    server.set_reply(winner("1"))
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    await PairwiseJudge("Correct.", judge=judge, both_orders=False).compare(
        "What is 2 + 2?", "4", "5")
    (request,) = server.requests
    assert isinstance(request.body["messages"][-1]["content"], str)


async def test_outputs_with_the_same_text_and_other_images_are_judged_not_tied(
        server):
    server.set_reply(winner("2"))
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    pairwise = PairwiseJudge("The chart is clearer.", judge=judge)
    other = await pairwise.compare(pictured_case(), output(TEXT_A, IMAGE_A),
                                   output(TEXT_A, IMAGE_B))
    assert other.reason != "identical outputs" and server.request_count == 2

    same = await pairwise.compare(
        pictured_case(), ExecutionResult(actual_response=TEXT_A,
                                         outputs=[ImagePart(data=IMAGE_A, path="a/one.png")]),
        ExecutionResult(actual_response=TEXT_A,
                        outputs=[ImagePart(data=IMAGE_A, path="b/renamed.png")]))
    assert same.reason == "identical outputs" and same.orders == ()
    assert server.request_count == 2  # the same text and image (by content): not asked


async def test_the_reply_cache_keys_each_pairs_images_by_content(
        server, reply_cache_in_tmp_path):
    from pydantic import SecretStr

    server.set_reply(winner("1"))
    judge = server.judge_config(provider="openai", model="gpt-4.1", cache=True,
                                api_key=SecretStr(DUMMY_API_KEY))
    pairwise = PairwiseJudge("The chart is clearer.", judge=judge)
    first = await pairwise.compare(pictured_case(), output(TEXT_A, IMAGE_A),
                                   output(TEXT_B, IMAGE_B))
    again = await pairwise.compare(pictured_case(), output(TEXT_A, IMAGE_A),
                                   output(TEXT_B, IMAGE_B))
    other = await pairwise.compare(pictured_case(), output(TEXT_A, IMAGE_A),
                                   output(TEXT_B, picture(320, 240, seed=24)))
    assert [o.cached for o in first.orders] == [False, False]
    assert [o.cached for o in again.orders] == [True, True]
    assert [o.cached for o in other.orders] == [False, False]  # the same text, another image
    assert server.request_count == 4


def test_a_pairwise_criterion_in_a_run_labels_the_reference_and_the_output_once(
        server, tmp_path):
    """In a run the judging scope holds the case's and the output's images; the pairwise
    criterion names its own parts, so each is shown once, under its side's label."""
    server.set_reply(winner("2"))
    judge = server.judge_config(provider="openai", model="gpt-4.1", api_style="responses")
    case = pictured_case().model_copy(update={"expected_output": "Chart A attached."})
    suite = EvalSuite("charts").add_case(case)
    suite.add_evaluators(PairwiseJudge("The chart is clearer.", judge=judge))
    report = suite.run(lambda prompt: output(TEXT_B, IMAGE_B), verbose=False, runs_dir=tmp_path)
    assert report.cases[0].criterion_results[0].score == 0.5  # "2" in both orders: a tie
    media = {shown_first(r.prompt): labelled_media(sent(r.body, "openai", "responses"))
             for r in server.requests}
    assert media == {
        "a": [CASE_LABEL, png(CASE_IMAGE), "RESPONSE 1 holds no images or documents.", TWO,
              png(IMAGE_B)],
        "b": [CASE_LABEL, png(CASE_IMAGE), ONE, png(IMAGE_B),
              "RESPONSE 2 holds no images or documents."]}


# --- referee compare --judge on stored runs ----------------------------------------------------

CASES = [EvalCase(input=f"Plot series {i}.", eval_id=f"plot-{i}",
                  metadata={"data": ImagePart(data=CASE_IMAGE, path="data.png")})
         for i in range(3)]


def stored_run(tmp_path: Path, name: str, text: str, image: bytes) -> Path:
    def model(prompt: str) -> ExecutionResult:
        return output(text, image)

    runs = tmp_path / name
    EvalSuite(name).add_cases(CASES).run(model, verbose=False, runs_dir=runs)
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture
def two_image_runs(tmp_path) -> tuple[Path, Path]:
    a = stored_run(tmp_path, "a", TEXT_A, IMAGE_A)
    b = stored_run(tmp_path, "b", TEXT_B, IMAGE_B)
    for run in (a, b):  # the stored cases keep only the images' hashes; the bytes are blobs
        lines = (run / "cases.jsonl").read_text()
        assert base64.b64encode(IMAGE_A)[:40].decode() not in lines
        assert base64.b64encode(IMAGE_B)[:40].decode() not in lines
        assert (run / "blobs").is_dir()
    _prepare._PREPARED.clear()  # as a new process comparing the stored runs would start
    return a, b


def test_compare_judge_restores_each_runs_images_from_its_blobs(
        server, two_image_runs, tmp_path, capsys):
    a, b = two_image_runs
    server.set_reply(winner("2"))
    code = main(["compare", str(a), str(b), "--judge", "anthropic/claude-sonnet-4-5",
                 "--save", str(tmp_path / "pairwise.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "B won 0, tied 3, lost 0 of 3 judged pair(s)" in out  # "2" in both orders
    assert_swapped_with_their_labels(server.requests, "anthropic", "chat", count=6)
    # The saved comparison names what each pair showed by hash, never by bytes.
    saved = json.loads((tmp_path / "pairwise.json").read_text())
    media = saved["pairs"][0]["media"]
    assert [[item["sha256"] for item in media[side]] for side in ("case", "a", "b")] == [
        [ImagePart(data=data).sha256] for data in (CASE_IMAGE, IMAGE_A, IMAGE_B)]
    assert media["case"][0]["path"] == "data.png" and media["b"][0]["media_type"] == "image/png"
    assert "data" not in media["a"][0] and base64.b64encode(IMAGE_A)[:40].decode() not in (
        tmp_path / "pairwise.json").read_text()

    # Asked again, every pair is taken from the stored comparison (same text, same images).
    server.reset_record()
    assert main(["compare", str(a), str(b), "--judge", "anthropic/claude-sonnet-4-5"]) == 0
    assert server.request_count == 0


def test_a_pair_whose_image_blob_is_missing_is_a_judge_error_and_the_others_are_judged(
        server, two_image_runs, capsys):
    a, b = two_image_runs
    server.set_reply(winner("2"))
    shutil.rmtree(b / "blobs")
    # Run A keeps the case's image; B's output images are gone: every pair names the blob.
    code = main(["compare", str(a), str(b), "--judge", "openai/gpt-4.1", "--json"])
    pairs = json.loads(capsys.readouterr().out)["pairwise"]["pairs"]
    assert code != 0 and server.request_count == 0
    assert {p["status"] for p in pairs} == {"judge_error"}
    reason = pairs[0]["reason"]
    assert reason.startswith("JUDGE_ERROR: image ") and "\n" not in reason
    assert "is stored by hash only and its bytes are in no run's blobs/" in reason


def test_a_stored_pair_is_reused_only_over_the_same_images():
    text = "Chart attached."
    assert output_hash((text, ())) == output_hash((text, ()))
    assert output_hash((text, ("sha256:1",))) != output_hash((text, ("sha256:2",)))
    assert output_hash((text, ("sha256:1",))) != output_hash((text, ()))


def test_a_comparison_stored_before_images_is_still_reused(tmp_path):
    """A comparison stored before images hashed each output's text alone: a text-only pair
    hashes the same way now."""
    stored = ComparisonFile.open(tmp_path, {"key": "k", "run_a": "a", "run_b": "b",
                                            "judge_provider": "openai", "judge_model": "m",
                                            "created_at": 0.0})
    old = hashlib.sha256(b"four").hexdigest()
    stored.pairs["p"] = StoredPair({"pair_key": "p", "status": "b", "verdict": {},
                                    "hash_a": old, "hash_b": old})
    assert stored.reusable("p", ("four", ()), ("four", ())) is not None
    assert stored.reusable("p", ("four", ("sha256:1",)), ("four", ())) is None


# --- by batch API --------------------------------------------------------------------------------

@pytest.mark.parametrize(("provider", "api_style", "model"), JUDGES)
async def test_a_pair_judged_by_batch_api_carries_the_images_in_each_batch_item(
        isolated_judge, monkeypatch, provider, api_style, model):
    monkeypatch.setenv("REFEREE_BATCH_QUIET_S", "0.25")
    monkeypatch.setenv("REFEREE_BATCH_FIRST_POLL_S", "0.02")
    monkeypatch.setenv("REFEREE_BATCH_MAX_POLL_S", "0.05")
    with ScriptedBatchService(reply=winner("1"), processing_s=0.05) as service:
        judge = service.judge_config(provider, model, api_style=api_style)
        await PairwiseJudge("The chart is clearer.", judge=judge).compare(
            pictured_case(), output(TEXT_A, IMAGE_A), output(TEXT_B, IMAGE_B))
        assert service.items_received == 2
        assert_swapped_with_their_labels(service.requests, provider, api_style)


def test_compare_judge_batch_api_sends_the_stored_images_in_the_batch_file(
        isolated_judge, monkeypatch, two_image_runs, capsys):
    a, b = two_image_runs
    monkeypatch.setenv("REFEREE_BATCH_QUIET_S", "0.25")
    monkeypatch.setenv("REFEREE_BATCH_FIRST_POLL_S", "0.02")
    monkeypatch.setenv("REFEREE_BATCH_MAX_POLL_S", "0.05")
    with ScriptedBatchService(reply=winner("1"), processing_s=0.05) as service:
        monkeypatch.setenv("OPENAI_BASE_URL", service.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
        code = main(["compare", str(a), str(b), "--judge", "openai/gpt-4.1",
                     "--judge-batch-api"])
        _, err = capsys.readouterr()
        assert code == 0, err
        assert service.batches_created >= 1 and service.items_received == 6
        assert_swapped_with_their_labels(service.requests, "openai", "chat", count=6)


# --- the pairwise page ---------------------------------------------------------------------------

def test_the_pairwise_page_shows_each_pairs_images_side_by_side_in_chromium(
        server, two_image_runs, tmp_path, capsys):
    from chromium_cdp import Browser

    a, b = two_image_runs
    server.set_reply(winner("2"))
    page = tmp_path / "pairwise.html"
    code = main(["compare", str(a), str(b), "--judge", "openai/gpt-4.1", "--html", str(page)])
    assert code == 0, capsys.readouterr().err
    text = page.read_text()
    # Inline thumbnails (the page works offline); the full images are linked beside the runs.
    assert text.count('<div class="media-a">') == text.count('<div class="media-b">') == 3
    assert text.count('<div class="media-case">') == 3
    blob_b = ImagePart(data=IMAGE_B).sha256
    assert f"{b.resolve().as_uri()}/blobs/{blob_b[:2]}/{blob_b}" in text
    assert base64.b64encode(IMAGE_B)[:40].decode() not in text  # thumbnails, not the files
    with Browser(tmp_path) as browser:
        browser.call("Page.navigate", url=page.as_uri())  # a page without scripts
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector("
                         "'#pair-2')")
        decoded = browser.wait_for(
            "Array.from(document.querySelectorAll('#pair-0 figure.media img'))"
            ".filter(img => img.complete && img.naturalWidth > 0).length")
        assert decoded == 3  # the case's image, A's and B's
        sides = browser.evaluate(
            "['.media-a', '.media-b'].map(s => { const r = document.querySelector("
            "'#pair-0 ' + s + ' img').getBoundingClientRect(); return [r.left, r.width]; })")
        (left_a, width_a), (left_b, width_b) = sides
        assert left_a < left_b and 0 < width_a <= 160 and 0 < width_b <= 160


def test_the_pairwise_page_keeps_its_thumbnails_within_one_reports_budget(
        server, two_image_runs, monkeypatch):
    from referee.pairwise import _html, compare_runs
    from referee.pairwise._html import ComparedRuns, render_pairwise_html
    from referee.store import load_run

    server.set_reply(winner("2"))
    run_a, run_b = (load_run(str(run)) for run in two_image_runs)
    judged = compare_runs(run_a, run_b, "The chart is clearer.",
                          judge=server.judge_config(provider="openai", model="gpt-4.1"))
    monkeypatch.setattr(_html, "THUMBNAIL_BUDGET", 0)  # each run's share of it: none
    page = render_pairwise_html(judged, compared=ComparedRuns(run_a, run_b))
    assert '<img src="data:' not in page
    assert page.count("past the report&#39;s image budget: open the file") == 9


def test_compare_refuses_a_judge_without_vision_before_asking_anything(
        server, two_image_runs, capsys):
    a, b = two_image_runs
    code = main(["compare", str(a), str(b), "--judge", "openai/gpt-3.5-turbo"])
    err = capsys.readouterr().err
    assert code != 0 and server.request_count == 0
    assert err.strip().splitlines()[-1] == (
        "referee: error: compare: judge openai/gpt-3.5-turbo takes text only, and pair "
        "'Plot series 0.' holds images (expected a judge model with vision, such as gpt-4.1, "
        "claude-sonnet-4-5 or gemini-2.5-flash)")
    assert not (b / "comparisons").exists()


def test_each_member_of_a_judge_panel_sees_the_pairs_images(server, two_image_runs):
    from referee.pairwise import compare_runs
    from referee.store import load_run

    server.set_reply(winner("2"))
    run_a, run_b = (load_run(str(run)) for run in two_image_runs)
    members = [server.judge_config(provider="openai", model="gpt-4.1"),
               server.judge_config(provider="anthropic", model="claude-sonnet-4-5")]
    judged = compare_runs(run_a, run_b, "The chart is clearer.", judge=members)
    assert judged.judge_answered == 3
    assert sorted(r.provider for r in server.requests) == ["anthropic"] * 6 + ["openai"] * 6
    for provider in ("openai", "anthropic"):
        assert_swapped_with_their_labels(
            [r for r in server.requests if r.provider == provider], provider, "chat", count=6)


def test_compare_models_shows_the_judge_each_models_images(server, tmp_path):
    from referee.pairwise import compare_models

    server.set_reply(winner("1"))
    judged = compare_models(CASES[:1], lambda prompt: output(TEXT_A, IMAGE_A),
                            lambda prompt: output(TEXT_B, IMAGE_B), "The chart is clearer.",
                            judge=server.judge_config(provider="google",
                                                      model="gemini-2.5-flash"),
                            runs_dir=tmp_path)
    assert judged.win_rate.ties == 1 and server.request_count == 2
    for request in server.requests:
        media = labelled_media(sent(request.body, "google", "chat"))
        assert media[3] == png(IMAGE_A if shown_first(request.prompt) == "a" else IMAGE_B)


def test_a_rescored_run_shows_the_pairwise_criterion_its_stored_images(
        server, tmp_path):
    server.set_reply(winner("2"))
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    case = pictured_case().model_copy(update={"expected_output": TEXT_A})
    suite = EvalSuite("charts").add_case(case)
    suite.add_evaluators(PairwiseJudge("The chart is clearer.", judge=judge))
    first = suite.run(lambda prompt: output(TEXT_B, IMAGE_B), verbose=False, runs_dir=tmp_path)
    run_dir = tmp_path / first.run_id
    server.reset_record()
    _prepare._PREPARED.clear()  # as a new process re-scoring the stored run would start

    def never(prompt: str) -> ExecutionResult:
        raise AssertionError("a re-scored run does not call the model")

    suite.run(never, verbose=False, runs_dir=tmp_path, resume=run_dir, rescore=True)
    assert server.request_count == 2
    for request in server.requests:
        media = labelled_media(sent(request.body, "anthropic", "chat"))
        assert png(CASE_IMAGE) in media and png(IMAGE_B) in media and len(media) == 5


def test_the_viewers_compare_page_judges_image_runs_and_shows_each_pairs_images(
        server, tmp_path):
    from chromium_cdp import Browser
    from test_content_report import _viewer_get
    from test_viewer_pairwise import compare_url, settle

    from referee import configure
    from referee.report.viewer import start_viewer

    server.set_reply(winner("2"))
    configure(server.judge_config(provider="openai", model="gpt-4.1"))
    runs = tmp_path / "runs"
    made = []
    for name, text, image in (("a", TEXT_A, IMAGE_A), ("b", TEXT_B, IMAGE_B)):
        report = EvalSuite(name).add_cases(CASES).run(
            lambda prompt, text=text, image=image: output(text, image), verbose=False,
            runs_dir=runs)
        made.append(runs / report.run_id)
    a, b = made
    with start_viewer(None, runs) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        # Before any judging, the regressions table shows both runs' images side by side.
        sides = page.evaluate(
            "Array.from(document.querySelectorAll('.media-pair')).map(p => Array.from("
            "p.children).map(side => Array.from(side.querySelectorAll('a'))"
            ".map(a => a.getAttribute('href'))))")
        hashes = {name: ImagePart(data=data).sha256
                  for name, data in (("case", CASE_IMAGE), ("a", IMAGE_A), ("b", IMAGE_B))}
        assert sides == [[[f"/run/{a.name}/blob/{hashes['case']}",
                           f"/run/{a.name}/blob/{hashes['a']}"],
                          [f"/run/{b.name}/blob/{hashes['case']}",
                           f"/run/{b.name}/blob/{hashes['b']}"]]] * 3
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise .pair') !== null")
        assert_swapped_with_their_labels(server.requests, "openai", "chat", count=6)
        decoded = settle(page, "Array.from(document.querySelectorAll("
                               "'#pairwise .media-b figure.media img'))"
                               ".filter(img => img.complete && img.naturalWidth > 0).length")
        assert decoded == 3
        blob_b = ImagePart(data=IMAGE_B).sha256
        href = page.evaluate("document.querySelector('#pairwise .media-b a').getAttribute('href')")
        assert href == f"/run/{b.name}/blob/{blob_b}"
        status, body, _ = _viewer_get(handle, href)
        assert status == 200 and body == IMAGE_B



def test_the_labels_between_the_images_count_in_the_requests_token_estimate():
    from referee.judge import estimate_tokens
    from referee.judge.client import estimate_request_tokens
    from referee.judge.providers import JudgeRequest
    from referee.pairwise._media import PairMedia

    media = PairMedia(case=(ImagePart(data=CASE_IMAGE),), a=(ImagePart(data=IMAGE_A),))
    parts = tuple(media.parts("b", ("RESPONSE 1", "RESPONSE 2")))
    plain = JudgeRequest(model="m", prompt="p" * 40, system=None, json_mode=False,
                         temperature=0.0, max_tokens=4, timeout=30.0, api_style="chat",
                         media_tokens=500)
    shown = JudgeRequest(**{**plain.__dict__, "parts": parts})
    labels = [p.text for p in parts if not isinstance(p, ImagePart)]
    assert labels == [CASE_LABEL, "RESPONSE 1 holds no images or documents.",
                      "Images and documents of RESPONSE 2:"]
    assert estimate_request_tokens(shown) == (estimate_request_tokens(plain)
                                              + sum(estimate_tokens(t) for t in labels))


def test_identical_pairs_need_neither_their_blobs_nor_a_judge_with_vision(
        server, tmp_path, capsys):
    a = stored_run(tmp_path, "a", TEXT_A, IMAGE_A)
    b = stored_run(tmp_path, "b", TEXT_A, IMAGE_A)  # the same text and image as A
    shutil.rmtree(a / "blobs")
    shutil.rmtree(b / "blobs")
    code = main(["compare", str(a), str(b), "--judge", "openai/gpt-3.5-turbo", "--json"])
    pairs = json.loads(capsys.readouterr().out)["pairwise"]["pairs"]
    assert code == 0 and server.request_count == 0
    assert [p["reason"] for p in pairs] == ["identical outputs"] * 3


def test_against_the_reference_its_images_are_side_as_not_the_cases():
    """A case holds its reference answer's images (``expected_media``, and a turn's copy of
    them); judged against the reference, they are side A's."""
    from referee.pairwise._media import PairMedia

    reference = ImagePart(data=IMAGE_A, path="expected/chart.png")
    case = EvalCase(input="Draw it.", metadata={"brief": ImagePart(data=CASE_IMAGE),
                                                "turn_copy": ImagePart(data=IMAGE_A)})
    media = PairMedia.of(case, None, output(TEXT_B, IMAGE_B), reference=[reference])
    assert [p.data for p in media.case] == [CASE_IMAGE]
    assert [p.data for p in media.a] == [IMAGE_A] and [p.data for p in media.b] == [IMAGE_B]
    # Without a reference (two runs' outputs) every image the case holds is the case's.
    both = PairMedia.of(case, output(TEXT_A, None), output(TEXT_B, IMAGE_B))
    assert [p.data for p in both.case] == [CASE_IMAGE, IMAGE_A] and both.a == ()
