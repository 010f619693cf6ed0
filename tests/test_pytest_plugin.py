"""The pytest plugin, used the way a user would: from a test file in their own project."""

from __future__ import annotations

import pytest

from referee import EvalCase
from referee.evaluators.deterministic import Contains, NotEmpty
from referee.run.assertions import assert_passes, failure_message

pytest_plugins = ["pytester"]

USER_TESTS = '''
from referee import CustomRubric, EvalCase
from referee.evaluators.deterministic import Contains, NotEmpty
from referee.pytest_plugin import assert_passes


def test_good_answer():
    result = assert_passes("What is 2+2?", "The answer is 4.", [Contains(["4"]), NotEmpty()])
    assert result.passed


def test_bad_answer():
    assert_passes(EvalCase(input="Refund?", name="refund question"), "Contact us.",
                  [Contains(["refund", "7 days"]), NotEmpty()])


async def test_inside_a_running_event_loop():
    assert_passes("q", "ok", Contains(["ok"]))


def test_with_the_scripted_judge(judge_server):
    rubric = CustomRubric(criteria=[("Is the reply polite?", True)],
                          judge=judge_server.judge_config())
    assert_passes("Say thanks", "Thank you kindly!", [rubric])
    assert judge_server.request_count == 1
'''


def test_plugin_from_a_users_test_file(pytester):
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "*referee: 'refund question' FAILED*",
        "*- contains (score 0.00 < threshold 1.00): *",
        "*referee: 4 assert_passes check(s): 3 passed, 1 failed; judge calls 1*",
    ])
    assert "not_empty" not in result.stdout.str().split("refund question")[1].split("\n\n")[0]


def test_failure_message_lists_every_problem():
    class Broken(NotEmpty):
        name = "broken"

        def evaluate_sync(self, actual, case):  # the one signature (issue 29: no check())
            raise RuntimeError("regex failed to compile")

    with pytest.raises(AssertionError) as info:
        assert_passes({"input": "q", "name": "n"}, "text", [Contains(["zzz"]), Broken()])
    message = str(info.value)
    # A known failure beats an unknown (docs/architecture.md); the error is still listed.
    assert message.splitlines()[0] == "referee: 'n' FAILED"
    assert "- contains (score 0.00 < threshold 1.00)" in message
    assert "- broken (evaluator error): RuntimeError: regex failed to compile" in message


def test_all_skipped_is_not_a_pass():
    from referee.evaluators.deterministic import ExactMatch

    with pytest.raises(AssertionError, match="SKIPPED — no evaluator could score it"):
        assert_passes(EvalCase(input="q"), "anything", ExactMatch())


def test_bad_arguments_are_clear():
    with pytest.raises(TypeError, match="case_or_input must be"):
        assert_passes(3, "x", Contains(["x"]))
    with pytest.raises(ValueError, match="at least one evaluator"):
        assert_passes("q", "x", [])


def test_model_error_output_is_reported():
    from referee import ExecutionResult

    with pytest.raises(AssertionError) as info:
        assert_passes("q", ExecutionResult(error="agent crashed"), Contains(["x"]))
    assert "MODEL_ERROR" in str(info.value) and "agent crashed" in str(info.value)
    assert failure_message  # the helper the plugin's messages come from is public
