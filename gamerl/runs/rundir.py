"""One run directory, one writer; and what a start may do with what a directory already holds.

The lock: ``RunLock`` takes an exclusive ``fcntl.flock`` on ``RUN/.gamerl.lock`` for as long as
the process trains there. The kernel drops it when the process ends, however it ends (SIGKILL
included), so there is never a stale lock to clean up. A second process (``train --resume``
attaching to a live run, a second notebook) is refused with the holder's pid, instead of both
appending the same epochs to metrics.jsonl, both writing last/ and both logging to one wandb id.
flock locks are per open file description, so a second Trainer in the same process is refused
too. Local file systems; on NFS, Linux emulates flock with byte-range locks.

What a start may do (``open_run``), holding the lock:

* without ``--resume``: only start in a directory that holds no run (finished or partial);
  anything a run writes there is a refusal, so nothing is ever deleted or overwritten;
* with ``--resume``: continue from ``last/`` after recovering interrupted checkpoint writes
  (gamerl.runs.checkpoint.find_checkpoint) and checking it against its manifest. Refuse, changing
  nothing, when ``last/`` is damaged, or missing although the run went past its warm start
  (best/ or epoch records exist: a restart would overwrite them), or when there is no run at
  all. A run killed before its first PPO checkpoint (warm start, baseline) resumes from what
  it saved: the warm-start checkpoint, the cached warm start and baseline.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Optional

from .checkpoint import (CONFIG_FILE, OPTIMIZER_FILE, RNG_FILE, STATE_FILE, CheckpointError,
                         find_checkpoint)
from ..tracking.tracker import EPISODES_JSONL, METRICS_JSONL, read_jsonl
LOCK_FILE = ".gamerl.lock"
PROGRESS_DIR = "warmstart_progress"  # a warm start's checkpoints while it trains
# What a run writes in its directory (besides figures and sample tables, which come with these).
RUN_FILES = ("config.json", METRICS_JSONL, EPISODES_JSONL, "baseline.json", "summary.json")
CHECKPOINTS = ("last", "best", "warmstart", PROGRESS_DIR)
# A resumed run needs all of these; a checkpoint without its optimizer state would continue
# with fresh Adam moments (a silent change of the run).
RESUME_FILES = (STATE_FILE, CONFIG_FILE, RNG_FILE, OPTIMIZER_FILE, "value_head.pt")


class RunLockedError(RuntimeError):
    """Another live process holds the run directory."""


class RunLock:
    """An exclusive lock on a run directory, held until ``release()`` or the process ends."""

    def __init__(self, run_dir: str | Path):
        self._fd: Optional[int] = None
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip()
            os.close(fd)
            raise RunLockedError(
                f"{self.run_dir} is in use by another run ({_describe(holder)}): two processes "
                "writing one run directory duplicate its epochs and overwrite each other's "
                "checkpoints. Wait for it to finish, or stop it and continue with --resume, or "
                "use another directory (--out)") from None
        # Who holds it, for the next process's message (the lock itself is the flock).
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __del__(self):
        self.release()


def _describe(holder: str) -> str:
    try:
        h = json.loads(holder)
        return f"pid {h['pid']} on {h['host']}, since {h['since']}"
    except (ValueError, KeyError, TypeError):
        return "a process that is still starting"


def run_contents(run_dir: Path) -> list[str]:
    """The names in ``run_dir`` that a run wrote (empty: no run there)."""
    if not run_dir.is_dir():
        return []
    names = set(RUN_FILES) | set(CHECKPOINTS)
    return sorted(p.name for p in run_dir.iterdir()
                  if p.name in names or any(p.name.startswith(f".{c}.") for c in CHECKPOINTS))


def _epochs_recorded(run_dir: Path) -> list[int]:
    return sorted({int(r["epoch"]) for r in read_jsonl(run_dir / METRICS_JSONL)
                   if r.get("kind") == "epoch" and isinstance(r.get("epoch"), int)})


def open_run(run_dir: Path, resume: bool) -> Optional[Path]:
    """What the run continues from: ``last/`` (recovered and checked) or None (a fresh start, or
    a resumed run that had not reached its first PPO checkpoint). Refuses (FileExistsError,
    CheckpointError) as the module docstring says, before anything is written."""
    found = run_contents(run_dir)
    if not resume:
        if found:
            kind = "finished" if "summary.json" in found else "partial"
            raise FileExistsError(
                f"{run_dir} already holds a {kind} run ({', '.join(found)}): continue it with "
                "--resume, or choose another run directory (--out); nothing was changed")
        return None
    if not found:
        raise CheckpointError(f"--resume: {run_dir} holds no run to continue (no last/ "
                              "checkpoint, no logs); check --out, or start without --resume")
    for name in ("best", "warmstart", PROGRESS_DIR):  # clean up interrupted writes
        find_checkpoint(run_dir / name, verify=False)
    try:
        last = find_checkpoint(run_dir / "last", require=RESUME_FILES)
    except CheckpointError as e:
        raise CheckpointError(f"--resume refused, nothing was changed: {e}. Restore a sound "
                              "copy of last/, or start a new run in another directory "
                              "(--out)") from e
    if last is not None and (run_dir / "best").exists():
        try:  # the resumed run compares against best/'s reward: it must be sound too
            find_checkpoint(run_dir / "best", require=(STATE_FILE,))
        except CheckpointError as e:
            raise CheckpointError(f"--resume refused, nothing was changed: {e}. Move best/ "
                                  "away to continue without it") from e
    if last is None:
        went_further = [f"{name}/" for name in ("best",) if (run_dir / name).exists()]
        epochs = _epochs_recorded(run_dir)
        if epochs:
            went_further.append(f"epochs {epochs[0]}..{epochs[-1]} in {METRICS_JSONL}")
        if went_further:
            raise CheckpointError(
                f"--resume refused, nothing was changed: {run_dir / 'last'} is missing, but the "
                f"run went further ({', '.join(went_further)}); starting over would overwrite "
                "them. Restore last/, or start a new run in another directory (--out)")
    return last


__all__ = ["LOCK_FILE", "RESUME_FILES", "RunLock", "RunLockedError", "open_run", "run_contents"]
