"""The sentinel home of the test processes (design decision 18): its state and checks.

A module of its own, not conftest.py: a test subfolder's conftest.py takes over the module
name ``conftest``, so a test importing ``conftest`` could get the wrong one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# Nothing a test does may reach the user's home or cache (design decision 18). Each test
# process points the home and the XDG directories (where platformdirs puts the judge cache and
# anything else per user) at a sentinel directory of its own, so a write meant for them lands
# there instead, and the test that made it fails (a created or a changed file alike).
USER_DIR_VARIABLES = ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                      "XDG_STATE_HOME", "LOCALAPPDATA", "APPDATA")
sentinel_home: Path | None = None
test_caches: Path | None = None  # where each test's own judge cache folder goes


def point_user_dirs_at_a_sentinel() -> None:
    global sentinel_home, test_caches
    sentinel_home = Path(tempfile.mkdtemp(prefix="referee-tests-home-"))
    test_caches = Path(tempfile.mkdtemp(prefix="referee-tests-caches-"))
    for name in USER_DIR_VARIABLES:
        folder = sentinel_home / name.lower()
        folder.mkdir()
        os.environ[name] = str(folder)


def remove_the_sentinel() -> None:
    for folder in (sentinel_home, test_caches):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def user_dir_entries() -> dict[Path, tuple[int, int]]:
    """Every file and folder under the sentinel home, with its size and modification time (a
    cache that already exists is written to, not created)."""
    found: dict[Path, tuple[int, int]] = {}
    if sentinel_home is not None:
        for folder, dirs, files in os.walk(sentinel_home):
            for name in (*dirs, *files):
                path = Path(folder) / name
                try:
                    stat = path.lstat()
                except OSError:  # gone meanwhile
                    continue
                # A folder's own times change with what is put in it, which is seen anyway.
                found[path] = ((0, 0) if path.is_dir() and not path.is_symlink()
                               else (stat.st_size, stat.st_mtime_ns))
    return found


def written_to_user_dirs(before: dict[Path, tuple[int, int]]) -> str | None:
    """The failure message for what was created or changed under the user's directories since
    ``before`` (None: nothing was)."""
    written = sorted(path for path, stat in user_dir_entries().items()
                     if before.get(path) != stat)
    if not written:
        return None
    shown = ", ".join(map(str, written[:3]))
    more = f" and {len(written) - 3} more" if len(written) > 3 else ""
    return (f"this test wrote {len(written)} path(s) under the user's home or cache "
            f"directories ({shown}{more}); write under tmp_path instead (a judge cache: "
            "cache_path=, or the reply_cache_in_tmp_path fixture)")
