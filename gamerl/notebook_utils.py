"""Small helpers for ``password_game_verl_training.ipynb`` (kept here so its cells stay short).

* :func:`stop_with_parent` starts a watchdog that stops a server subprocess when the process that
  owns it (the notebook kernel) dies, even by SIGKILL, when ``atexit`` handlers never run.
* :func:`episode_table` renders sample episodes (passwords and broken rules) as Markdown.
* :func:`small_table` shows a few numbers (warm start, one collection) as a Markdown table.
* :class:`LiveCurves` is the training cell's live view: a figure redrawn in place each epoch
  (reward, the headline number, KL, held-out points when evaluated).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Sequence

from .games.password_game import broken_rules, num_revealed, rules_satisfied
from .tracking.figures import REFERENCE_STYLES

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
            # whole passwords (the table wraps them): two answers that start alike differ later
            pw = " → ".join(_cell(t.action, 200) for t in ep.turns) or "(none)"
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
    held-out points of any evaluation during training. ``baseline`` (the held-out row before
    PPO) and ``references`` (``evaluate.reference_rows``: the solver, random play) are drawn
    as flat lines and set the y range, so that the batch-to-batch noise of a few games reads as
    noise, not as a collapse. ``update(metrics)`` takes the epoch's metrics as the trainer
    logs them."""

    PANELS = (("rollout/reward", "eval/reward", "reward"),
              (None, None, None),  # the headline number, set in __init__
              ("adv/kl_ref_k3", None, None))
    LABELS = {"rollout/reward": "reward per game",
              "adv/kl_ref_k3": "KL to the reference (k3, >= 0)"}

    def __init__(self, headline: str = "rules_satisfied", epochs: int = 0,
                 baseline: dict | None = None, references: dict | None = None):
        import matplotlib.pyplot as plt
        from IPython.display import display

        self.panels = list(self.PANELS)
        self.panels[1] = (f"rollout/{headline}", f"eval/{headline}", headline)
        self.epochs, self.rows = epochs, []
        self.flat = {"before PPO (held-out)": baseline or {}}
        for name, row in (references or {}).items():
            self.flat[f"{row.get('label', name)} (held-out)"] = row
        self.fig, self.axes = plt.subplots(1, 3, figsize=(14, 3.4), layout="constrained")
        self.fig.suptitle("PPO training, live: each epoch's training batch (circles), held-out "
                          "games when evaluated (squares), references (flat lines)", fontsize=10)
        plt.close(self.fig)  # shown through the handle only, not again at the cell's end
        self.handle = display(self.fig, display_id=True)

    def update(self, metrics: dict) -> None:
        self.rows.append(metrics)
        x = [r["epoch"] + 1 for r in self.rows]
        for ax, (train_key, eval_key, key) in zip(self.axes, self.panels):
            ax.clear()
            ys = [r.get(train_key, float("nan")) for r in self.rows]
            ax.plot(x, ys, "o-", color="C0", label="training games (the epoch's batch)")
            held = [(xi, r[eval_key]) for xi, r in zip(x, self.rows) if eval_key and eval_key in r]
            if held:
                ax.plot(*zip(*held), "s", color="C1", label="held-out games")
            levels = []
            for (label, row), (color, style) in zip(self.flat.items(), _FLAT_STYLES):
                value = row.get(key) if key else None
                if isinstance(value, (int, float)) and math.isfinite(value):
                    ax.axhline(value, color=color, linestyle=style, linewidth=1.1,
                               label=f"{label}: {value:.2f}")
                    levels.append(value)
            finite = [y for y in ys + [h for _, h in held] + levels if math.isfinite(y)]
            if levels and finite:  # the whole range from the floor to the solver
                lo, hi = min(finite), max(finite)
                pad = 0.05 * (hi - lo or 1.0)
                ax.set_ylim(lo - pad, hi + pad)
            ax.set_xlabel("epoch")
            ax.set_title(self.LABELS.get(train_key, (key or "").replace("_", " ")),
                         fontsize=9, loc="left")
            ax.set_xlim(0.5, max(self.epochs, x[-1]) + 0.5)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
        handles, labels = self.axes[1].get_legend_handles_labels()
        for legend in self.fig.legends:
            legend.remove()
        self.fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3),
                        fontsize=8, frameon=False)  # below the panels: it covers no point
        if self.handle is not None:  # None outside IPython (a script): nothing to redraw
            self.handle.update(self.fig)


def mean_interval(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """The mean and its 95% interval (normal approximation: mean ± z·sd/√n; sd with n − 1)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n)


def held_out_change(before: Sequence, after: Sequence) -> str:
    """``rules satisfied 2.00 [1.4, 2.6] -> 2.38 [1.8, 3.0], success ...`` over the same held-out
    games, each with its 95% interval (Wilson's for success), and whether the change is larger
    than that noise: with 8 games a 0.4-rule change usually is not."""
    from .games.base import wilson_interval

    (m0, lo0, hi0), (m1, lo1, hi1) = (mean_interval([float(rules_satisfied(e)) for e in eps])
                                      for eps in (before, after))
    rules = f"rules satisfied {m0:.2f} [{lo0:.2f}, {hi0:.2f}] -> {m1:.2f} [{lo1:.2f}, {hi1:.2f}]"
    separated = lo1 > hi0 or hi1 < lo0
    wins = [sum(bool(e.success) for e in eps) for eps in (before, after)]
    (lo0, hi0), (lo1, hi1) = (wilson_interval(w, len(eps)) for w, eps in zip(wins, (before, after)))
    success = (f"success {wins[0] / len(before):.0%} [{lo0:.0%}, {hi0:.0%}] -> "
               f"{wins[1] / len(after):.0%} [{lo1:.0%}, {hi1:.0%}]")
    separated = separated and (lo1 > hi0 or hi1 < lo0)
    verdict = ("the intervals do not overlap: larger than the noise of this many games"
               if separated else "the intervals overlap: within the noise of this many "
               "games (evaluate more for a firmer answer)")
    return f"{rules}, {success} (95% intervals over {len(after)} held-out games; {verdict})"


# the before-PPO line, then the reference agents' styles of the saved figures
_FLAT_STYLES = (("0.4", "-."), *REFERENCE_STYLES)


__all__ = ["LiveCurves", "episode_table", "held_out_change", "mean_interval", "small_table",
           "stop_with_parent"]
