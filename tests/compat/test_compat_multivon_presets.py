"""multivon's ready-made suites (``EvalSuite.for_rag()`` and the others whose evaluators referee
has), built from referee's evaluators. Written from multivon's public signatures and docstrings;
no test code copied."""

from __future__ import annotations

import pytest

from referee import EvalCase, EvalStatus, EvalSuite, JudgeConfig, configure
from referee.testing.server import ScriptedJudgeServer

PRESETS = {
    "for_rag": ["not_empty", "faithfulness", "hallucination", "context_precision",
                "context_recall", "relevance"],
    "for_agents": ["tool_call_accuracy", "tool_call_necessity", "trajectory_efficiency",
                   "plan_quality", "task_completion"],
    "for_support_bot": ["not_empty", "faithfulness", "relevance", "coherence", "toxicity"],
    "for_summarization": ["not_empty", "faithfulness", "coherence", "relevance",
                          "summarization"],
    "for_classification": ["not_empty", "exact_match", "answer_accuracy"],
    "for_coding": ["not_empty", "exact_match", "answer_accuracy", "rouge_l"],
    "for_legal": ["not_empty", "faithfulness", "hallucination", "answer_accuracy", "bias"],
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_builds_multivons_evaluators(preset):
    suite = getattr(EvalSuite, preset)()
    assert [e.name for e in suite.evaluators] == PRESETS[preset]
    assert getattr(EvalSuite, preset)("mine").name == "mine"


def test_preset_options_reach_their_evaluators():
    rag = EvalSuite.for_rag(threshold=0.6)
    assert all(e.threshold == 0.6 for e in rag.evaluators[1:])
    assert EvalSuite.for_agents(require_order=True).evaluators[0].require_order is True
    assert EvalSuite.for_coding(language="typescript").name == "Coding Agent Eval"


def test_a_preset_suite_runs_against_a_judge(isolated_judge):
    with ScriptedJudgeServer(reply="Yes") as server:
        configure(JudgeConfig(provider="openai", model="gpt-4o-mini",
                              base_url=server.base_url(), api_key="test-key"))
        suite = EvalSuite.for_classification().add_cases(
            [EvalCase(input="Route: 'my card was charged twice'", expected_output="billing")])
        report = suite.run(lambda _: "billing", verbose=False, save=False)
    case = report.case_results[0]
    assert case.status == EvalStatus.PASSED
    assert {r.evaluator for r in case.results} == {"not_empty", "exact_match", "answer_accuracy"}
    assert server.requests  # AnswerAccuracy asked the judge
