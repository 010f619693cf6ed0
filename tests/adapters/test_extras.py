"""The framework adapters are extras: referee imports without them and says which to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess:
    # A None entry in sys.modules makes "import name" fail as if it were not installed.
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_referee_imports_without_the_frameworks_and_names_the_missing_extra():
    result = run_without(["agents", "agents.items", "langgraph"], """
        import referee, sys
        from referee import AgentEvaluator
        from referee.adapters import score_traces, OpenAIAgentsAgent, LangGraphAgent
        for adapter in (OpenAIAgentsAgent, LangGraphAgent):
            try:
                adapter(object())
            except ImportError as exc:
                print(exc)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("this adapter needs the 'openai-agents' extra: "
                               "pip install 'referee[openai-agents]'")
    assert lines[1].startswith("this adapter needs the 'langgraph' extra: "
                               "pip install 'referee[langgraph]'")


def test_import_referee_loads_no_adapter_module():
    result = subprocess.run([sys.executable, "-c", "import referee, referee.cli, sys; print("
                             "sorted(m for m in sys.modules if m.startswith('referee.adapters') "
                             "or m.split('.')[0] in ('agents', 'langgraph', 'langchain_core')))"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
