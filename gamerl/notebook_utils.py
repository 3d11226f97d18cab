"""Small helpers for ``password_game_verl_training.ipynb`` (kept here so its cells stay short).

* :func:`stop_with_parent` starts a watchdog that stops a server subprocess when the process that
  owns it (the notebook kernel) dies, even by SIGKILL, when ``atexit`` handlers never run.
* :func:`episode_table` renders sample episodes (passwords and broken rules) as Markdown.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Sequence

_WATCHDOG = """
import os, signal, sys, time
parent, child = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
while alive(parent) and alive(child):
    time.sleep(1.0)
if alive(child):
    os.kill(child, signal.SIGTERM)
    time.sleep(3.0)
    if alive(child):
        os.kill(child, signal.SIGKILL)
"""


def stop_with_parent(proc: subprocess.Popen, parent_pid: int | None = None) -> subprocess.Popen:
    """Watch ``parent_pid`` (default: this process); when it is gone, terminate ``proc``.
    The watchdog exits by itself once ``proc`` has stopped."""
    parent_pid = parent_pid or os.getpid()
    return subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(parent_pid), str(proc.pid)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _broken(ep) -> str:
    verdicts = ep.rule_verdicts()
    broken = [str(i + 1) for i, ok in sorted(verdicts.items()) if not ok]
    return ", ".join(broken) if broken else "none"


def _cell(text: str, width: int = 40) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return "`" + (text if len(text) <= width else text[:width - 1] + "…") + "`"


def episode_table(runs: dict[str, Sequence], n: int = 8) -> str:
    """A Markdown table: per seed and policy, the passwords submitted (turn by turn), the rules
    satisfied of those revealed, and which revealed rules the last password broke."""
    lines = ["| seed | policy | passwords (turn by turn) | rules held / revealed | broke rules |",
             "|---|---|---|---|---|"]
    names = list(runs)
    for i in range(min(n, min(len(v) for v in runs.values()))):
        for name in names:
            ep = runs[name][i]
            pw = " → ".join(_cell(t.password, 24) for t in ep.turns) or "(none)"
            lines.append(f"| {ep.seed} | {name} | {pw} | {ep.rules_satisfied} / {ep.num_revealed}"
                         f"{' ✔' if ep.success else ''} | {_broken(ep)} |")
    return "\n".join(lines)


__all__ = ["episode_table", "stop_with_parent"]
