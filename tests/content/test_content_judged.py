"""Judges see the case's images and PDFs: for each judged criterion family, through the
official SDKs against the scripted judge server, each provider receives its own image and
document format (checked on the recorded request); a judge without vision is refused in one
line and the run loses nothing; the reply cache keys the parts by content, never by path."""

from __future__ import annotations

import pytest
from content_samples import pdf, picture, sent_media

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.config import CriterionConfig
from referee.content import ContentError, DocumentPart, ImagePart, _prepare
from referee.criteria.llm import LLMJudgeCriterion
from referee.evaluators import CustomRubric, Faithfulness, GEval
from referee.judge import get_judge
from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

CHART = picture(400, 300, seed=11)
REPORT = pdf(2)

# api_style is OpenAI's choice of API; the other providers have one each.
JUDGES = [("openai", "chat", "gpt-4.1"), ("openai", "responses", "gpt-4.1"),
          ("anthropic", "chat", "claude-sonnet-4-5"), ("google", "chat", "gemini-2.5-flash")]


def families(provider: str, api_style: str, model: str, server: ScriptedJudgeServer):
    judge = server.judge_config(provider=provider, model=model, api_style=api_style)
    found: list = [Faithfulness(judge=judge), GEval(criteria="Is the answer right?", judge=judge),
             CustomRubric([("Does the answer name the region?", True)], judge=judge)]
    if api_style != "responses":  # the AgentEvaluator-style criteria choose the judge by model
        found.append(LLMJudgeCriterion(CriterionConfig(judge_model=model, num_samples=1)))
    return found


def image_case(index: int = 0) -> EvalCase:
    return EvalCase(input=f"Which region sold most? ({index})", expected_output="North",
                    context=["The quarterly report is attached."],
                    metadata={"report": DocumentPart(data=REPORT, path="q3.pdf")})


def charting(prompt: str) -> ExecutionResult:
    return ExecutionResult(actual_response="North sold most.",
                           metadata={"chart": ImagePart(data=CHART, path="chart.png")})


@pytest.mark.parametrize(("provider", "api_style", "model"), JUDGES)
def test_every_judged_family_sends_the_cases_images_in_the_providers_format(
        server, tmp_path, provider, api_style, model):
    criteria = families(provider, api_style, model, server)
    suite = EvalSuite("vision").add_case(image_case()).add_evaluators(*criteria)
    suite.run(charting, verbose=False, runs_dir=tmp_path, concurrency=1)
    requests = server.requests
    assert len(requests) >= len(criteria)
    assert {r.provider for r in requests} == {provider}
    for request in requests:
        # The case's PDF, then the output's chart: each once, in this provider's own shape
        # (the AgentEvaluator-style criterion picks OpenAI's API itself: read it by path).
        style = "responses" if request.path.endswith("/responses") else "chat"
        assert sent_media(request.body, provider, style) == [
            ("application/pdf", REPORT), ("image/png", CHART)], request.path
        assert "Which region sold most?" in request.prompt


def test_a_judge_without_vision_is_refused_before_the_run_when_a_case_holds_images(
        server, tmp_path):
    judge = server.judge_config(provider="openai", model="gpt-3.5-turbo")
    suite = EvalSuite("blind").add_cases([EvalCase(input="Say hi"), image_case()])
    suite.add_evaluators(GEval(criteria="Is the answer right?", judge=judge))
    with pytest.raises(ContentError) as refused:
        suite.run(charting, verbose=False, runs_dir=tmp_path)
    assert str(refused.value) == (
        "criterion 'g_eval': judge openai/gpt-3.5-turbo takes text only, and case "
        "'Which region sold most? (0)' holds documents (expected a judge model with vision, "
        "such as gpt-4.1, claude-sonnet-4-5 or gemini-2.5-flash)")
    assert server.request_count == 0 and not any(tmp_path.iterdir())


def test_an_outputs_image_for_a_judge_without_vision_errors_that_case_alone(server, tmp_path):
    judge = server.judge_config(provider="openai", model="gpt-3.5-turbo")
    suite = EvalSuite("blind").add_cases([EvalCase(input="Draw it"), EvalCase(input="Say hi")])
    suite.add_evaluators(GEval(criteria="Is the answer right?", judge=judge))

    def model(prompt: str) -> ExecutionResult:
        return charting(prompt) if prompt == "Draw it" else ExecutionResult(
            actual_response="hi")

    report = suite.run(model, verbose=False, runs_dir=tmp_path)
    by_input = {c.case_input: c for c in report.cases}
    (result,) = by_input["Draw it"].criterion_results
    assert by_input["Draw it"].status.value == "EVALUATOR_ERROR"
    assert "\n" not in str(result.error)
    assert str(result.error).endswith("judge openai/gpt-3.5-turbo takes text only, and this "
                                      "criterion judges images (expected a judge model with "
                                      "vision, such as gpt-4.1, claude-sonnet-4-5 or "
                                      "gemini-2.5-flash)")
    assert by_input["Say hi"].status.value != "EVALUATOR_ERROR"
    assert server.request_count >= 1  # the text-only case was judged, nothing else was sent
    assert all(isinstance(r.body["messages"][-1]["content"], str) for r in server.requests)


async def test_the_reply_cache_keys_parts_by_content_never_by_path(server,
                                                                  reply_cache_in_tmp_path):
    from pydantic import SecretStr

    cfg = server.judge_config(provider="anthropic", model="claude-sonnet-4-5", cache=True,
                              api_key=SecretStr(DUMMY_API_KEY))
    judge = get_judge(cfg)
    first = await judge.complete("Is this a chart?", parts=[ImagePart(data=CHART, path="a.png")])
    moved = await judge.complete("Is this a chart?",
                                 parts=[ImagePart(data=CHART, path="elsewhere/b.png")])
    other = await judge.complete("Is this a chart?",
                                 parts=[ImagePart(data=picture(400, 300, seed=12))])
    assert (first.cached, moved.cached, other.cached) == (False, True, False)
    assert server.request_count == 2


def test_a_rescored_run_shows_the_judge_its_stored_images_from_blobs(server, tmp_path):
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    suite = EvalSuite("again").add_case(image_case())
    suite.add_evaluators(GEval(criteria="Is the answer right?", judge=judge))
    first = suite.run(charting, verbose=False, runs_dir=tmp_path)
    run_dir = tmp_path / first.run_id
    assert (run_dir / "blobs").is_dir()
    server.reset_record()
    _prepare._PREPARED.clear()  # as a new process re-scoring the stored run would start

    def never(prompt: str) -> ExecutionResult:
        raise AssertionError("a re-scored run does not call the model")

    suite.run(never, verbose=False, runs_dir=tmp_path, resume=run_dir, rescore=True)
    assert server.requests
    for request in server.requests:
        assert sent_media(request.body, "anthropic", "chat") == [
            ("application/pdf", REPORT), ("image/png", CHART)]


@pytest.mark.parametrize(("provider", "api_style", "model"),
                         [("openai", "chat", "gpt-4.1"), ("anthropic", "chat", "claude-sonnet-4-5"),
                          ("google", "chat", "gemini-2.5-flash")])
def test_a_batch_api_run_sends_the_cases_images_in_each_batch_item(
        isolated_judge, monkeypatch, tmp_path, provider, api_style, model):
    """By batch API the same requests go out as online ones (design decision 17): an item
    without the case's images would be judged on less and could read otherwise."""
    from referee.testing import ScriptedBatchService

    monkeypatch.setenv("REFEREE_BATCH_QUIET_S", "0.25")
    monkeypatch.setenv("REFEREE_BATCH_FIRST_POLL_S", "0.02")
    monkeypatch.setenv("REFEREE_BATCH_MAX_POLL_S", "0.05")
    with ScriptedBatchService(reply="Yes", processing_s=0.05) as service:
        judge = service.judge_config(provider, model, api_style=api_style)
        suite = EvalSuite("vision").add_case(image_case())
        suite.add_evaluators(CustomRubric([("Does the answer name the region?", True)],
                                          judge=judge))
        report = suite.run(charting, verbose=False, runs_dir=tmp_path)
        assert report.passed == 1
        assert service.batches_created == 1 and service.items_received == 1
        (request,) = service.requests
        assert sent_media(request.body, provider, api_style) == [
            ("application/pdf", REPORT), ("image/png", CHART)]


def test_a_remote_pdf_goes_to_anthropic_as_a_url_source_and_openai_refuses_it_in_one_line(
        server, tmp_path):
    # Anthropic's document blocks take a url source (the API fetches the PDF); OpenAI's Chat
    # Completions file part takes bytes only: that criterion errors on that case, in one line.
    remote = EvalCase(input=["Summarise it.", {"pdf": "https://example.com/q3.pdf"}])
    for provider, model in (("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4.1")):
        suite = EvalSuite("remote").add_case(remote).add_evaluators(CustomRubric(
            [("Is the summary right?", True)],
            judge=server.judge_config(provider=provider, model=model)))
        report = suite.run(lambda prompt: "A summary.", verbose=False,
                           runs_dir=tmp_path / provider)
        (result,) = report.cases[0].criterion_results
        if provider == "anthropic":
            assert result.error is None and result.passed
            (request,) = server.requests
            (block,) = [b for b in request.body["messages"][0]["content"]
                        if b["type"] == "document"]
            assert block["source"] == {"type": "url", "url": "https://example.com/q3.pdf"}
        else:
            assert server.request_count == 1  # nothing sent to OpenAI
            assert "OpenAI takes documents as bytes; https://example.com/q3.pdf is only a " \
                   "URL here" in str(result.error)


def test_an_agentevaluator_criterion_names_the_pdf_a_provider_refuses(server, tmp_path):
    # Every sample fails on the case's own PDF (101 pages for Anthropic): the criterion's
    # error names the file and the limit, not only "All LLM samples failed".
    manual = EvalCase(input=["Summarise it.", DocumentPart(data=pdf(101), path="manual.pdf")],
                      expected_output="A manual.")
    criterion = LLMJudgeCriterion(CriterionConfig(judge_model="claude-sonnet-4-5",
                                                  num_samples=2))
    suite = EvalSuite("manual").add_cases([manual, image_case()]).add_evaluators(criterion)
    report = suite.run(charting, verbose=False, runs_dir=tmp_path)
    by_input = {case.case_input.partition(" (")[0]: case for case in report.cases}
    (refused,) = by_input["Summarise it."].criterion_results
    assert refused.error == ("ContentError: document manual.pdf has 101 pages; Anthropic "
                             "takes PDFs up to 100 pages")
    assert refused.error_kind == "evaluator"
    assert server.request_count == 2  # the other case's two samples; nothing for the PDF
