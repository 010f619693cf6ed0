"""The benchmark virtual environment holding the peers, created and filled on first use.

The peers are never dependencies of referee: they live only in this environment, and their
runners are started with its interpreter. Versions are pinned so that numbers from two machines
compare the same code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VENV = REPO_ROOT / ".bench-venv"

PEER_PACKAGES = {
    "multivon-eval": "multivon-eval==0.20.0",
    "deepeval": "deepeval==4.3.1",
}
# The Python module each peer's runner imports, to tell an installed peer from a missing one.
PEER_MODULES = {"multivon-eval": "multivon_eval", "deepeval": "deepeval"}


def venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _has_module(python: Path, module: str) -> bool:
    probe = subprocess.run([str(python), "-c", f"import importlib.util, sys; "
                            f"sys.exit(importlib.util.find_spec({module!r}) is None)"],
                           capture_output=True)
    return probe.returncode == 0


def ensure_peers(peers: list[str], venv_dir: Path = DEFAULT_VENV, *, log=print) -> Path:
    """Create ``venv_dir`` if needed and install the missing peers; returns its interpreter."""
    unknown = [p for p in peers if p not in PEER_PACKAGES]
    if unknown:
        raise ValueError(f"unknown peer(s) {unknown}; expected some of {sorted(PEER_PACKAGES)}")
    python = venv_python(venv_dir)
    if not python.exists():
        log(f"creating the benchmark virtualenv {venv_dir}")
        venv.EnvBuilder(with_pip=True, clear=False).create(venv_dir)
    missing = [p for p in peers if not _has_module(python, PEER_MODULES[p])]
    if missing:
        specs = [PEER_PACKAGES[p] for p in missing]
        log(f"installing {' '.join(specs)} into {venv_dir} (first run only)")
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *specs],
                              stdout=sys.stderr, stderr=sys.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {specs} into {venv_dir} "
                               f"(exit status {done.returncode}); see the pip output above")
    return python
