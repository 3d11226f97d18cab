"""Which code a run ran: the git commit of the checkout gamerl was imported from, and whether it
had uncommitted changes to tracked files (summary.json's ``git_commit`` and ``git_dirty``).
Numbers in the docs name the commit they were measured at (bench/doc_numbers.py); reading it
from the run, not from the checkout afterwards, keeps that true when work goes on meanwhile."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

__all__ = ["code_version"]


def code_version() -> dict[str, Optional[object]]:
    """``{"git_commit": sha or None, "git_dirty": bool or None}`` (None: not a git checkout, or
    no git)."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> Optional[str]:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                 timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "git_dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}
