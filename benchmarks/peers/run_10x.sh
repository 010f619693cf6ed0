#!/bin/bash
# Usage: run_10x.sh REFEREE_ROOT OUTDIR [--keep-runtime]
# 10xgraph's 17 evaluation test files (tests/evaluation/ of 10xGraph/10xGraph) run against
# referee with only import lines changed (rewrite_10x_imports.py).
# --keep-runtime: run under a Python 3.12 venv with 10xgraph 0.10.3 installed
# (PYTHON, default /tmp/s12x_venv312/bin/python), where the graph-runtime names
# (TrajectoryCollector, EventCollector, PublisherCallback) keep coming from 10xgraph.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS_DIR:-/tmp/peers}  # see README.md: where the peer packages and tests were put
ROOT=$(cd "$1" && pwd); OUT=$2; MODE=${3:-}
PY=python3
if [ "$MODE" = "--keep-runtime" ]; then PY=${PYTHON:-/tmp/s12x_venv312/bin/python}; fi
rm -rf "$OUT"; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); cp "$PEERS/10x_tests/"*.py "$OUT/"
python3 "$HERE/rewrite_10x_imports.py" $MODE "$OUT"/*.py
cd "$OUT" && PYTHONPATH=$ROOT timeout 1200 $PY -m pytest -q -p no:cacheprovider --timeout 60 -o addopts="" --continue-on-collection-errors --junitxml="$OUT/junit.xml" -rfE . > "$OUT/result.txt" 2>&1
tail -1 "$OUT/result.txt"
python3 "$HERE/summarize_10x.py" "$OUT/junit.xml" "$PEERS/10x_native_junit.xml"
