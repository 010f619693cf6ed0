"""What the storable check costs per case (referee.storable, design decision 13).

    python -m benchmarks.storable_check            # 2,000 cases, check on and off, twice each

Every finished case is checked once for values JSON cannot hold. This runs one suite of
2,000 cases with two deterministic criteria and a sync model (the case where engine overhead
shows most, since nothing else takes time), stored with the JSON report, and prints the
process CPU seconds with the check and with it skipped, alternating, each in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

CASES = 2000


def one_run(check: bool, runs_dir: str) -> float:
    import referee.run.engine as engine
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains, ExactMatch

    if not check:
        engine._storable = lambda result: result  # type: ignore[assignment]
    suite = EvalSuite("storable-check")
    suite.add_cases([EvalCase(input=f"q{i}", expected_output="30 days") for i in range(CASES)])
    suite.add_evaluators(Contains(["30 days"]), ExactMatch())
    started = time.process_time()
    suite.run(lambda prompt: "Refunds within 30 days " + prompt, verbose=False,
              runs_dir=runs_dir, formats=["json"])
    return time.process_time() - started


def main() -> None:
    if len(sys.argv) == 3:
        print(f"{one_run(sys.argv[1] == 'on', sys.argv[2]):.2f}")
        return
    with tempfile.TemporaryDirectory() as runs_dir:
        for mode in ("on", "off", "on", "off"):
            cpu = subprocess.run([sys.executable, "-m", "benchmarks.storable_check", mode, runs_dir],
                                 capture_output=True, text=True, check=True).stdout.strip()
            print(f"check {mode:3}  {CASES} cases  CPU {cpu} s")


if __name__ == "__main__":
    main()
