"""Small helpers for ``password_game_verl_training.ipynb`` (kept here so its cells stay short).

* :func:`stop_with_parent` starts a watchdog that stops a server subprocess when the process that
  owns it (the notebook kernel) dies, even by SIGKILL, when ``atexit`` handlers never run.
* :func:`episode_table` renders sample episodes (passwords and broken rules) as Markdown.
* :func:`small_table` shows a few numbers (warm start, one collection) as a Markdown table.
* :class:`LiveCurves` is the training cell's live view: a figure redrawn in place each epoch
  (reward, the headline number, KL, held-out points when evaluated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Sequence

from .games.password_game import broken_rules, num_revealed, rules_satisfied

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
    return ", ".join(broken_rules(ep)) or "none"


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
            pw = " → ".join(_cell(t.action, 24) for t in ep.turns) or "(none)"
            lines.append(f"| {ep.seed} | {name} | {pw} | {rules_satisfied(ep)} / {num_revealed(ep)}"
                         f"{' ✔' if ep.success else ''} | {_broken(ep)} |")
    return "\n".join(lines)


def small_table(rows: dict, digits: int = 3) -> str:
    """``{name: value}`` as a two-column Markdown table (numbers rounded, names spaced)."""
    lines = ["| | |", "|---|---|"]
    for name, value in rows.items():
        if isinstance(value, float):
            value = f"{value:.{digits}f}"
        lines.append(f"| {str(name).replace('_', ' ')} | {value} |")
    return "\n".join(lines)


class LiveCurves:
    """A figure that redraws in place after every epoch (IPython display handle): training
    reward, the task's headline number, KL to the reference (k3: never negative) and the
    held-out points of any evaluation during training. ``update(metrics)`` takes the epoch's
    metrics as the trainer logs them."""

    PANELS = (("rollout/reward", "eval/reward", "reward per game"),
              (None, None, None),  # the headline number, set in __init__
              ("adv/kl_ref_k3", None, "KL to the reference (k3, >= 0)"))

    def __init__(self, headline: str = "rules_satisfied", epochs: int = 0):
        import matplotlib.pyplot as plt
        from IPython.display import display

        self.panels = list(self.PANELS)
        self.panels[1] = (f"rollout/{headline}", f"eval/{headline}", headline.replace("_", " "))
        self.epochs, self.rows = epochs, []
        self.fig, self.axes = plt.subplots(1, 3, figsize=(13, 3.2))
        plt.close(self.fig)  # shown through the handle only, not again at the cell's end
        self.handle = display(self.fig, display_id=True)

    def update(self, metrics: dict) -> None:
        self.rows.append(metrics)
        x = [r["epoch"] + 1 for r in self.rows]
        for ax, (train_key, eval_key, label) in zip(self.axes, self.panels):
            ax.clear()
            ax.plot(x, [r.get(train_key, float("nan")) for r in self.rows], "o-",
                    label="training games")
            held = [(xi, r[eval_key]) for xi, r in zip(x, self.rows) if eval_key and eval_key in r]
            if held:
                ax.plot(*zip(*held), "s", color="C1", label="held-out games")
            ax.set_xlabel("epoch")
            ax.set_ylabel(label)
            ax.set_xlim(0.5, max(self.epochs, x[-1]) + 0.5)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
        self.axes[0].legend(loc="lower right", fontsize=8)
        self.fig.tight_layout()
        self.handle.update(self.fig)


__all__ = ["LiveCurves", "episode_table", "small_table", "stop_with_parent"]
