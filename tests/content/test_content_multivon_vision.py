"""multivon's vision evaluators and content-bound media, as a multivon-eval 0.16-0.20 user runs
them with only the import line changed: VQAFaithfulness and DocumentGrounding through
EvalSuite, via the official SDKs against the scripted judge server, with the case's image or
PDF checked on each recorded request in the provider's own format."""

from __future__ import annotations

import base64
import json
import warnings

import pytest
from content_samples import pdf, picture, sent_media

from referee import (
    DocumentGrounding,
    EvalCase,
    EvalSuite,
    JudgeUnavailable,
    MediaArtifact,
    VQAFaithfulness,
    call_vision,
    case_media,
    media_sources,
    with_media,
)
from referee.content import ContentError, DocumentPart, ImagePart
from referee.evaluators.multimodal import read_claims, read_question_answers, read_yes_no
from referee.testing import RecordedRequest

CHART = picture(320, 200, seed=5)
CONTRACT = pdf(3)
JUDGES = [("openai", "chat", "gpt-4.1"), ("anthropic", "chat", "claude-sonnet-4-5"),
          ("google", "chat", "gemini-2.5-flash")]
CLAIMS = ["The tallest bar is red", "There are four bars"]
ANSWER = "The tallest bar is red and there are four bars."

# A 3x2 PNG and the descriptor multivon-eval 0.20.0's MediaArtifact.capture wrote for it.
MULTIVON_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAFUlEQVR4nGM8ISfHwMDAwMDAxAADABMuAQhqwGVh"
    "AAAAAElFTkSuQmCC")
MULTIVON_DESCRIPTOR = {
    "digest": "17168e488684a0f6f4820643cfd0107f0e22356a4a1dc24b2fbd909dbfd818ef",
    "media_type": "image/png",
    "probe": {"library": "Pillow", "scope": "single decoded image", "version": "13.0.0"},
    "properties": {"height": 2, "orientation": 1, "width": 3},
    "provenance": {"source": "multivon-eval 0.20.0"},
    "schema": "multivon.media/v1",
    "sha256": "a2f2872093fbe83c121d35873e7bcc2c768f55262e26072927971c9f76dd377c",
    "size_bytes": 78,
}


def vision_judge(request: RecordedRequest) -> str:
    """Answers as a vision judge would: the claims, then a verdict per claim (the second one
    unsupported), then the document questions (Q3 missed)."""
    if "JSON array" in request.prompt:
        return json.dumps(CLAIMS)
    if f"Claim: {CLAIMS[0]}" in request.prompt:
        return "Yes"
    if "Claim:" in request.prompt:
        return "No."
    if "Q1:" in request.prompt:
        return "Q1: Yes\nQ2: yes\nQ3: No"
    return "unexpected request"


def resolver_of(*contents: bytes):
    store = {MediaArtifact.capture(c, _type_of(c)).sha256: c for c in contents}
    return lambda artifact: store[artifact.sha256]


def _type_of(content: bytes) -> str:
    return "application/pdf" if content.startswith(b"%PDF") else "image/png"


def bound_case(content: bytes, question: str = "What does the chart show?") -> EvalCase:
    return with_media(EvalCase(input=question),
                      MediaArtifact.capture(content, _type_of(content),
                                            provenance={"role": "page"}))


def run(suite: EvalSuite, tmp_path, answer: str = ANSWER):
    return suite.run(lambda prompt: answer, verbose=False, runs_dir=tmp_path, concurrency=1)


def only_result(report, case_input: str):
    (case,) = [c for c in report.cases if c.case_input == case_input]
    (result,) = case.criterion_results
    return case, result


@pytest.mark.parametrize(("provider", "api_style", "model"), JUDGES)
def test_vqa_faithfulness_grades_bound_media_in_each_providers_image_format(
        server, tmp_path, provider, api_style, model):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider=provider, model=model, api_style=api_style)
    suite = EvalSuite("vision").add_case(bound_case(CHART))
    suite.add_evaluators(VQAFaithfulness(judge=judge, media_resolver=resolver_of(CHART)))
    case, result = only_result(run(suite, tmp_path), "What does the chart show?")
    assert (result.score, result.passed, result.threshold) == (0.5, False, 0.7)
    assert case.status.value == "FAILED"
    details = result.details
    assert details["protocol"] == "vision-qag/v2" and details["threshold"] == 0.7
    assert details["claims"] == CLAIMS and details["claims_response"] == json.dumps(CLAIMS)
    assert details["verdict_responses"] == ["Yes", "No."]
    assert details["media_bound"] is True
    assert details["reason"] == ("1/2 image-grounded claims verified\n"
                                 f"✓ {CLAIMS[0]}\n✗ {CLAIMS[1]}")
    # One claims request and one per claim, each showing the judge the bound image.
    assert server.request_count == 3
    for request in server.requests:
        assert request.provider == provider
        assert sent_media(request.body, provider, api_style) == [("image/png", CHART)]
    assert ANSWER in server.requests[0].prompt


@pytest.mark.parametrize(("provider", "api_style", "model"), JUDGES)
def test_document_grounding_shows_a_bound_pdf_in_each_providers_document_format(
        server, tmp_path, provider, api_style, model):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider=provider, model=model, api_style=api_style)
    suite = EvalSuite("pages").add_case(bound_case(CONTRACT, "What does clause 4 allow?"))
    suite.add_evaluators(DocumentGrounding(judge=judge, threshold=0.6,
                                           media_resolver=resolver_of(CONTRACT)))
    _, result = only_result(run(suite, tmp_path), "What does clause 4 allow?")
    assert result.score == pytest.approx(2 / 3)
    assert result.passed and result.threshold == 0.6 == result.details["threshold"]
    assert result.details["question_verdicts"] == {"Q1": True, "Q2": True, "Q3": False}
    assert result.details["verdict_response"] == "Q1: Yes\nQ2: yes\nQ3: No"
    assert result.details["media_bound"] is True
    (request,) = server.requests
    assert sent_media(request.body, provider, api_style) == [("application/pdf", CONTRACT)]
    if provider == "anthropic":
        assert [b["type"] for b in request.body["messages"][0]["content"]][0] == "document"
    if provider == "openai":
        assert request.body["messages"][-1]["content"][0]["type"] == "file"


def test_metadata_image_references_are_read_relative_to_the_current_directory_and_deprecated(
        server, tmp_path, monkeypatch):
    server.set_reply(vision_judge)
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "chart.png").write_bytes(CHART)
    monkeypatch.chdir(tmp_path)
    page = "data:application/pdf;base64," + base64.b64encode(CONTRACT).decode()
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    suite = EvalSuite("unbound").add_cases([
        EvalCase(input="by path", metadata={"image_path": "shots/chart.png"}),
        EvalCase(input="by list", metadata={"images": ["shots/chart.png", page]}),
    ]).add_evaluators(VQAFaithfulness(judge=judge))
    with pytest.warns(DeprecationWarning, match="bind them with with_media"):
        report = run(suite, tmp_path / "runs")
    for case_input, media in (("by path", [("image/png", CHART)]),
                              ("by list", [("image/png", CHART), ("application/pdf", CONTRACT)])):
        _, result = only_result(report, case_input)
        assert result.score == 0.5 and result.details["media_bound"] is False
    sent = {tuple(sent_media(r.body, "anthropic", "chat")) for r in server.requests}
    assert sent == {((("image/png", CHART),)),
                    (("image/png", CHART), ("application/pdf", CONTRACT))}


def test_referees_own_case_parts_are_graded_when_nothing_multivon_names_an_image(
        server, tmp_path):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    case = EvalCase(input="What does clause 4 allow?",
                    metadata={"contract": DocumentPart(data=CONTRACT, path="contract.pdf")})
    suite = EvalSuite("typed").add_case(case).add_evaluators(DocumentGrounding(judge=judge))
    _, result = only_result(run(suite, tmp_path), "What does clause 4 allow?")
    assert result.details["media_bound"] is False and result.score == pytest.approx(2 / 3)
    (request,) = server.requests
    assert sent_media(request.body, "openai", "chat") == [("application/pdf", CONTRACT)]


def test_a_typed_input_image_is_shown_once_though_the_input_and_its_turn_hold_it(
        server, tmp_path):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    question = "What does the chart show?"
    case = EvalCase(input=[question, ImagePart(data=CHART)])
    assert case.conversation[0].user_content == case.input  # the same image, twice over
    suite = EvalSuite("typed").add_case(case).add_evaluators(DocumentGrounding(judge=judge))
    run(suite, tmp_path)
    (request,) = server.requests
    assert sent_media(request.body, "openai", "chat") == [("image/png", CHART)]


def test_a_case_without_an_image_is_skipped_and_asks_no_judge(server, tmp_path):
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    suite = EvalSuite("none").add_case(EvalCase(input="Say hi")).add_evaluators(
        VQAFaithfulness(judge=judge), DocumentGrounding(judge=judge))
    report = run(suite, tmp_path)
    (case,) = report.cases
    assert case.status.value == "SKIPPED"
    vqa, document = case.criterion_results
    assert vqa.skipped and vqa.details["reason"] == (
        "No image provided; bind it with with_media() or supply image_url, image_path or "
        "images in case.metadata")
    assert document.skipped and document.details["reason"].startswith("No document pages")
    assert vqa.details["protocol"] == "vision-qag/v2"
    assert server.request_count == 0


def test_an_answer_with_no_claim_about_the_image_is_not_measured(server, tmp_path):
    server.set_reply("[]")
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    suite = EvalSuite("no claims").add_case(bound_case(CHART)).add_evaluators(
        VQAFaithfulness(judge=judge, media_resolver=resolver_of(CHART)))
    case, result = only_result(run(suite, tmp_path, "I cannot say."),
                               "What does the chart show?")
    assert result.skipped and case.status.value == "SKIPPED"
    assert result.details["reason"] == ("No image-grounded claims extracted; faithfulness was "
                                        "not measured")
    assert result.details["claims_response"] == "[]"
    assert result.token_usage is not None and result.token_usage.input_tokens > 0
    assert server.request_count == 1


@pytest.mark.parametrize(("evaluator", "replies", "problem"), [
    (VQAFaithfulness, {"claims": "Claims: the bar is red."}, "claims reply is not a JSON array"),
    (VQAFaithfulness, {"claims": '["a", "b", "c", "d"]'}, "lists 4 claims"),
    (VQAFaithfulness, {"claims": '["a", "a"]'}, "repeats a claim"),
    (VQAFaithfulness, {"claims": '["red bar"]', "verdict": "Yes, mostly."},
     "verdict on claim 'red bar': the verdict reply is not a single Yes or No"),
    (DocumentGrounding, {"document": "Q1: Yes\nQ2: No"}, "leaves out Q3"),
    (DocumentGrounding, {"document": "Q1: Yes\nQ1: No\nQ3: Yes"}, "answers Q1 twice"),
    (DocumentGrounding, {"document": "Q1: Yes\nQ2: Yes\nQ3: Yes\nAll good."},
     "is not 'Qn: Yes' or 'Qn: No'"),
])
def test_a_malformed_reply_is_a_judge_error_never_mined_for_a_verdict(
        server, tmp_path, evaluator, replies, problem):
    def judge_replies(request: RecordedRequest) -> str:
        if "JSON array" in request.prompt:
            return replies["claims"]
        return replies["verdict"] if "Claim:" in request.prompt else replies["document"]

    server.set_reply(judge_replies)
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    suite = EvalSuite("strict").add_cases([bound_case(CHART), EvalCase(input="Say hi")])
    suite.add_evaluators(evaluator(judge=judge, media_resolver=resolver_of(CHART)))
    report = run(suite, tmp_path)
    case, result = only_result(report, "What does the chart show?")
    assert case.status.value == "JUDGE_ERROR"
    assert problem in str(result.error) and "\n" not in str(result.error)
    assert result.details["raw_reply"]
    assert only_result(report, "Say hi")[0].status.value == "SKIPPED"


def test_bound_bytes_that_changed_error_that_case_alone_in_one_line(server, tmp_path):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    other = picture(320, 200, seed=6)
    changed = bound_case(CHART, "changed")
    kept = bound_case(other, "kept")
    store = {case_media(changed)[0].sha256: other, case_media(kept)[0].sha256: other}
    suite = EvalSuite("tampered").add_cases([changed, kept]).add_evaluators(
        VQAFaithfulness(judge=judge, media_resolver=lambda artifact: store[artifact.sha256]))
    report = run(suite, tmp_path)
    case, result = only_result(report, "changed")
    assert case.status.value == "EVALUATOR_ERROR"
    error = str(result.error)
    assert "\n" not in error and "do not match the bound content" in error
    assert case_media(changed)[0].sha256 in error
    assert only_result(report, "kept")[1].score == 0.5
    # Nothing was sent for the changed case: every request shows the kept case's image.
    assert server.request_count == 3
    assert all(sent_media(r.body, "openai", "chat") == [("image/png", other)]
               for r in server.requests)


def test_bound_media_without_a_resolver_and_bound_audio_are_refused_in_one_line(
        server, tmp_path):
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    sound = MediaArtifact.capture(b"RIFF\x24\x00\x00\x00WAVEfmt ", "audio/wav")
    suite = EvalSuite("refused").add_cases([
        bound_case(CHART, "no resolver"),
        with_media(EvalCase(input="audio"), sound),
    ]).add_evaluators(VQAFaithfulness(judge=judge))
    report = run(suite, tmp_path)
    _, unresolved = only_result(report, "no resolver")
    assert str(unresolved.error).endswith(
        "this case binds media (with_media), and the evaluator has no media_resolver to read "
        "its bytes (expected media_resolver=<a function from MediaArtifact to bytes>)")
    _, audio = only_result(report, "audio")
    assert "binds audio/wav, and vision evaluators grade images and PDF pages" in str(
        audio.error)
    assert server.request_count == 0


def test_a_text_only_judge_is_refused_before_the_run_in_one_line(server, tmp_path):
    # The bound case holds no content part, so only the evaluator says that images are graded.
    judge = server.judge_config(provider="openai", model="gpt-3.5-turbo")
    suite = EvalSuite("blind").add_cases([bound_case(CHART), EvalCase(input="Say hi")])
    suite.add_evaluators(VQAFaithfulness(judge=judge, media_resolver=resolver_of(CHART)))
    with pytest.raises(ContentError) as refused:
        run(suite, tmp_path)
    assert str(refused.value) == (
        "criterion 'vqa_faithfulness': judge openai/gpt-3.5-turbo takes text only, and the "
        "criterion grades images and PDFs (expected a judge model with vision, such as "
        "gpt-4.1, claude-sonnet-4-5 or gemini-2.5-flash)")
    assert server.request_count == 0 and not any(tmp_path.iterdir())


def test_a_text_only_judge_called_by_hand_is_refused_and_sent_nothing(server):
    judge = server.judge_config(provider="anthropic", model="claude-2.1")
    evaluator = DocumentGrounding(judge=judge, media_resolver=resolver_of(CONTRACT))
    with pytest.raises(ContentError, match="judge anthropic/claude-2.1 takes text only, and "
                                           "this criterion judges documents"):
        evaluator.evaluate(bound_case(CONTRACT), ANSWER)
    with pytest.raises(JudgeUnavailable, match="claude-2.1 takes text only"):
        call_vision("Is this a chart?", ["data:image/png;base64," + base64.b64encode(
            CHART).decode()], judge)
    assert server.request_count == 0


def test_call_vision_sends_its_sources_through_the_judge_layer(server, tmp_path,
                                                               monkeypatch):
    server.set_reply("A chart.")
    (tmp_path / "page.pdf").write_bytes(CONTRACT)
    monkeypatch.chdir(tmp_path)
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    artifact = MediaArtifact.capture(CHART, "image/png")
    sources = [artifact.data_uri(CHART), "page.pdf"]
    assert call_vision("What is this?", sources, judge, max_tokens=50) == "A chart."
    (request,) = server.requests
    assert request.max_tokens == 50 and request.prompt.endswith("What is this?")
    assert sent_media(request.body, "anthropic", "chat") == [
        ("image/png", CHART), ("application/pdf", CONTRACT)]
    with pytest.raises(ContentError, match=r"field 'sources\[0\]': image file not found"):
        call_vision("What is this?", ["missing.png"], judge)


def test_by_hand_evaluate_case_output_grades_the_bound_image(server):
    server.set_reply(vision_judge)
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    evaluator = VQAFaithfulness(judge=judge, media_resolver=resolver_of(CHART))
    result = evaluator.evaluate(bound_case(CHART), ANSWER)
    assert (result.score, result.passed) == (0.5, False)
    assert result.metadata["claims"] == CLAIMS and result.reason.startswith("1/2")
    assert evaluator.uses_llm_judge and evaluator.name == "vqa_faithfulness"


def test_a_multivon_written_descriptor_loads_verifies_and_binds():
    artifact = MediaArtifact.from_dict(MULTIVON_DESCRIPTOR)
    assert artifact.id == "urn:multivon:media:" + MULTIVON_DESCRIPTOR["digest"]
    assert artifact.media_type == "image/png" and artifact.data == MULTIVON_DESCRIPTOR
    assert artifact.verify(MULTIVON_PNG) is MULTIVON_PNG
    ours = MediaArtifact.capture(MULTIVON_PNG, "image/png",
                                 provenance={"source": "multivon-eval 0.20.0"})
    assert ours.data["properties"] == MULTIVON_DESCRIPTOR["properties"]
    assert ours.data["sha256"] == MULTIVON_DESCRIPTOR["sha256"]
    case = with_media(EvalCase(input="q"), artifact)
    assert case_media(case) == (artifact,)
    assert media_sources(case, lambda a: MULTIVON_PNG) == (
        "data:image/png;base64," + base64.b64encode(MULTIVON_PNG).decode(),)
    assert media_sources(EvalCase(input="q"), None) == ()


def test_capture_measures_images_and_pdfs_and_refuses_bad_input():
    page = MediaArtifact.capture(CONTRACT, "application/pdf")
    assert page.data["properties"] == {"pages": 3}
    assert page.data["probe"]["library"] == "pypdf"
    image = MediaArtifact.capture(CHART, "image/png", provenance={"path": "chart.png"})
    assert image.data["properties"] == {"width": 320, "height": 200, "orientation": 1}
    assert image.data["provenance"] == {"path": "chart.png"}
    # Provenance is part of identity: the same bytes in another role are another artifact.
    assert MediaArtifact.capture(CHART, "image/png").id != image.id
    with pytest.raises(ValueError, match="past max_bytes=10"):
        MediaArtifact.capture(CHART, "image/png", max_bytes=10)
    with pytest.raises(ValueError, match="unsupported media type 'image/svg\\+xml'"):
        MediaArtifact.capture(b"<svg/>", "image/svg+xml")
    with pytest.raises(ValueError, match="are PNG, not the image/jpeg"):
        MediaArtifact.capture(CHART, "image/jpeg")
    with pytest.raises(ValueError, match="do not match the bound content"):
        image.verify(picture(320, 200, seed=9))
    edited = {**MULTIVON_DESCRIPTOR, "provenance": {"source": "edited"}}
    with pytest.raises(ValueError, match="digest does not match"):
        MediaArtifact.from_dict(edited)
    with pytest.raises(ValueError, match="already has bound media"):
        with_media(with_media(EvalCase(input="q"), image), image)
    with pytest.raises(AttributeError, match="immutable"):
        image.media_type = "image/jpeg"  # type: ignore[misc]


def test_metadata_that_names_images_wrongly_is_one_line_naming_the_field(server, tmp_path):
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    suite = EvalSuite("bad").add_cases([
        EvalCase(input="not a list", metadata={"images": "chart.png"}),
        EvalCase(input="both", metadata={"image_url": "https://example.com/a.png",
                                         "image_path": "a.png"}),
        EvalCase(input="missing", metadata={"image_path": "nowhere/missing.png"}),
    ]).add_evaluators(VQAFaithfulness(judge=judge))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        report = run(suite, tmp_path)
    errors = {c.case_input: str(c.criterion_results[0].error) for c in report.cases}
    assert errors["not a list"].endswith("field 'metadata['images']': an ordered list of "
                                         "image sources, not str")
    assert "the case names both image_url and image_path" in errors["both"]
    assert errors["missing"].endswith(
        "field 'metadata['image_path']': image file not found: nowhere/missing.png")
    assert server.request_count == 0


def test_the_strict_readers_take_only_what_was_asked_for():
    assert read_claims('```json\n["a", "b"]\n```') == ["a", "b"]
    assert read_claims(" [] ") == []
    for reply in ('Here: ["a"]', '{"claims": ["a"]}', '["a", ""]', '["a", 1]'):
        with pytest.raises(ValueError):
            read_claims(reply)
    assert read_yes_no(" yes! ") is True and read_yes_no("No.") is False
    for reply in ("Yes, mostly", "Yes\nNo", "maybe", "Not really. No"):
        with pytest.raises(ValueError):
            read_yes_no(reply)
    assert read_question_answers("q2: no\nQ1: Yes.\nQ3 : YES") == {"Q1": True, "Q2": False,
                                                                    "Q3": True}


def test_the_names_import_where_multivon_users_import_them():
    import referee
    import referee.evaluators as evaluators
    from referee.compat import multivon_media, multivon_vision

    for name in ("VQAFaithfulness", "DocumentGrounding"):
        assert getattr(evaluators, name) is getattr(referee, name)
        assert name in evaluators.__all__ and name in dir(referee)
    for name in ("MediaArtifact", "with_media", "case_media", "media_sources"):
        assert getattr(referee, name) is getattr(multivon_media, name)
        assert name in dir(referee) and name not in referee.__all__
    assert referee.call_vision is multivon_vision.call_vision


def test_the_threshold_is_0_7_unless_a_calibration_file_holds_an_entry_for_these_prompts(
        server, tmp_path, monkeypatch):
    from referee.evaluators.calibration import CalibrationEntry, CalibrationFile

    server.set_reply(vision_judge)
    judge = server.judge_config(provider="openai", model="gpt-4.1")
    built = [VQAFaithfulness(judge=judge, media_resolver=resolver_of(CHART)),
             DocumentGrounding(judge=judge, media_resolver=resolver_of(CHART))]
    assert [e.threshold for e in built] == [0.7, 0.7]
    assert built[0].question_set() != built[1].question_set()
    entries = [CalibrationEntry(evaluator=e.name, judge_provider="openai", judge_model="gpt-4.1",
                                question_set=e.question_set(), threshold=0.45, n=40,
                                date="2026-12-07", data_fingerprint="abc123") for e in built]
    path = tmp_path / "calibration.json"
    path.write_text(CalibrationFile(entries=entries).model_dump_json(), encoding="utf-8")
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(path))
    for evaluator in built:
        result = evaluator.evaluate(bound_case(CHART), ANSWER)
        assert result.threshold == 0.45 == result.details["threshold"], evaluator.name
        assert result.passed and result.details["threshold_source"] == "calibration_file"
    explicit = VQAFaithfulness(threshold=0.9, judge=judge, media_resolver=resolver_of(CHART))
    assert explicit.evaluate(bound_case(CHART), ANSWER).threshold == 0.9
    with pytest.raises(ValueError, match="threshold must be between 0.0 and 1.0"):
        VQAFaithfulness(threshold=1.5)


def test_settings_a_vision_evaluator_cannot_use_are_refused_when_it_is_built():
    from referee import JudgeConfig, JudgePanel

    panel = JudgePanel(members=[JudgeConfig(provider="openai", model="gpt-4.1"),
                                JudgeConfig(provider="anthropic", model="claude-sonnet-4-5")])
    with pytest.raises(ValueError, match="VQAFaithfulness: judge must be one vision judge"):
        VQAFaithfulness(judge=panel)
    with pytest.raises(TypeError, match="DocumentGrounding: media_resolver must be a function"):
        DocumentGrounding(media_resolver=b"bytes")  # type: ignore[arg-type]


def test_a_configured_panel_is_refused_in_one_line_for_image_grading(server):
    from referee import JudgePanel, configure

    configure(JudgePanel(members=[server.judge_config(provider="openai", model="gpt-4.1"),
                                  server.judge_config(provider="openai", model="gpt-4o")]))
    evaluator = VQAFaithfulness(media_resolver=resolver_of(CHART))
    with pytest.raises(ValueError, match="vqa_faithfulness: the judge in effect is a panel, "
                                         "and image grading asks one vision judge"):
        evaluator.evaluate(bound_case(CHART), ANSWER)
    assert server.request_count == 0


def test_a_cascade_escalates_a_vision_judge_error_to_the_strong_judge_with_the_same_image(
        server, tmp_path):
    from referee.judge.cascade import JudgeCascade

    def cheap_fails(request: RecordedRequest) -> str:
        if request.model == "gpt-4.1-mini":
            return "I think all three hold."
        return vision_judge(request)

    server.set_reply(cheap_fails)
    cascade = JudgeCascade([server.judge_config(provider="openai", model="gpt-4.1-mini"),
                            server.judge_config(provider="openai", model="gpt-4.1")],
                           escalate_on=["error"])
    suite = EvalSuite("cascade").add_case(bound_case(CONTRACT, "What does clause 4 allow?"))
    suite.add_evaluators(DocumentGrounding(judge=cascade, media_resolver=resolver_of(CONTRACT)))
    _, result = only_result(run(suite, tmp_path), "What does clause 4 allow?")
    assert result.score == pytest.approx(2 / 3) and result.details["judge_model"] == "gpt-4.1"
    assert [r.model for r in server.requests] == ["gpt-4.1-mini", "gpt-4.1"]
    assert all(sent_media(r.body, "openai", "chat") == [("application/pdf", CONTRACT)]
               for r in server.requests)
