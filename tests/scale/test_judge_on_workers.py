"""The judge a run names is the judge that judges on the Ray workers (issue 20, item 7).

Two scripted judges answer differently: judge A says the answer is polite, judge B says it is
not. A run whose driver chose one of them (``configure()``, the environment, an evaluator's own
``judge=``) must get that judge's verdicts from the workers, and name it in meta.json and in
every case; no key reaches the run directory or Ray's session files.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import ray

from referee import CriterionConfig, EvalCase, EvalSuite
from referee.criteria.llm import ResponseMatchCriterion
from referee.evaluators import CustomRubric
from referee.judge import configure
from referee.redact import KEY_ENV_VARS
from referee.report.model import CaseStatus, EvalReport
from referee.scale import RayBackend
from referee.testing import Reply, ScriptedJudgeServer

POLITE = "Is the answer polite?"
CASES = 6
KEY_A = "key-of-judge-a-5d81c0"
KEY_B = "key-of-judge-b-93e2f7"
MATCH_SCORE = json.dumps({"score": 0.9, "reasoning": "the same meaning"})
# The environment that chooses, paces and lets in a judge: a developer's shell must not set it.
JUDGE_ENV = ("JUDGE_PROVIDER", "JUDGE_MODEL", "JUDGE_PANEL", "JUDGE_PANEL_AGGREGATE",
             "JUDGE_PANEL_QUORUM", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "REFEREE_JUDGE_CONCURRENCY", "REFEREE_JUDGE_RPM", "REFEREE_JUDGE_TPM",
             "REFEREE_JUDGE_MAX_RETRIES", *KEY_ENV_VARS, "GOOGLE_GENAI_USE_VERTEXAI")


def _judge(says: str):
    def respond(request):
        return Reply(says if POLITE in request.prompt else MATCH_SCORE)
    return respond


@pytest.fixture
def judges(monkeypatch: pytest.MonkeyPatch):
    for name in JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")
    with ScriptedJudgeServer(_judge("Yes")) as judge_a, ScriptedJudgeServer(_judge("No")) as judge_b:
        try:
            yield judge_a, judge_b
        finally:
            configure(None)


def _suite(*evaluators) -> EvalSuite:
    cases = [EvalCase(input=f"question {i}", expected_output=f"answer {i}") for i in range(CASES)]
    return EvalSuite("judged").add_cases(cases).add_evaluators(*evaluators)


def _answer(question: str) -> str:
    return f"answer {question.split()[1]}"


def _on_ray(suite: EvalSuite, runs_dir: Path) -> EvalReport:
    return suite.run(_answer, verbose=False, runs_dir=runs_dir,
                     backend=RayBackend(shard_size=3, task_cpus=0.5))


def _judged_by(report: EvalReport, criterion: str) -> set[tuple[str, float | None]]:
    return {(r.details.get("judge_model"), r.score) for case in report.cases
            for r in case.criterion_results if r.criterion == criterion}


def _no_key_stored(run_dir: Path) -> None:
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    for root in (run_dir, session / "logs"):
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert KEY_A.encode() not in data and KEY_B.encode() not in data, path


def _environment_names(judge_a: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_PROVIDER", "openai")
    monkeypatch.setenv("JUDGE_MODEL", "judge-a")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_a.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", KEY_A)


def test_the_configured_judge_judges_on_the_workers(ray_cluster: str, judges, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    judge_a, judge_b = judges
    # The environment names judge A; configure() (the layer above it) names judge B.
    _environment_names(judge_a, monkeypatch)
    configure(judge_b.judge_config(model="judge-b", api_key=KEY_B))
    own_judge = judge_a.judge_config(model="judge-a-own", api_key=KEY_A)

    def suite() -> EvalSuite:
        return _suite(CustomRubric([(POLITE, True)], name="polite"),
                      CustomRubric([(POLITE, True)], name="polite_own", judge=own_judge))

    local = suite().run(_answer, verbose=False, runs_dir=tmp_path / "local")
    on_ray = _on_ray(suite(), tmp_path / "ray")

    for report in (local, on_ray):
        assert _judged_by(report, "polite") == {("judge-b", 0.0)}  # B said no
        assert _judged_by(report, "polite_own") == {("judge-a-own", 1.0)}  # its own judge said yes
        assert {case.status for case in report.cases} == {CaseStatus.FAILED}
    assert {r.model for r in judge_b.requests} == {"judge-b"}
    assert {r.model for r in judge_a.requests} == {"judge-a-own"}
    assert len(judge_b.requests) == len(judge_a.requests) == 2 * CASES
    run_dir = Path(on_ray.metadata["run_dir"])
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["judge"]["per_criterion"]["polite"]["model"] == "judge-b"
    assert meta["judge"]["per_criterion"]["polite"]["base_url"] == judge_b.base_url()
    _no_key_stored(run_dir)


def test_the_environment_judge_judges_on_the_workers(ray_cluster: str, judges,
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    judge_a, judge_b = judges
    _environment_names(judge_a, monkeypatch)

    def suite() -> EvalSuite:
        # The AgentEvaluator-style criterion finds its endpoint through OPENAI_BASE_URL.
        match = ResponseMatchCriterion(CriterionConfig(judge_model="openai/judge-a",
                                                       num_samples=1, threshold=0.5))
        return _suite(CustomRubric([(POLITE, True)], name="polite"), match)

    local = suite().run(_answer, verbose=False, runs_dir=tmp_path / "local")
    on_ray = _on_ray(suite(), tmp_path / "ray")

    for report in (local, on_ray):
        assert _judged_by(report, "polite") == {("judge-a", 1.0)}
        assert _judged_by(report, "response_match_score") == {("openai/judge-a", 0.9)}
        assert {case.status for case in report.cases} == {CaseStatus.PASSED}
    assert len(judge_a.requests) == 4 * CASES and not judge_b.requests
    _no_key_stored(Path(on_ray.metadata["run_dir"]))


def test_a_shipped_binding_hides_its_keys_and_needs_no_worker_environment(
        judges, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker receives (issue 29): each criterion's bound judge, holding what the
    driver's environment and configure() chose, keys included; the worker's own say nothing."""
    judge_a, judge_b = judges
    _environment_names(judge_a, monkeypatch)
    configure(judge_b.judge_config(model="judge-b", api_key=KEY_B))
    polite = CustomRubric([(POLITE, True)], name="polite")
    match = ResponseMatchCriterion(CriterionConfig(judge_model="openai/judge-a", num_samples=1))
    for criterion in (polite, match):
        criterion.bind_looked_up_judge()
        criterion.ship_judge()
        assert KEY_A not in repr(criterion.judge_binding())
        assert KEY_B not in repr(criterion.judge_binding())
    shipped = pickle.loads(pickle.dumps([polite, match]))
    # A worker with its own judge environment and no keys.
    configure(None)
    monkeypatch.setenv("JUDGE_MODEL", "the-workers-own")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    by_layers, by_model = (c.judge_config() for c in shipped)
    assert (by_layers.model, by_layers.api_key_value()) == ("judge-b", KEY_B)
    assert (by_model.model, by_model.api_key_value()) == ("judge-a", KEY_A)
    assert by_model.base_url == judge_a.base_url()
