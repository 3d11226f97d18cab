"""Which code a run ran: the git commit of the checkout gamerl was imported from, and whether it
had uncommitted changes to tracked files (summary.json's ``git_commit`` and ``git_dirty``).
Numbers in the docs name the commit they were measured at (bench/doc_numbers.py); reading it
from the run, not from the checkout afterwards, keeps that true when work goes on meanwhile."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Optional

__all__ = ["code_version", "cpu_generation", "cpu_model", "host"]


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


def _first_cpu() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo ({} where there is none)."""
    try:
        block = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` says."""
    return _first_cpu().get("model name") or platform.processor() or platform.machine()


def cpu_generation() -> str:
    """``family F model M`` from /proc/cpuinfo ('' where it has none). The model name alone is
    not enough: two Intel Xeon generations both called "Intel(R) Xeon(R) Processor" (one with AMX,
    one without) sampled different quick runs from the same commit (2026-11-28)."""
    cpu = _first_cpu()
    return (f"family {cpu['cpu family']} model {cpu['model']}"
            if "cpu family" in cpu and "model" in cpu else "")


def host() -> dict[str, Optional[object]]:
    """What ran the run (summary.json's ``host``): the CPU's model name and the vector
    instructions torch's kernels use there, the accelerator's name, the torch build, its CPU
    threads and the transformers version. The same commit and seed can
    sample other episodes on another CPU or install (float sums in another order): the tiny
    preset's five seeds at one commit gave 98.4% success one day and 94.1% on the next day's
    machine and install (docs/benchmarks.md), so a number needs its host beside its commit."""
    import torch
    import transformers

    accelerator = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels' vector set
            "accelerator": accelerator, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "transformers": transformers.__version__}
