"""Issue 7, item 4: bad input gives one clear line naming where and what was expected.

Every check runs the real ``referee`` command as a subprocess (all of them at once, to keep
the file fast) and asserts: exit code 2, exactly one stderr line, the file/line/field and the
expectation named, no traceback, and no half-created run directory. A broken judge cache is
not an input error: the run goes on with live calls after one warning naming the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

AGENT = "def agent(message):\n    return 'ok ' + message\n"
OK_CASES = '{"input": "a"}\n'


def _py(body: str) -> str:
    return textwrap.dedent(body).lstrip()


@dataclass(frozen=True)
class BadInput:
    id: str
    files: dict[str, str | bytes]
    argv: tuple[str, ...]
    expected: tuple[str, ...]


def _case_file(name: str, text: str | bytes, *expected: str) -> BadInput:
    return BadInput(name.replace(".", "-"), {name: text},
                    ("run", name, "--agent", "agent.py:agent"), expected)


def _config(id_: str, config: str, *expected: str) -> BadInput:
    return BadInput(id_, {"config.json": config, "ok.jsonl": OK_CASES},
                    ("run", "ok.jsonl", "--agent", "agent.py:agent", "--config", "config.json"),
                    ("config.json", *expected))


def _python(id_: str, body: str, *expected: str) -> BadInput:
    return BadInput(id_, {"suite_def.py": _py(body)}, ("run", "suite_def.py"),
                    ("suite_def.py", *expected))


BAD_INPUTS = [
    _case_file("bad.json", '{"eval_set_id": "x", "eval_cases": [\n  {"input": "q"},\n'
               '  {"input": "r",}\n]}\n', "bad.json:3", "invalid JSON"),
    _case_file("bad.jsonl", '{"input": "a"}\n{"input": "b"}\n{"input": "c", \n',
               "bad.jsonl:3", "invalid JSON"),
    _case_file("bad.yaml", "eval_set_id: x\neval_cases:\n  - input: a\n   expected_output: b\n",
               "bad.yaml:4", "invalid YAML"),
    _case_file("empty.yaml", "", "empty.yaml", "empty document"),
    _case_file("cells.csv", "input,expected_output\na,b\nc,d,e\n",
               "cells.csv:3", "3 cells but the header names 2 columns"),
    _case_file("quote.csv", 'input,expected_output\na,b\n"c,d\n', "quote.csv:3", "malformed CSV"),
    _case_file("noinput.csv", "question,answer\na,b\n", "noinput.csv:1", "no 'input' column",
               "expected a header with an 'input'"),
    _case_file("latin1.jsonl", '{"input": "caf\u00e9"}\n'.encode("latin-1"),
               "latin1.jsonl", "not UTF-8 text"),
    _case_file("tags.jsonl", '{"input": "a"}\n{"input": "b", "tags": "urgent"}\n',
               "tags.jsonl:2", "field 'tags'", "valid list"),
    _case_file("input.jsonl", '{"input": "a"}\n{"input": 42}\n',
               "input.jsonl:2", "field 'input'", "valid string"),
    _case_file("field.jsonl", '{"input": "a", "expected_tool_trajectroy": []}\n',
               "field.jsonl:1", "field 'expected_tool_trajectroy'",
               "did you mean 'expected_tool_trajectory'?", "expected one of"),
    _case_file("column.csv", "input,expected_outptu\na,b\n", "column.csv:1",
               "column 'expected_outptu' maps to no case field",
               "did you mean 'expected_output'?", "metadata.KEY"),
    # Python cannot hold an integer of more than 4300 digits (sys.get_int_max_str_digits).
    *[_case_file(name, text.replace("LONG", "1" * 5000), name + ":2",
                 "a number longer than 4300 digits", "expected a shorter number")
      for name, text in (("long.json", '[{"input": "a",\n  "metadata": {"n": LONG}}]'),
                         ("long.jsonl",
                          '{"input": "a"}\n{"input": "b", "metadata": {"n": LONG}}\n'),
                         ("long.yaml", "- input: a\n  metadata: {n: LONG}\n"),
                         ("long.csv", 'input,metadata\nb,"{""n"": LONG}"\n'))],
    # A repeated key kept only its last value: the first expectation was lost in silence.
    _case_file("twice.json",
               '[{"input": "a",\n  "expected_output": "x",\n  "expected_output": "y"}]',
               "twice.json:3", "key 'expected_output' appears twice"),
    _case_file("twice.jsonl", '{"input": "a"}\n{"input": "b", "tags": [], "tags": ["x"]}\n',
               "twice.jsonl:2", "key 'tags' appears twice"),
    _case_file("twice.yaml", "- input: a\n  expected_output: x\n  expected_output: y\n",
               "twice.yaml:3", "key 'expected_output' appears twice"),
    _case_file("date.yaml", "- input: a\n  metadata: {due: 2024-13-45}\n", "date.yaml",
               "a value cannot be read: month must be in 1..12"),
    _case_file("deep.json", '[{"input": "a", "metadata": {"n": ' + "[" * 100_000 + "]" * 100_000
               + "}}]", "deep.json", "nested too deeply"),
    _case_file("alias.yaml", "- input: a\n  metadata: &m {inner: *m}\n", "alias.yaml",
               "a YAML alias contains itself"),
    # A lone surrogate reached the agent and failed the case as a MODEL_ERROR (or, without an
    # eval_id, broke the id hash with a codec error naming no file).
    _case_file("lone.jsonl", '{"input": "a"}\n{"eval_id": "b", "input": "x\\ud800"}\n',
               "lone.jsonl:2", "field 'input'", "lone surrogate '\\ud800'",
               "expected valid Unicode text"),
    _case_file("lone.json", '[{"input": "a"},\n {"conversation": [{"user_content": "\\udc00"}]}]',
               "lone.json:2", "field '[1].conversation[0].user_content'", "lone surrogate"),
    _case_file("lone.yaml", '- input: a\n- input: "ok"\n  metadata: {note: "\\ud83d"}\n',
               "lone.yaml:3", "field '[1].metadata.note'", "lone surrogate"),
    # An ADK function-response id that is a list raised "unhashable type: 'list'", no file.
    _case_file("adk.evalset.json", '{"eval_set_id": "s", "eval_cases": [{"eval_id": "c",\n'
               ' "conversation": [{"user_content": {"parts": [{"text": "hi"}]},\n'
               '  "intermediate_data": {"invocation_events": [{"content": {"parts": [\n'
               '   {"function_response": {"id": [1], "response": {}}}]}}]}}]}]}',
               "adk.evalset.json:2", "field 'eval_cases[0].conversation[0]'",
               "a tool call id is a list, expected a string"),
    BadInput("directory-as-case-file", {"cases.json/ok.jsonl": OK_CASES},
             ("run", "cases.json", "--agent", "agent.py:agent"),
             ("cases.json: is a directory, not a file",)),
    _config("unknown-criterion-in-config", '{"criteria": {"no_such_criterion": {}}}',
            "field 'criteria.no_such_criterion'", "expected one of: tool_name_match"),
    _python("unknown-criterion-in-python", """
        from referee.criteria import get_criterion_class
        get_criterion_class("no_such_criterion")
        """, "Unknown criterion 'no_such_criterion'",
            "registered names: composite_criterion, contains_keywords"),
    _config("threshold-above-one-in-config",
            '{"criteria": {"response_match": {"threshold": 1.5}}}',
            "field 'criteria.response_match.threshold'", "between 0.0 and 1.0, got 1.5"),
    _python("threshold-below-zero-on-an-evaluator", """
        from referee.evaluators import Faithfulness
        check = Faithfulness(threshold=-0.2)
        """, "Faithfulness: threshold must be between 0.0 and 1.0, got -0.2"),
    _python("threshold-above-one-on-a-criterion", """
        from referee import CriterionConfig
        config = CriterionConfig(threshold=2)
        """, "CriterionConfig: field 'threshold'", "between 0.0 and 1.0, got 2"),
    _config("num-samples-zero-in-config", '{"criteria": {"llm_judge": {"num_samples": 0}}}',
            "field 'criteria.llm_judge.num_samples'", "at least 1, got 0"),
    _config("num-samples-not-a-number", '{"criteria": {"llm_judge": {"num_samples": "three"}}}',
            "field 'criteria.llm_judge.num_samples'", "valid integer"),
    _python("num-samples-negative-in-python", """
        from referee import CriterionConfig
        config = CriterionConfig.llm_judge(num_samples=-1)
        """, "CriterionConfig: field 'num_samples'", "at least 1, got -1"),
    _python("geval-runs-zero", """
        from referee.evaluators import GEval
        check = GEval("polite", runs=0)
        """, "GEval: runs must be an integer of at least 1, got 0"),
    _config("config-not-json", '{"criteria": {"llm_judge": {}}', "config.json:1",
            "expected a JSON object"),
    # NaN passes every range check ("nan <= 0" is false), so it is refused outright; inf too.
    *[BadInput(f"option-{flag.strip('-')}-{value}", {"ok.jsonl": OK_CASES},
               ("run", "ok.jsonl", "--agent", "agent.py:agent", flag, value),
               (f"argument {flag}", f"got '{value}'"))
      for flag, value in (("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "NaN"),
                          ("--fail-threshold", "nan"), ("--max-error-rate", "nan"))],
    _config("timeout-nan-in-config", '{"timeout": NaN}', "field 'timeout'", "finite number"),
    _config("threshold-nan-in-config", '{"criteria": {"response_match": {"threshold": NaN}}}',
            "field 'criteria.response_match.threshold'", "finite number"),
    _python("judge-timeout-nan", """
        from referee.judge import JudgeConfig
        judge = JudgeConfig(timeout=float("nan"))
        """, "JudgeConfig: field 'timeout'", "finite number"),
    _python("suite-timeout-inf", """
        from referee import EvalCase, EvalSuite
        suite = EvalSuite("s").add_cases([EvalCase(input="a")])
        suite.run(lambda p: p, timeout=float("inf"), save=False)
        """, "timeout must be positive seconds, got inf"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, Path]]:
    """Run every bad input through the CLI at once; (exit code, stderr, its folder) by id."""
    env = {k: v for k, v in os.environ.items() if k != "REFEREE_DEBUG"}
    running = {}
    for bad in BAD_INPUTS:
        folder = tmp_path_factory.mktemp(bad.id)
        (folder / "agent.py").write_text(AGENT)
        for name, content in bad.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        running[bad.id] = (folder, subprocess.Popen(
            [sys.executable, "-m", "referee.cli", *bad.argv, "--out", "runs", "-q"],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = {}
    for ident, (folder, proc) in running.items():
        _, err = proc.communicate(timeout=120)
        results[ident] = (proc.returncode, err, folder)
    return results


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[b.id for b in BAD_INPUTS])
def test_bad_input_is_one_clear_line(outcomes, bad: BadInput) -> None:
    code, err, folder = outcomes[bad.id]
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("referee: error: "), err
    for word in bad.expected:
        assert word in lines[0], (word, lines[0])
    assert code == 2
    runs = folder / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a bad input left a run directory"


SUITE = _py(f"""
    import os
    from pydantic import SecretStr
    from referee import EvalCase, EvalSuite
    from referee.evaluators import CustomRubric
    from referee.judge import JudgeConfig

    judge = JudgeConfig(provider="openai", model="gpt-4o-mini",
                        base_url=os.environ["RELIABILITY_JUDGE_URL"] + "/v1",
                        api_key=SecretStr({DUMMY_API_KEY!r}))
    suite = EvalSuite("cache")
    suite.add_cases([EvalCase(input=f"[case-{{i}}] q") for i in range(3)])
    suite.add_evaluator(CustomRubric([("Is it fine?", True)], judge=judge))

    def model(prompt):
        return "fine " + prompt
""")


@pytest.mark.parametrize("damage", ["garbage-bytes", "directory-in-its-place"])
def test_unreadable_cache_file_warns_once_and_the_run_goes_on(tmp_path: Path, damage: str) -> None:
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    cache_file = cache_dir / "judge_cache.sqlite3"
    if damage == "garbage-bytes":
        cache_file.write_bytes(b"\x00not a database\xff" * 400)
    else:
        (cache_file / "junk").mkdir(parents=True)
    (tmp_path / "suite_def.py").write_text(SUITE)
    with ScriptedJudgeServer("Yes") as server:
        env = {k: v for k, v in os.environ.items() if k != "REFEREE_DEBUG"}
        env.update(RELIABILITY_JUDGE_URL=server.url, REFEREE_CACHE="1",
                   REFEREE_CACHE_DIR=str(cache_dir))
        done = subprocess.run([sys.executable, "-m", "referee.cli", "run", "suite_def.py",
                               "--out", "runs", "-q", "--format", "json"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert server.request_count == 3  # live calls, one per case
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3 passed, 0 failed, 0 errors")
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert str(cache_file) in lines[0] and "continuing with live calls" in lines[0]
