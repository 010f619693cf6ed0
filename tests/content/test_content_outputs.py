"""ExecutionResult.outputs: the images and PDFs a model produced, typed; stored once, judged,
checked and shown like any other part, and refused in one line when unreadable."""

from __future__ import annotations

import base64
import json

from content_samples import picture

from referee import (
    AgentEvaluator,
    ConversationScenario,
    EvalCase,
    EvalSet,
    EvalSuite,
    ExecutionResult,
    UserSimulator,
)
from referee.content import ImageCheck, ImagePart
from referee.evaluators import GEval
from referee.report.html import render_html
from referee.testing.fake import FakeJudge

CHART = picture(320, 240, seed=21)
CHART_URL = "data:image/png;base64," + base64.b64encode(CHART).decode("ascii")


def test_outputs_read_parts_and_are_left_out_of_dumps_when_empty():
    run = ExecutionResult.coerce({"response": "here", "outputs": [CHART_URL]})
    assert [p.sha256 for p in run.outputs] == [ImagePart(data=CHART).sha256]
    assert "outputs" not in ExecutionResult(actual_response="x").model_dump()
    assert ExecutionResult.model_validate_json(run.model_dump_json()) == run


def test_a_models_outputs_are_judged_stored_once_and_shown(openai_judge_server, tmp_path):
    server = openai_judge_server('{"score": 9, "reason": "right chart"}')
    suite = EvalSuite("charts").add_cases([EvalCase(input=f"plot {i}") for i in range(3)])
    suite.add_evaluators(ImageCheck(media_types=["image/png"]),
                         GEval(criteria="Is the chart right?", judge=server.judge_config()))
    report = suite.run(lambda prompt: {"response": "plotted", "outputs": [CHART_URL]},
                       verbose=False, runs_dir=tmp_path)
    for case in report.cases:
        assert case.criterion_results[0].passed  # ImageCheck found the PNG
    assert server.request_count >= 3
    for request in server.requests:
        (image,) = [item for item in request.body["messages"][-1]["content"]
                    if item["type"] == "image_url"]
        assert image["image_url"]["url"] == CHART_URL
    run_dir = tmp_path / report.run_id
    (blob,) = [p for p in (run_dir / "blobs").rglob("*") if p.is_file()]
    assert blob.read_bytes() == CHART
    for line in (run_dir / "cases.jsonl").read_text().splitlines():
        (stored,) = json.loads(line)["execution"]["outputs"]
        assert "data" not in stored and stored["sha256"] == ImagePart(data=CHART).sha256
    assert render_html(report).count('<img src="data:image/') == 3


def test_an_unreadable_output_is_that_cases_model_error_in_one_line(tmp_path):
    suite = EvalSuite("broken").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    suite.add_evaluators(ImageCheck())

    def model(prompt: str) -> dict:
        return {"response": "x", "outputs": [CHART_URL if prompt == "a" else "gone.png"]}

    report = suite.run(model, verbose=False, runs_dir=tmp_path)
    by_input = {c.case_input: c for c in report.cases}
    assert by_input["a"].status.value == "PASSED"
    broken = by_input["b"]
    assert broken.status.value == "MODEL_ERROR"
    assert "outputs[0]" in broken.error and "content file not found: gone.png" in broken.error


def test_each_turns_outputs_of_an_agent_conversation_are_kept_each_once(tmp_path):
    # A conversation case merges its turns into one result: the images each turn returned
    # are that result's outputs (a chart returned twice is one), stored beside the run.
    other = picture(200, 100, seed=22)
    other_url = "data:image/png;base64," + base64.b64encode(other).decode("ascii")
    replies = iter([{"response": "first", "outputs": [CHART_URL]},
                    {"response": "second", "outputs": [other_url, CHART_URL]}])
    report = AgentEvaluator(agent=lambda message: next(replies)).evaluate_sync(
        EvalSet(eval_cases=[EvalCase(conversation=[{"user_content": "Plot it"},
                                                   {"user_content": "And the detail?"}])]),
        output_dir=tmp_path)
    (case,) = report.cases
    hashes = [ImagePart(data=CHART).sha256, ImagePart(data=other).sha256]
    assert [part.sha256 for part in case.execution.outputs] == hashes
    run_dir = tmp_path / report.run_id
    (line,) = (run_dir / "cases.jsonl").read_text().splitlines()
    assert [part["sha256"] for part in json.loads(line)["execution"]["outputs"]] == hashes
    assert sorted(p.read_bytes() for p in (run_dir / "blobs").rglob("*") if p.is_file()) \
        == sorted([CHART, other])


async def test_a_simulated_conversation_keeps_the_images_the_agent_returned(tmp_path):
    fake = FakeJudge("Show me the detail too.")
    simulator = UserSimulator(judge=fake.judge_config(), criteria=[ImageCheck()], max_turns=2)
    scenario = ConversationScenario(scenario_id="charts", description="wants a chart",
                                    starting_prompt="Plot sales", max_turns=2)
    report = await simulator.evaluate(
        lambda message: {"response": "Here.", "outputs": [CHART_URL]}, [scenario],
        runs_dir=tmp_path)
    (case,) = report.cases
    assert [part.sha256 for part in case.execution.outputs] == [ImagePart(data=CHART).sha256]
    assert case.criterion_results[0].passed  # ImageCheck found the chart
