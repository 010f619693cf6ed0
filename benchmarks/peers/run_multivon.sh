#!/bin/bash
# Usage: run_multivon.sh REFEREE_ROOT OUTDIR [test files...]
# Copies multivon-eval 0.20.0's tests, changes only import lines to referee, runs them.
set -u
ROOT=$(cd "$1" && pwd); OUT=$2; shift 2
SRC=${MV_TESTS:-${PEERS_DIR:-/tmp/peers}/multivon_eval-0.20.0/tests}
rm -rf "$OUT"; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
for f in "$@"; do cp "$SRC/$f" "$OUT/"; done
sed -i -E \
  -e 's/^(\s*)from multivon_eval\.evaluators\.(deterministic|text_metrics) import/\1from referee.evaluators.\2 import/' \
  -e 's/^(\s*)from multivon_eval\.evaluators import/\1from referee.evaluators import/' \
  -e 's/^(\s*)from multivon_eval\.evaluators\.llm_judge import/\1from referee.evaluators import/' \
  -e 's/^(\s*)from multivon_eval\.calibration import/\1from referee.evaluators.calibration import/' \
  -e 's/^(\s*)from multivon_eval\.judge import/\1from referee.judge import/' \
  -e 's/^(\s*)from multivon_eval\.exceptions import/\1from referee.errors import/' \
  -e 's/^(\s*)from multivon_eval(\.[a-z_.]+)? import/\1from referee import/' \
  -e 's/^(\s*)import multivon_eval$/\1import referee as multivon_eval/' \
  -e 's/^(\s*)import multivon_eval as /\1import referee as /' \
  "$OUT"/*.py
cd "$OUT" && PYTHONPATH=$ROOT timeout 1200 python3 -m pytest -q -p no:cacheprovider -p no:randomly --timeout 60 -o addopts="" --continue-on-collection-errors -rfE --tb=short --junitxml="$OUT/junit.xml" . 2>&1 | tail -n 3000 > "$OUT/result.txt"
tail -1 "$OUT/result.txt"
