"""One RunOptions per run: checked whole when built, frozen, and what every front door passes on;
the criteria's judges described once; a resume decided once (ResumePlan)."""

from __future__ import annotations

import io

import pytest

from referee import EvalCase, EvalSuite
from referee.evaluators.deterministic import Contains
from referee.judge import JudgeConfig
from referee.run.describe import describe_run
from referee.run.engine import case_keys
from referee.run.judge_gate import JudgeGate
from referee.run.options import RunOptions, flag_spelling
from referee.run.resume import ResumePlan


@pytest.mark.parametrize(("values", "message"), [
    ({"retry_errors": True}, "retry_errors=True goes with resume=RUN_DIR"),
    ({"rescore": True}, "rescore=True goes with resume=RUN_DIR"),
    ({"formats": "json,pdf"}, "formats: unknown report format 'pdf'"),
    ({"formats": ("json",), "save": False}, "report formats json need a stored run"),
    ({"max_error_rate": 1.5}, "max_error_rate must be between 0.0 and 1.0, got 1.5"),
    ({"fail_threshold": -0.1}, "fail_threshold must be between 0.0 and 1.0, got -0.1"),
    ({"judge_gate": JudgeGate(gate_on="corrected")}, "gate_on='corrected' gates fail_threshold"),
    ({"judge_gate": JudgeGate(min_kappa=2.0)}, "min_kappa must be between -1.0 and 1.0"),
    ({"concurrency": 0}, "concurrency must be at least 1, got 0"),
    ({"timeout": float("nan")}, "timeout must be positive seconds, got nan"),
    ({"runs": 0}, "runs must be a positive int, got 0"),
    ({"runs": True}, "runs: Input should be a valid integer"),
    ({"criterion_concurrency": 0}, "evaluator_concurrency must be a positive int or None"),
    ({"retry_error": True}, "unexpected option 'retry_error'"),
])
def test_options_are_checked_when_built_in_one_line_naming_the_option(values, message):
    with pytest.raises(ValueError) as info:
        RunOptions(**values)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_options_built_for_the_command_line_name_its_flags():
    with pytest.raises(ValueError, match=r"^--rescore goes with --resume RUN_DIR"):
        RunOptions.from_command_line(rescore=True)
    with pytest.raises(ValueError, match=r"^--format: unknown report format 'xml'"):
        RunOptions.from_command_line(formats="xml")
    with flag_spelling(), pytest.raises(ValueError, match=r"^--gate-on corrected gates "
                                                          r"--fail-threshold RATE; give one"):
        RunOptions(judge_gate=JudgeGate(gate_on="corrected"))
    # Outside the command line, the Python spelling again.
    with pytest.raises(ValueError, match=r"^retry_errors=True goes with resume=RUN_DIR"):
        RunOptions(retry_errors=True)


def test_options_are_parsed_once_and_frozen():
    options = RunOptions(formats=" JSON,console,json ", quiet=True, metadata={"a": 1})
    assert options.formats == ("json",) and options.file_formats == ("json",)
    assert options.verbose is False and not options.prints_summary
    with pytest.raises(ValueError, match="frozen"):
        options.concurrency = 3  # type: ignore[misc]
    given = {"team": "search"}
    assert RunOptions(metadata=given).metadata is not given


def test_a_front_door_takes_one_options_object_or_its_keywords_not_both(tmp_path):
    suite = EvalSuite("opts").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    suite.add_evaluator(Contains(["answer"]))
    options = RunOptions(save=False, verbose=False, concurrency=1)
    report = suite.run(lambda prompt: f"answer to {prompt}", options=options)
    assert (report.passed, report.total) == (2, 2) and "run_dir" not in report.metadata
    with pytest.raises(TypeError, match="either as options="):
        suite.run(lambda prompt: prompt, options=options, timeout=3)


class _CountedJudge(Contains):
    """A deterministic evaluator that names a judge, counting how often it is asked which."""

    def __init__(self) -> None:
        super().__init__(["answer"])
        self.asked = 0
        self.asked_before_first_case: int | None = None

    def judge_config(self) -> JudgeConfig:
        self.asked += 1
        return JudgeConfig(provider="openai", model="gpt-4o-mini")

    async def evaluate(self, *args, **kwargs):
        if self.asked_before_first_case is None:
            self.asked_before_first_case = self.asked
        return await super().evaluate(*args, **kwargs)


def test_the_run_record_resolves_each_criterion_judge_once(tmp_path, capsys):
    counted = _CountedJudge()
    suite = EvalSuite("judged").add_case(EvalCase(input="q")).add_evaluator(counted)
    report = suite.run(lambda prompt: "answer", verbose=True, runs_dir=tmp_path)
    # meta.json's criteria, the report's judge, the announcement and the calibration record
    # after the run share one resolution.
    assert counted.asked_before_first_case == 1
    assert counted.asked == 1
    assert report.judge_calibration["contains"].judge == "openai/gpt-4o-mini"
    assert report.judge == {"provider": "openai", "model": "gpt-4o-mini"} | {
        k: v for k, v in report.judge.items() if k not in ("provider", "model")}
    assert "referee: judge for contains: openai/gpt-4o-mini" in capsys.readouterr().err

    description = describe_run([counted])
    stream = io.StringIO()
    description.announce(stream)
    assert description.criteria[0]["settings"]["resolved_judge"]["model"] == "gpt-4o-mini"
    assert "openai/gpt-4o-mini" in stream.getvalue()


def test_a_resume_plan_decides_once_what_is_kept_and_what_runs_again(tmp_path):
    cases = [EvalCase(eval_id=f"c{i}", input=f"q{i}") for i in range(4)]
    suite = EvalSuite("plan").add_cases(cases).add_evaluator(Contains(["answer"]))

    def flaky(prompt: str) -> str:
        if prompt in ("q1", "q3"):
            raise RuntimeError("model outage")
        return "answer"

    first = suite.run(flaky, verbose=False, runs_dir=tmp_path)
    run_dir = first.metadata["run_dir"]
    description = describe_run(suite.evaluators)
    keys = case_keys(cases)

    options = RunOptions(resume=run_dir, retry_errors=True, verbose=False)
    plan, store = ResumePlan.open(options, cases, keys, description)
    store.release()
    assert plan.finished == {"c0", "c2"} and not plan.outputs and not plan.rescore
    assert plan.version == 2  # the errored attempts stay readable as scoring 1

    rescore = RunOptions(resume=run_dir, rescore=True, verbose=False)
    plan, store = ResumePlan.open(rescore, cases, keys, description)
    store.release()
    # Stored outputs are scored again; the cases without one (model errors) are kept.
    assert set(plan.outputs) == {"c0", "c2"} and plan.finished == {"c1", "c3"}
    assert plan.rescore and plan.meta["case_ids"] == keys


def test_a_stored_run_checks_its_settings_and_judge_environment_once(tmp_path, monkeypatch):
    import referee.run.engine as engine_module

    calls = {"ranges": 0, "prices": 0}
    ranges, prices = engine_module.check_engine_settings, engine_module.load_env_price_file

    def counted_ranges(**kwargs):
        calls["ranges"] += 1
        return ranges(**kwargs)

    def counted_prices():
        calls["prices"] += 1
        return prices()

    monkeypatch.setattr(engine_module, "check_engine_settings", counted_ranges)
    monkeypatch.setattr(engine_module, "load_env_price_file", counted_prices)
    suite = EvalSuite("checked").add_case(EvalCase(input="q")).add_evaluator(Contains(["a"]))
    suite.run(lambda prompt: "a", verbose=False, runs_dir=tmp_path)
    # RunOptions checked the ranges when it was built (with its own reference to the check);
    # run_stored checked the judge environment before opening the run: the engine repeats
    # neither.
    assert calls == {"ranges": 0, "prices": 1}
    engine_module.Engine([Contains(["a"])])  # an engine built by hand still checks both
    assert calls == {"ranges": 1, "prices": 2}
