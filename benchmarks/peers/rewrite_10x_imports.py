"""Rewrite 10xgraph test files so that they import from referee: only import lines change.

Usage: rewrite_10x_imports.py [--keep-runtime] FILE...
Every `from tenxgraph.qa.evaluation[.sub] import ...` statement (one line or parenthesised)
is pointed at `referee` (`referee.criteria` for `.criteria[...]` submodules).
With --keep-runtime, the names of 10xgraph's graph runtime (out of scope for referee:
the collectors) keep coming from the installed 10xgraph, so that the rest of a file
that builds a TrajectoryCollector can still be collected and run against referee.
Imports of other tenxgraph packages (core, runtime, utils) are left as they are.
"""
import re
import sys

RUNTIME_NAMES = {"TrajectoryCollector", "EventCollector", "PublisherCallback", "make_trajectory_callback"}
IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from (?P<module>tenxgraph\.qa\.evaluation(?:\.[A-Za-z_.]+)?) import "
    r"(?P<names>\([^)]*\)|[^\n]*)",
    re.M,
)


def target_module(module: str) -> str:
    return "referee.criteria" if module.startswith("tenxgraph.qa.evaluation.criteria") else "referee"


def rewrite(match: re.Match, keep_runtime: bool) -> str:
    indent, module, names = match["indent"], match["module"], match["names"]
    if keep_runtime and module.startswith("tenxgraph.qa.evaluation.collectors"):
        return match[0]
    items = [n.strip() for n in names.strip("()").replace("\n", " ").split(",") if n.strip()]
    kept = [n for n in items if keep_runtime and n.split(" as ")[0].strip() in RUNTIME_NAMES]
    moved = [n for n in items if n not in kept]
    lines = []
    if moved:
        lines.append(f"{indent}from {target_module(module)} import ({', '.join(moved)})")
    if kept:
        lines.append(f"{indent}from {module} import ({', '.join(kept)})")
    # Keep the line count so that tracebacks point at the original line numbers.
    padding = match[0].count("\n") - (len(lines) - 1)
    return "\n".join(lines) + "\n" * max(padding, 0)


def main(argv: list[str]) -> None:
    keep_runtime = "--keep-runtime" in argv
    for path in [a for a in argv if a != "--keep-runtime"]:
        with open(path) as fh:
            text = fh.read()
        text = IMPORT.sub(lambda m: rewrite(m, keep_runtime), text)
        with open(path, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
