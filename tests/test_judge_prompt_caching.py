"""Judge economy: provider prompt caching through the real SDKs against the scripted server,
cached-token accounting per wire format, per-category prices, the shared-prefix layout of
evaluator prompts, warm-up before fan-out, and the case-level batch."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.evaluators import (
    AnswerAccuracy,
    CustomRubric,
    Faithfulness,
    GEval,
    Hallucination,
    Relevance,
)
from referee.judge import caching_rules, estimate_cost, get_judge, load_prices, price_of
from referee.judge.pricing import set_price
from referee.testing import Reply, ScriptedJudgeServer
from referee.testing.prompt_cache import PromptCache

LONG = ("Clause: refunds are paid to the original payment method within ten business days. "
        * 110)  # ~9,200 characters, ~2,300 tokens: cacheable at OpenAI, Gemini 2.5, Sonnet 4.5,
# not at Haiku 4.5
PREFIX = f"<<<BEGIN CONTEXT t>>>\n{LONG}\n<<<END CONTEXT t>>>\n\n"

WIRES = [("openai", "gpt-4o-mini", "chat"), ("openai", "gpt-4o-mini", "responses"),
         ("anthropic", "claude-sonnet-4-5", "chat"), ("google", "gemini-2.5-flash", "chat")]


async def _ask_siblings(server: ScriptedJudgeServer, provider: str, model: str, style: str,
                        prefix: str, count: int = 3, **overrides):
    judge = get_judge(server.judge_config(provider=provider, model=model, api_style=style,
                                          **overrides))
    return await asyncio.gather(*(judge.complete(f"Question {i}: is it so?", system="Judge.",
                                                 prompt_prefix=prefix, cache_group="case-7")
                                  for i in range(count)))


@pytest.mark.parametrize("provider,model,style", WIRES,
                         ids=["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_cached_tokens_are_read_from_each_wire_format_and_priced_apart(provider, model, style):
    with ScriptedJudgeServer(Reply("Yes", latency_s=0.05)) as server:
        replies = asyncio.run(_ask_siblings(server, provider, model, style, PREFIX))
        recorded = sorted(server.requests, key=lambda r: r.arrived_at)
    first, *siblings = sorted(replies, key=lambda r: r.usage.cached_input_tokens)
    # The usage each SDK reply carried equals what the server put on the wire.
    by_cached = sorted((r.cached_input_tokens, r.cache_write_tokens, r.input_tokens)
                       for r in recorded)
    assert sorted((r.usage.cached_input_tokens, r.usage.cache_write_tokens, r.usage.input_tokens)
                  for r in replies) == by_cached
    assert first.usage.cached_input_tokens == 0
    assert all(s.usage.cached_input_tokens > 1000 for s in siblings)
    if provider == "anthropic":  # the first request wrote the prefix to the cache
        assert first.usage.cache_write_tokens > 1000
    else:
        assert first.usage.cache_write_tokens == 0
    # Each kind of token at its own rate: a cached sibling costs less than the cold first.
    sibling = siblings[0].usage
    assert sibling.cost_usd == pytest.approx(estimate_cost(
        model, sibling.input_tokens, sibling.output_tokens,
        cached_input_tokens=sibling.cached_input_tokens))
    assert sibling.cost_usd < first.usage.cost_usd


def test_cache_control_marks_the_end_of_the_shared_prefix_only_when_it_can_be_cached():
    with ScriptedJudgeServer("Yes") as server:
        asyncio.run(_ask_siblings(server, "anthropic", "claude-sonnet-4-5", "chat", PREFIX, 1))
        asyncio.run(_ask_siblings(server, "anthropic", "claude-sonnet-4-5", "chat",
                                  "<<<BEGIN CONTEXT s>>>\nshort\n<<<END CONTEXT s>>>\n\n", 1))
        # Haiku 4.5 caches only from 4,096 tokens: this prefix is too short for it.
        asyncio.run(_ask_siblings(server, "anthropic", "claude-haiku-4-5", "chat", PREFIX, 1))
        long_sonnet, short_sonnet, long_haiku = server.requests
    content = long_sonnet.body["messages"][0]["content"]
    assert [block.get("cache_control") for block in content] == [{"type": "ephemeral"}, None]
    assert content[0]["text"] == PREFIX and content[1]["text"].startswith("Question 0")
    assert "cache_control" not in json.dumps(long_sonnet.body["system"])
    for request in (short_sonnet, long_haiku):
        assert "cache_control" not in json.dumps(request.body)
        assert request.body["messages"][0]["content"].startswith("<<<BEGIN CONTEXT")
    assert long_haiku.cached_input_tokens == long_haiku.cache_write_tokens == 0


def test_openai_requests_carry_the_case_prompt_cache_key_when_the_prefix_is_cacheable():
    with ScriptedJudgeServer("Yes") as server:
        asyncio.run(_ask_siblings(server, "openai", "gpt-4o-mini", "chat", PREFIX, 2))
        asyncio.run(_ask_siblings(server, "openai", "gpt-4o-mini", "chat", "short\n\n", 1))
        keys = [r.body.get("prompt_cache_key") for r in server.requests]
    assert keys == ["case-7", "case-7", None]


def test_a_cacheable_prefix_is_warmed_before_its_siblings_fan_out():
    with ScriptedJudgeServer(Reply("Yes", latency_s=0.1)) as server:
        asyncio.run(_ask_siblings(server, "openai", "gpt-4o-mini", "chat", PREFIX, 4))
        warm = sorted(server.requests, key=lambda r: r.arrived_at)
        server.reset_record()
        asyncio.run(_ask_siblings(server, "openai", "gpt-4o-mini", "chat", "short\n\n", 4))
        short_peak = server.max_in_flight
    first, *siblings = warm
    assert all(s.arrived_at >= first.answered_at for s in siblings)
    assert all(s.cached_input_tokens > 0 for s in siblings)
    assert short_peak == 4  # nothing to cache: all at once, as before


def test_emulated_cache_follows_minimum_length_breakpoints_and_ttl():
    cache = PromptCache()
    openai, anthropic = caching_rules("openai", "gpt-4o-mini"), caching_rules(
        "anthropic", "claude-sonnet-4-5")
    long_text, short_text = "x" * 8000, "y" * 2000
    first = cache.begin(openai, "m", long_text, None, now=0.0)
    # Until the first request is answered, a concurrent one finds nothing.
    assert cache.begin(openai, "m", long_text, None, now=0.5).cached_tokens == 0
    cache.commit(openai, first, now=1.0)
    # Longest cached prefix, in 128-token (512-character) steps.
    assert cache.begin(openai, "m", long_text + " more", None, now=2.0).cached_tokens == 1920
    assert cache.begin(openai, "other", long_text, None, now=2.0).cached_tokens == 0
    assert cache.begin(openai, "m", long_text, None, now=2.0 + 301).cached_tokens == 0  # expired
    cache.commit(openai, cache.begin(openai, "m", short_text, None, now=0.0), now=1.0)
    assert cache.begin(openai, "m", short_text, None, now=2.0).cached_tokens == 0  # < 1,024
    # Anthropic: nothing without a breakpoint; a miss is a write, then a read.
    assert cache.begin(anthropic, "m", long_text, None, now=0.0).write_tokens == 0
    use = cache.begin(anthropic, "m", long_text, 6000, now=0.0)
    assert (use.write_tokens, use.cached_tokens) == (1500, 0)
    cache.commit(anthropic, use, now=1.0)
    again = cache.begin(anthropic, "m", long_text, 6000, now=2.0)
    assert (again.cached_tokens, again.write_tokens) == (1500, 0)


def _long_case(index: int) -> EvalCase:
    return EvalCase(input=f"Case {index}: how long is the refund window?",
                    context=[f"Policy {index}: {LONG}"], expected_output="Ten business days.")


def test_every_question_of_a_case_shares_one_byte_identical_prefix():
    with ScriptedJudgeServer(Reply("Yes", latency_s=0.02)) as server:
        cfg = server.judge_config(provider="openai")
        suite = EvalSuite("prefix")
        suite.add_cases([_long_case(1), _long_case(2)])
        suite.add_evaluators(Faithfulness(judge=cfg), Hallucination(judge=cfg),
                             CustomRubric([("Does it answer?", True)], judge=cfg),
                             GEval("states the window", runs=2, judge=cfg), Relevance(judge=cfg))
        suite.run(lambda prompt: "Refunds take ten business days.", verbose=False, save=False)
        requests = server.requests
    assert len({r.system for r in requests}) == 1  # one system text for every evaluator
    for case in ("Case 1:", "Case 2:"):
        mine = [r for r in requests if case in r.prompt]
        with_context = [r for r in mine if "<<<BEGIN CONTEXT" in r.prompt]
        assert len(with_context) == 4 + 4 + 1 + 2
        ends = {r.prompt.index("<<<END MODEL OUTPUT") for r in with_context}
        assert len(ends) == 1
        end = ends.pop()
        assert len({r.prompt[:end] for r in with_context}) == 1
        assert with_context[0].prompt.startswith("<<<BEGIN CONTEXT")  # long material first
        assert len({r.body.get("prompt_cache_key") for r in with_context}) == 1
        # Siblings found the prefix cached: only the warm-up request paid for all of it.
        assert sum(r.cached_input_tokens == 0 for r in with_context) == 1
    keys = {r.body.get("prompt_cache_key") for r in requests if "<<<BEGIN CONTEXT" in r.prompt}
    assert len(keys) == 2  # one per case


def _yes_no(request) -> str:
    if '"answers"' in request.prompt:
        count = request.prompt.split("Answer all ", 1)[1].split(" ", 1)[0]
        return json.dumps({"answers": [{"id": i, "answer": "no"}
                                       for i in range(1, int(count) + 1)]})
    return "No"


def test_case_level_batch_asks_once_per_case_and_scores_each_evaluator():
    with ScriptedJudgeServer(_yes_no) as server:
        cfg = server.judge_config(provider="openai")
        evaluators = [Faithfulness(judge=cfg, batch="case"), Hallucination(judge=cfg, batch="case"),
                      Relevance(judge=cfg, batch="case"), AnswerAccuracy(judge=cfg, batch="case")]
        suite = EvalSuite("case-batch")
        suite.add_case(_long_case(3))
        suite.add_evaluators(*evaluators)
        report = suite.run(lambda prompt: "Ten business days.", verbose=False, save=False)
        requests = server.requests
    # One request for the case, over the union of the four evaluators' material.
    [shared] = requests
    assert "Answer all 16 question(s)" in shared.prompt
    for label in ("CONTEXT", "USER INPUT", "REFERENCE ANSWER", "MODEL OUTPUT"):
        assert shared.prompt.count(f"<<<BEGIN {label} ") == 1
    [case] = report.cases
    results = {r.criterion: r for r in case.criterion_results}
    # Every answer is "no": questions expecting "no" matched, the others did not.
    assert results["faithfulness"].details["matched"] == 2
    assert results["hallucination"].details["matched"] == 3
    assert results["faithfulness"].details["mode"] == "case_batched"
    assert results["answer_accuracy"].details["case_batch"] == [
        "faithfulness", "hallucination", "relevance", "answer_accuracy"]
    # The shared request's usage is counted once.
    assert case.token_usage.requests == 1
    assert case.token_usage.input_tokens == sum(r.input_tokens for r in requests)


def test_case_batch_outside_a_run_falls_back_to_one_request_per_evaluator():
    with ScriptedJudgeServer(_yes_no) as server:
        evaluator = Faithfulness(judge=server.judge_config(provider="openai"), batch="case")
        from referee.execution import ExecutionResult
        result = asyncio.run(evaluator.evaluate(ExecutionResult(actual_response="Ten days."),
                                                _long_case(4)))
        assert server.request_count == 1
    assert result.details["mode"] == "batched"


def test_batch_must_be_a_known_mode():
    with pytest.raises(ValueError, match="batch must be False, True or 'case'"):
        Faithfulness(batch="cases")


def test_litellm_price_files_load_every_rate(tmp_path: Path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({
        "sample_spec": {"input_cost_per_token": 0},
        "house/house-judge-1": {"input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6,
                                "cache_read_input_token_cost": 2e-7,
                                "cache_creation_input_token_cost": 2.5e-6},
        "embedder-1": {"input_cost_per_token": 1e-7},
    }))
    assert load_prices(path) == 1
    price = price_of("house-judge-1")
    assert price == pytest.approx((2.0, 8.0, 0.2, 2.5))
    # 1,000 input of which 600 cached and 100 written, 100 output.
    assert estimate_cost("house-judge-1", 1000, 100, cached_input_tokens=600,
                         cache_write_tokens=100) == pytest.approx(
        (300 * 2.0 + 600 * 0.2 + 100 * 2.5 + 100 * 8.0) / 1e6)
    path.write_text(json.dumps({"bad-judge": {"input_cost_per_token": "cheap",
                                              "output_cost_per_token": 1e-6}}))
    with pytest.raises(ValueError, match=r"prices.json: field 'bad-judge.input_cost_per_token'"):
        load_prices(path)
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps({"env-judge": {"input_cost_per_token": 1e-6,
                                                  "output_cost_per_token": 1e-6}}))
    monkeypatch.setenv("REFEREE_PRICE_FILE", str(env_file))
    assert price_of("env-judge") is not None


def test_set_price_without_cached_rates_bills_cached_tokens_as_input():
    set_price("flat-judge-2", 1.0, 2.0)
    assert estimate_cost("flat-judge-2", 1000, 0, cached_input_tokens=500) == pytest.approx(0.001)


def test_a_usage_total_is_the_sum_of_its_parts():
    from referee.usage import TokenUsage

    parts = [TokenUsage(input_tokens=10, output_tokens=2, requests=1, cost_usd=0.25,
                        cached_input_tokens=4),
             None,
             TokenUsage(cached_requests=1),  # a cache hit: no cost known
             TokenUsage(input_tokens=5, output_tokens=1, requests=1, cost_usd=0.5,
                        cache_write_tokens=3)]
    total = TokenUsage.total(parts)
    assert total == parts[0] + parts[2] + parts[3]
    assert (total.input_tokens, total.output_tokens, total.requests, total.cached_requests,
            total.cached_input_tokens, total.cache_write_tokens) == (15, 3, 2, 1, 4, 3)
    assert total.cost_usd == 0.75
    assert TokenUsage.total([TokenUsage(requests=1), None]).cost_usd is None
    assert TokenUsage.total([None]) is None


def test_reports_show_judge_spend_apart_from_the_model_under_tests(tmp_path: Path):
    from referee.execution import ExecutionResult
    from referee.report.junit import render_junit
    from referee.usage import TokenUsage

    with ScriptedJudgeServer("Yes") as server:
        suite = EvalSuite("spend")
        suite.add_case(EvalCase(input="q", expected_output="a"))
        suite.add_evaluator(CustomRubric([("Ok?", True)], judge=server.judge_config()))
        report = suite.run(lambda prompt: ExecutionResult(
            actual_response="a", token_usage=TokenUsage(input_tokens=70, output_tokens=30,
                                                        requests=1)),
            verbose=False, save=False)
    spend = report.to_dict()["spend"]
    assert spend["judge"]["requests"] == 1
    assert spend["model_under_test"]["input_tokens"] == 70
    junit = render_junit(report)
    assert 'name="judge_spend"' in junit and 'name="model_under_test_spend"' in junit
    assert "70 input + 30 output tokens" in junit


@pytest.mark.parametrize("provider,model,minimum", [
    ("openai", "gpt-4o-mini", 1024),
    ("anthropic", "claude-haiku-4-5-20251001", 4096), ("anthropic", "claude-opus-4-7", 4096),
    ("anthropic", "claude-3-5-haiku-latest", 2048), ("anthropic", "claude-sonnet-4-6", 1024),
    ("anthropic", "claude-sonnet-4-5", 1024),
    ("google", "gemini-2.5-flash", 2048), ("google", "models/gemini-2.5-pro", 2048),
    ("google", "gemini-3-pro-preview", 4096), ("google", "gemini-2.0-flash", None),
])
def test_caching_minimums_are_the_published_ones(provider, model, minimum):
    """As each provider's documentation lists them (checked 2026-12-01): Gemini's implicit
    cache starts at 2.5, from 2,048 tokens (it was 1,024 for 2.5 Flash before mid-2026)."""
    rules = caching_rules(provider, model)
    assert (rules.min_tokens if rules is not None else None) == minimum


def test_the_scripted_server_stores_a_prefix_before_its_reply_goes_out(monkeypatch):
    # A slow store widens the window in which a sibling sent on the reply could arrive first;
    # the prefix must be cached by then, as at the provider (this raced in CI).
    slow_commit = PromptCache.commit

    def commit_later(self, rules, use, now):
        time.sleep(0.2)
        slow_commit(self, rules, use, now)

    monkeypatch.setattr(PromptCache, "commit", commit_later)
    with ScriptedJudgeServer(Reply("Yes")) as server:
        replies = asyncio.run(_ask_siblings(server, "openai", "gpt-4o-mini", "responses",
                                            PREFIX))
    cached = sorted(r.usage.cached_input_tokens for r in replies)
    assert cached[0] == 0 and all(c > 1000 for c in cached[1:])


def test_prices_that_are_not_finite_are_refused(tmp_path: Path):
    # NaN passed the "not negative" check and every cost of that judge became NaN.
    path = tmp_path / "prices.json"
    for value in ("NaN", "Infinity"):
        path.write_text('{"nan-judge": {"input_cost_per_token": %s, '
                        '"output_cost_per_token": 1e-6}}' % value)
        with pytest.raises(ValueError, match=r"prices.json: field 'nan-judge.input_cost_per_token'"
                                             r": expected a finite, non-negative number"):
            load_prices(path)
    with pytest.raises(ValueError, match="finite and not negative"):
        set_price("nan-judge", float("nan"), 1.0)
    assert price_of("nan-judge") is None


def test_a_bad_price_file_in_the_environment_stops_the_run_before_any_case(
        tmp_path: Path, monkeypatch):
    # It failed the first judged case, and the other cases were then priced by the built-in
    # table as if nothing had happened.
    monkeypatch.setenv("REFEREE_PRICE_FILE", str(tmp_path / "missing.json"))
    calls: list[str] = []
    suite = EvalSuite("prices").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    for attempt in range(2):  # the second run is refused too: the failure is not remembered
        with pytest.raises(ValueError, match=r"environment variable REFEREE_PRICE_FILE: "
                                             r".*missing.json: cannot read the price file"):
            suite.run(calls.append, save=False, verbose=False)
    assert calls == []
