"""A judge request whose reply is cached fits none of its images: the reply cache keys the
original parts and how they will be fitted (the provider's limits, ``FIT_VERSION``), so a hit
is found without decoding, scaling or re-encoding anything, and nothing is sent. A miss fits
them, sends the fitted bytes and estimates their tokens for the tpm budget. Another fitting
(a new ``FIT_VERSION``, other limits) is another key."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from content_samples import picture, sent_media

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.content import ImagePart, _fit, _prepare
from referee.evaluators import CustomRubric
from referee.judge import client as judge_client
from referee.judge import get_judge
from referee.testing import DUMMY_API_KEY

PHOTO = picture(2400, 1800, fmt="JPEG", seed=5)  # past Anthropic's 1568 px: fitting scales it down


@pytest.fixture
def fit_calls(monkeypatch) -> list[Any]:
    """Each part ``fit_part`` is asked to fit; the memo of prepared content starts empty, as
    in a new process, so that only the reply cache can spare a fit."""
    calls: list[Any] = []
    real = _prepare.fit_part

    def counting(part, limits):
        calls.append(part)
        return real(part, limits)

    monkeypatch.setattr(_prepare, "fit_part", counting)
    _prepare._PREPARED.clear()
    return calls


def anthropic_judge(server):
    from pydantic import SecretStr

    return get_judge(server.judge_config(provider="anthropic", model="claude-sonnet-4-5",
                                         cache=True, api_key=SecretStr(DUMMY_API_KEY)))


def photo_case() -> EvalCase:
    return EvalCase(input="What is in the photo?", expected_output="A street",
                    metadata={"photo": ImagePart(data=PHOTO, path="street.jpg")})


def answer(prompt: str) -> ExecutionResult:
    return ExecutionResult(actual_response="A street at night.")


def test_a_cached_second_run_of_an_image_case_fits_nothing_and_sends_nothing(
        server, reply_cache_in_tmp_path, fit_calls, tmp_path):
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5", cache=True)
    suite = EvalSuite("photos").add_case(photo_case())
    suite.add_evaluators(CustomRubric([("Does the answer name a street?", True)], judge=judge))
    first = suite.run(answer, verbose=False, runs_dir=tmp_path / "runs")
    sent = server.request_count
    assert sent >= 1 and fit_calls  # the first run fits the photo for its requests
    (media_type, data), = sent_media(server.requests[0].body, "anthropic", "chat")
    assert media_type == "image/jpeg" and data != PHOTO  # the fitted image went

    fit_calls.clear()
    _prepare._PREPARED.clear()  # a new process
    again = suite.run(answer, verbose=False, runs_dir=tmp_path / "runs")
    assert fit_calls == [] and server.request_count == sent
    assert [c.criterion_results[0].score for c in again.cases] == \
        [c.criterion_results[0].score for c in first.cases]


async def test_a_hit_is_found_without_fitting_and_a_miss_estimates_the_fitted_image(
        server, reply_cache_in_tmp_path, fit_calls, monkeypatch):
    estimated: list[int] = []
    real_estimate = judge_client.estimate_request_tokens

    def recording(request):
        estimated.append(request.media_tokens)
        return real_estimate(request)

    monkeypatch.setattr(judge_client, "estimate_request_tokens", recording)
    judge = anthropic_judge(server)
    first = await judge.complete("What is it?", parts=[ImagePart(data=PHOTO, path="a.jpg")])
    # The tpm budget counted the fitted image (1238x928 by Anthropic's rule, not 2400x1800's).
    assert not first.cached and estimated == [1532]
    _prepare._PREPARED.clear()
    moved = await judge.complete("What is it?",
                                 parts=[ImagePart(data=PHOTO, path="elsewhere/b.jpg")])
    assert moved.cached and len(fit_calls) == 1 and server.request_count == 1
    assert len(estimated) == 1  # nothing was sent, so nothing was estimated


async def test_a_new_fit_version_is_a_miss(server, reply_cache_in_tmp_path, fit_calls,
                                           monkeypatch):
    judge = anthropic_judge(server)
    parts = [ImagePart(data=PHOTO)]
    assert not (await judge.complete("What is it?", parts=parts)).cached
    assert (await judge.complete("What is it?", parts=parts)).cached
    monkeypatch.setattr(_fit, "FIT_VERSION", _fit.FIT_VERSION + 1)
    _prepare._PREPARED.clear()
    assert not (await judge.complete("What is it?", parts=parts)).cached
    assert server.request_count == 2 and len(fit_calls) == 2


async def test_other_provider_limits_are_a_miss(server, reply_cache_in_tmp_path, fit_calls,
                                                monkeypatch):
    judge = anthropic_judge(server)
    parts = [ImagePart(data=PHOTO)]
    assert not (await judge.complete("What is it?", parts=parts)).cached
    real_rules_for = judge_client.rules_for

    def smaller_images(provider: str):
        rules = real_rules_for(provider)
        content = rules.content_rules
        assert content is not None
        limits = dataclasses.replace(content.limits, max_long_edge=1024)

        class Rules(type(rules)):  # type: ignore[misc]
            content_rules = dataclasses.replace(content, limits=limits)
        return Rules()

    monkeypatch.setattr(judge_client, "rules_for", smaller_images)
    _prepare._PREPARED.clear()
    assert not (await judge.complete("What is it?", parts=parts)).cached
    assert server.request_count == 2 and len(fit_calls) == 2
    (media_type, data), = sent_media(server.requests[-1].body, "anthropic", "chat")
    assert media_type == "image/jpeg" and _fit.image_size(data) == (1024, 768)


def test_the_key_holds_the_originals_and_the_fitting_never_a_path():
    from referee.content import ANTHROPIC_CONTENT, OPENAI_CONTENT, TextPart
    from referee.content._prepare import reply_cache_parts

    here = reply_cache_parts(ANTHROPIC_CONTENT, [TextPart(text="Rate it"),
                                                 ImagePart(data=PHOTO, path="a/street.jpg")])
    moved = reply_cache_parts(ANTHROPIC_CONTENT, [TextPart(text="Rate it"),
                                                  ImagePart(data=PHOTO, path="b/x.jpg")])
    assert here == moved and not any("street" in key for key in here)
    assert f"sha256:{ImagePart(data=PHOTO).sha256}" in here[1]  # the original's hash
    assert reply_cache_parts(OPENAI_CONTENT, [TextPart(text="Rate it"),
                                              ImagePart(data=PHOTO)]) != here
