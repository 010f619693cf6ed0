"""docs/calibration.md's loop, command by command, as a team would run it in CI: `referee run`,
a person's labels on that run (`referee labels import`), `referee calibrate --from-run`, the run
again with the calibrated threshold (its corrected pass rate), and the gates on it. The judge is
simulated with known TPR and TNR behind the scripted server, through the real OpenAI SDK."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from test_corrected_pass_rates import CRITERIA, JUDGE_FAIL, JUDGE_PASS, server  # noqa: E402,F401

from referee.cli import main  # noqa: E402

TRUE_RATE, TPR, TNR = 0.5, 0.9, 0.6  # the judge shows 0.9 * 0.5 + 0.4 * 0.5 = 65%
CASES, LABELLED = 300, 200

SUITE = textwrap.dedent('''
    import os
    import random

    from referee import EvalCase, EvalSuite
    from referee.evaluators import GEval
    from referee.judge import JudgeConfig

    THRESHOLD = os.environ.get("LOOP_THRESHOLD", "0.5")
    JUDGED = GEval({criteria!r}, runs=1, judge=JudgeConfig(provider="openai", model="gpt-4o-mini"),
                   threshold=THRESHOLD if THRESHOLD == "calibrated" else float(THRESHOLD))

    # Each output truly passes at TRUE_RATE; the simulated judge keeps a good one with
    # probability TPR and catches a bad one with probability TNR (its verdict rides in a marker).
    rng = random.Random({seed})
    OUTPUTS, TRUTH = {{}}, {{}}
    for i in range({cases}):
        good = rng.random() < {true_rate}
        judged_pass = rng.random() < {tpr} if good else rng.random() >= {tnr}
        OUTPUTS[f"q{{i:03d}}"] = ({judge_pass!r} if judged_pass else {judge_fail!r}) + f" answer {{i}}"
        TRUTH[f"q{{i:03d}}"] = good

    suite = EvalSuite(name="support answers")
    suite.add_evaluator(JUDGED)
    suite.add_cases([EvalCase(eval_id=key, input=key) for key in OUTPUTS])


    def model(question):
        return OUTPUTS[question]
''')


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _suite(folder: Path, seed: int) -> tuple[Path, dict[str, bool]]:
    folder.mkdir(parents=True)
    path = folder / "suite.py"
    path.write_text(SUITE.format(criteria=CRITERIA, seed=seed, cases=CASES, true_rate=TRUE_RATE,
                                 tpr=TPR, tnr=TNR, judge_pass=JUDGE_PASS, judge_fail=JUDGE_FAIL))
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # the truth the test knows
    return path, namespace["TRUTH"]


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def _newest_run(runs: Path) -> Path:
    return max((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)


def test_run_label_calibrate_corrected_report_and_gate_through_the_cli(
        server, tmp_path, capsys, monkeypatch):
    covered = raw_covered = 0
    seeds = range(3)
    for seed in seeds:
        folder = tmp_path / f"seed{seed}"
        suite, truth = _suite(folder, seed)
        runs, calibration = folder / "runs", folder / "calibration.json"
        monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))
        monkeypatch.delenv("LOOP_THRESHOLD", raising=False)

        # 1. Run.
        code, said = _cli(capsys, "run", str(suite), "--out", str(runs), "-q")
        assert code == 0, said
        run_dir = _newest_run(runs)
        # 2. Label: a person's verdicts on the first 200 judged outputs.
        person = folder / "person.jsonl"
        person.write_text("".join(json.dumps({
            "label": "pass" if good else "fail",
            "metadata": {"case_id": key, "criterion": "g_eval"}}) + "\n"
            for key, good in list(truth.items())[:LABELLED]))
        code, said = _cli(capsys, "labels", "import", str(run_dir), str(person),
                          "--labeller", "ana")
        assert code == 0 and f"{LABELLED} label(s) added" in said, said
        # 3. Calibrate from the run: the stored outputs replayed to the judge, no model asked.
        code, said = _cli(capsys, "calibrate", "--from-run", str(run_dir), "--evaluator",
                          f"{suite}:JUDGED", "--folds", "4", "--resamples", "200",
                          "--out", str(folder / "calibrations"), "-q")
        assert code == 0, said
        [entry] = json.loads(calibration.read_text())["entries"]
        assert entry["positives"] + entry["negatives"] == LABELLED
        assert entry["agreement_source"] == "cross-validated, 4 folds"
        # 4. Run again at the calibrated threshold: report.json has the corrected pass rate.
        monkeypatch.setenv("LOOP_THRESHOLD", "calibrated")
        code, said = _cli(capsys, "run", str(suite), "--out", str(runs), "--format", "console,json,html")
        assert code == 0, said
        assert "Pass rates corrected for judge error" in said
        corrected_run = _newest_run(runs)
        corrected = json.loads((corrected_run / "report.json").read_text())["corrected"]["run"]
        assert corrected["supported"] and corrected["scored"] == CASES
        covered += corrected["low"] <= TRUE_RATE <= corrected["high"]
        low, high = wilson(corrected["passed"], corrected["scored"])
        raw_covered += low <= TRUE_RATE <= high
        assert 'id="corrected"' in (corrected_run / "report.html").read_text()
    assert covered >= len(seeds) - 1, covered
    assert raw_covered == 0  # the raw rate carries the judge's errors

    # 5. Gate: the raw rate clears 60%, the corrected one's lower bound does not; and a judge
    # measured below the required kappa is refused.
    gate = ["run", str(suite), "--out", str(runs), "-q", "--require-calibrated"]
    code, said = _cli(capsys, *gate, "--min-kappa", "0.2", "--fail-threshold", "0.6")
    assert code == 0, said
    code, said = _cli(capsys, *gate, "--min-kappa", "0.2", "--fail-threshold", "0.6",
                      "--gate-on", "corrected")
    assert code == 1 and "corrected pass rate lower bound" in said, said
    code, said = _cli(capsys, *gate, "--min-kappa", "0.9")
    assert code == 1 and "calibrated kappa" in said and "< 0.90" in said, said
