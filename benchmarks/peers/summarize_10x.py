"""Per-file counts of a run_10x.sh result against 10xgraph's own run of the same files.

Usage: summarize_10x.py JUNIT_XML NATIVE_JUNIT_XML
Denominators come from the native run (10xgraph 0.10.3 testing itself: 364 tests, all pass);
a file that failed to import counts all its tests as not run.
"""
import collections
import sys
import xml.etree.ElementTree as ET


def per_file(path):
    counts = collections.defaultdict(collections.Counter)
    for case in ET.parse(path).iter("testcase"):
        module = (case.get("classname") or "").split(".")[0] + ".py"
        if case.find("error") is not None and not case.get("name"):
            continue
        if case.get("classname", "") == "" :
            continue
        outcome = "passed"
        if case.find("failure") is not None:
            outcome = "failed"
        elif case.find("error") is not None:
            outcome = "error"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        counts[module][outcome] += 1
    return counts


run = per_file(sys.argv[1])
native = per_file(sys.argv[2])
total_passed = total = 0
print(f"{'file':34} {'tests':>5} {'pass':>5} {'fail':>5} {'not run':>7}")
for module in sorted(native):
    n = sum(native[module].values())
    got = run.get(module, collections.Counter())
    ran = sum(got.values())
    print(f"{module:34} {n:5} {got['passed']:5} {got['failed'] + got['error']:5} {n - ran:7}")
    total += n
    total_passed += got["passed"]
print(f"{'TOTAL':34} {total:5} {total_passed:5}")
