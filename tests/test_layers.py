"""The layers docs/architecture.md draws: the record renders nothing and imports no view, the
store imports no view, the data model and the match modes import one way without imports
hidden inside functions, and the report's old module paths still import the moved modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "referee"

def _imports(path: Path) -> list[tuple[str, set[str], bool]]:
    """(module, names, inside a function) of each referee import in ``path``."""
    tree = ast.parse(path.read_text())
    nested = {id(node) for fn in ast.walk(tree)
              if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
              for node in ast.walk(fn)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("referee"):
            found.append((node.module or "", {a.name for a in node.names}, id(node) in nested))
        elif isinstance(node, ast.Import):
            found += [(a.name, set(), id(node) in nested) for a in node.names
                      if a.name.startswith("referee")]
    return found


def _views_imported(path: Path) -> list[str]:
    return [f"{path.name}: {module} {sorted(names)}" for module, names, _ in _imports(path)
            if module == "referee.report" or module.startswith("referee.report.")]


@pytest.mark.parametrize("package", ["record", "store"])
def test_the_record_and_the_store_import_no_view(package: str) -> None:
    modules = sorted((PACKAGE / package).glob("*.py"))
    assert modules
    assert [line for path in modules for line in _views_imported(path)] == []


@pytest.mark.parametrize("relative", ["messages.py", "case.py", "execution.py", "compat/adk.py",
                                      "criteria/matching", "record", "store"])
def test_no_referee_import_is_hidden_in_a_function(relative: str) -> None:
    target = PACKAGE / relative
    paths = sorted(target.glob("*.py")) if target.is_dir() else [target]
    hidden = [f"{path.relative_to(PACKAGE)}: {module}" for path in paths
              for module, names, inside in _imports(path)
              if inside]
    assert hidden == []


def test_importing_the_record_loads_no_view_until_it_renders() -> None:
    script = (
        "import sys\n"
        "from referee.record import EvalReport\n"
        "from referee.store import RunStore\n"
        "assert not [m for m in sys.modules if m.startswith('referee.report')], sorted(sys.modules)\n"
        "text = EvalReport(name='layered').format_summary()\n"
        "assert 'layered' in text, text\n"
        "assert 'referee.report._record_views' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_old_report_module_paths_are_the_moved_modules() -> None:
    import referee.record._model
    import referee.record._trials
    import referee.report.model
    import referee.report.store
    import referee.report.trials
    import referee.store._run_store
    from referee.report import case_file, versions
    from referee.report.model import EvalReport
    from referee.report.store import load_run
    from referee.report.trials import pass_at_k

    assert referee.report.model is referee.record._model
    assert referee.report.store is referee.store._run_store
    assert referee.report.trials is referee.record._trials
    assert case_file.StoredCases.__module__ == "referee.store._case_file"
    assert versions.split_ref("run@2")[1] == 2
    assert EvalReport is referee.record.EvalReport
    assert load_run is referee.store.load_run
    assert pass_at_k(4, 2, 1) == 0.5


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_import_graph() -> dict[str, set[str]]:
    """Each referee module -> the referee modules it imports when it runs: at the top and
    inside functions alike (a function-level import only postpones a circle), leaving out
    ``if TYPE_CHECKING:`` blocks. ``from referee.x import y`` counts as importing ``referee.x.y``
    when that is a module."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(node) for block in ast.walk(tree)
                       if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                       for statement in block.body for node in ast.walk(statement)}
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("referee"):
                module = node.module or ""
                targets |= {f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module
                            for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("referee")}
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_circle_finder_finds_a_circle_held_by_a_function_level_import() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_runtime_import_circle() -> None:
    # issue 29: config.py <-> judge/config.py <-> judge/panel.py and run/agent.py <->
    # run/simulator.py were held together by imports inside functions.
    circles = _circles(_runtime_import_graph())
    assert not [c for c in circles if "referee.config" in c or "referee.run.agent" in c]
    # judge/config.py <-> judge/panel.py went when configure() moved above both
    # (judge/global_judge.py). Nothing may circle.
    assert circles == []


# The core speaks referee's own vocabulary (design decision 15). run/agent.py, the 10xgraph-style
# AgentEvaluator, is a surface: it runs an ADK case's conversation_scenario through the user
# simulator, and reads that scenario with the edge's reader.
CORE = ["messages.py", "case.py", "execution.py", "result.py", "usage.py", "storable.py",
        "_strict.py", "record", "store", "judge", "criteria", "run"]
SURFACES_IN_THE_CORE = {"run/agent.py"}


def _core_modules() -> list[Path]:
    paths = []
    for relative in CORE:
        target = PACKAGE / relative
        paths += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    return [p for p in paths if str(p.relative_to(PACKAGE)) not in SURFACES_IN_THE_CORE]


def test_no_core_module_imports_the_edge() -> None:
    modules = _core_modules()
    assert len(modules) > 60
    edge = [f"{path.relative_to(PACKAGE)}: {module}" for path in modules
            for module, names, _ in _imports(path)
            if module in ("referee.compat", "referee._adk") or module.startswith("referee.compat.")
            or (module == "referee" and names & {"compat", "_adk"})]
    assert edge == []


def test_the_case_model_reads_no_adk_keys() -> None:
    # An ADK key given to the model itself is an unknown key: ADK files are read at the edge.
    from referee.case import EvalCase, Invocation

    with pytest.raises(ValueError, match="final_response"):
        Invocation(user_content="hi", final_response={"parts": [{"text": "x"}], "role": "model"})
    with pytest.raises(ValueError, match="conversation_scenario"):
        EvalCase(conversation_scenario={"starting_prompt": "hi"})


def test_the_old_adk_path_is_the_edge_module() -> None:
    import referee._adk
    import referee.compat.adk
    from referee import _adk

    assert referee._adk is referee.compat.adk is _adk
