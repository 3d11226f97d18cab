"""The run's figures, made from metrics.jsonl and the held-out evaluations, each readable on its
own (no caption needed):

    training_curves.png   per epoch: reward, the task's headline number (rules satisfied,
                          best greens, win rate), KL to the reference, policy entropy
    success_rate.png      per epoch: the fraction of games won
    rule_pass_rates.png   Password Game: each rule (named, numbered from 1), held-out games
                          before vs after PPO

How to read them: the x axis counts epochs from 1; 0 is "before PPO". "training" points are the
games each epoch played and learned from (a new batch per epoch); "held-out" points are
evaluation games no epoch trains on: before PPO (the baseline), after each ``eval_every``
epochs if set, and after the last epoch (final). Reference agents (the Password Game's solver
and random strings, Wordle's solver and random words, OpenSpiel's random legal moves) played
the same held-out games: flat lines. A vertical line marks the best epoch (saved as best/).
Legends sit outside the axes, so they never hide data; equal references share one line and one
legend entry.

Each PNG also carries what it shows as JSON in its text metadata (key ``gamerl:figure``, read
with :func:`read_figure_description`): per panel the title, axis labels, x ticks, each series'
label and data, and where the legend is. It is read back from the drawn matplotlib objects, not
from the inputs, so tests can check a figure's content without comparing pixels.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..games.registry import describe_metric, metric_entry_labels

FIGURE_METADATA_KEY = "gamerl:figure"
TRAINING_COLOR, HELDOUT_COLOR, BEST_COLOR = "tab:blue", "tab:orange", "tab:red"
REFERENCE_STYLES = (("tab:green", "--"), ("black", ":"), ("tab:purple", "-."),
                    ("tab:brown", "--"))
# The KL panel: k3 = exp(r) - 1 - r of the log-ratio r is never negative per token, so a mean
# near 0 means "close to the reference"; the k1 estimate (adv/kl_ref) can be negative per
# token and its batch mean can dip below 0, which reads as nonsense on a plot.
KL_KEY, KL_FALLBACK_KEY, ENTROPY_KEY = "adv/kl_ref_k3", "adv/kl_ref", "update/entropy"
HOW_TO_READ = ("training = the games each epoch learned from; held-out = evaluation games never "
               "trained on (0 = before PPO)")

__all__ = ["FIGURE_METADATA_KEY", "read_figure_description", "save_figures"]


# ----------------------------------------------------------------------------- the data

class RunData:
    """What the figures plot, from the epoch records and the evaluations."""

    def __init__(self, history: Sequence[Mapping[str, Any]], baseline: Optional[Mapping],
                 final: Optional[Mapping], references: Optional[Mapping[str, Mapping]],
                 best_epoch: Optional[int], final_from_best: bool = False,
                 task: Optional[str] = None):
        by_epoch = {r["epoch"]: r for r in history if r.get("kind") == "epoch"}
        self.epochs = [by_epoch[e] for e in sorted(by_epoch)]
        evals = {r.get("name"): r for r in history if r.get("kind") == "eval"}
        # Without explicit evaluations, the ones the trainer logged to metrics.jsonl.
        self.baseline = baseline if baseline is not None else evals.get("baseline")
        self.final = final if final is not None else evals.get("final")
        self.references = dict(references or {})
        # x of an epoch record: its 0-based "epoch" + 1, so the axis counts epochs from 1 and
        # 0 is the policy before any update.
        self.last_x = self.epochs[-1]["epoch"] + 1 if self.epochs else 0
        self.best_x = best_epoch + 1 if best_epoch is not None and best_epoch >= 0 else None
        # where the final evaluation's model comes from: the last epoch's policy (the Trainer),
        # or best/ (the notebook evaluates best/): its point sits at that epoch
        self.final_x = self.best_x if final_from_best and self.best_x else self.last_x
        self.final_from_best = bool(final_from_best and self.best_x)
        self.task = task

    def training(self, key: str) -> tuple[list[int], list[float]]:
        return _points((r["epoch"] + 1, r.get(key)) for r in self.epochs)

    def heldout(self, key: str) -> tuple[list[int], list[float]]:
        """Before PPO (x = 0), any mid-training evaluations (after epoch x), the final one."""
        points = [(0, _get(self.baseline, key))]
        points += [(r["epoch"] + 1, r.get(f"eval/{key}")) for r in self.epochs]
        points.append((self.final_x, _get(self.final, key)))
        return _points(points)

    def reference_values(self, key: str) -> list[tuple[str, float]]:
        """(label, value) per reference agent that has ``key``; agents with the same value
        share one entry ("a = b"), since their lines would be drawn on top of each other."""
        merged: dict[float, list[str]] = {}
        for name, row in self.references.items():
            value = _get(row, key)
            if value is not None:
                merged.setdefault(round(value, 9), []).append(str(row.get("label", name)))
        return [(" = ".join(labels), value) for value, labels in merged.items()]


def _get(row: Optional[Mapping], key: str) -> Optional[float]:
    value = None if row is None else row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _points(pairs) -> tuple[list[int], list[float]]:
    kept = [(x, float(y)) for x, y in pairs
            if isinstance(y, (int, float)) and not isinstance(y, bool) and math.isfinite(y)]
    return [x for x, _ in kept], [y for _, y in kept]


def _axis_label(key: str) -> str:
    """Short, for the y axis (the panel's title says the rest)."""
    return "fraction of games" if key.endswith("_rate") else key.replace("_", " ") + " per game"


def _fmt(key: str, value: float) -> str:
    return f"{value:.1%}" if key.endswith("_rate") else f"{value:.2f}"


# ----------------------------------------------------------------------------- drawing

def _epoch_axis(ax, data: RunData) -> None:
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no "0.5 epochs" with 2 epochs
    formatter = ax.yaxis.get_major_formatter()
    if isinstance(formatter, ScalarFormatter):
        # Plain numbers: an offset label ("+3.761" above the axis) is easily missed.
        formatter.set_useOffset(False)
    ax.set_xlim(-0.4, max(data.last_x, 1) + 0.4)
    ax.grid(alpha=0.3)


def _legend_outside(ax) -> None:
    """To the right of the axes: it never covers a bar or a line."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8,
                  frameon=False)


def _best_epoch_line(ax, data: RunData) -> None:
    if data.best_x is not None:
        ax.axvline(data.best_x, color=BEST_COLOR, linestyle=":", linewidth=1.2,
                   label=f"best epoch: {data.best_x} (saved as best/)", gid="vline")


def _metric_panel(ax, data: RunData, key: str, ylabel: str, title: str) -> None:
    """Training points per epoch, held-out points, the references' flat lines, the best epoch."""
    xs, ys = data.training(f"rollout/{key}")
    if xs:
        ax.plot(xs, ys, marker="o", ms=3, color=TRAINING_COLOR, gid="line",
                label="training games (each epoch's batch)")
    hx, hy = data.heldout(key)
    if hx:
        before = f"{_fmt(key, hy[0])} before PPO" if hx[0] == 0 else None
        after = None
        if data.final is not None and len(hx) > 1:
            after = f"{_fmt(key, hy[-1])} after" + (  # heldout() puts the final last
                f" (best/, epoch {data.final_x})" if data.final_from_best else "")
        values = " → ".join(v for v in (before, after) if v)
        # Joined only through mid-training evaluations: two points alone say nothing about
        # the path between them.
        ax.plot(hx, hy, marker="s", ms=5, color=HELDOUT_COLOR,
                linestyle="--" if len(hx) > 2 else "none", gid="points",
                label="held-out games" + (f": {values}" if values else ""))
    for (label, value), (color, style) in zip(data.reference_values(key), REFERENCE_STYLES):
        ax.axhline(value, color=color, linestyle=style, linewidth=1.2, gid="hline",
                   label=f"{label}, held-out: {_fmt(key, value)}")
    _best_epoch_line(ax, data)
    if key.endswith("_rate"):
        _fraction_axis(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    _epoch_axis(ax, data)
    _legend_outside(ax)


def _series_panel(ax, data: RunData, key: str, label: str, ylabel: str, title: str) -> None:
    """A training diagnostic logged once per epoch (KL, entropy)."""
    xs, ys = data.training(key)
    ax.plot(xs, ys, marker="o", ms=3, color=TRAINING_COLOR, gid="line", label=label)
    _best_epoch_line(ax, data)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    _epoch_axis(ax, data)
    _legend_outside(ax)


def _fraction_axis(ax) -> None:
    from matplotlib.ticker import PercentFormatter

    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))


def _training_curves(plt, data: RunData, headline: str):
    kl_key = KL_KEY if any(KL_KEY in r for r in data.epochs) else KL_FALLBACK_KEY
    panels = ["reward"] + ([headline] if headline != "reward" else [])
    diagnostics = [(kl_key, "KL to the reference")] if any(kl_key in r for r in data.epochs) else []
    if any(ENTROPY_KEY in r for r in data.epochs):
        diagnostics.append((ENTROPY_KEY, "entropy"))
    rows = len(panels) + len(diagnostics)
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.6 * rows + 0.6), sharex=True,
                             layout="constrained", squeeze=False)
    axes = [a[0] for a in axes]
    fig.suptitle(f"PPO training, per epoch\n{HOW_TO_READ}", fontsize=10)
    for ax, key in zip(axes, panels):
        description = describe_metric(key)
        _metric_panel(ax, data, key, _axis_label(key),
                      description[0].upper() + description[1:])
    for ax, (key, _) in zip(axes[len(panels):], diagnostics):
        if key == ENTROPY_KEY:
            _series_panel(ax, data, key, "training batches", "nats per token",
                          "Entropy of the policy's next-token distribution (mean over the "
                          "answer tokens)")
        elif key == KL_KEY:
            _series_panel(ax, data, key, "training batches (k3 estimate, never negative)",
                          "nats per token",
                          "KL from the policy to the frozen reference (PPO's start), k3 estimate")
        else:
            _series_panel(ax, data, key, "training batches (k1 estimate, can be negative)",
                          "nats per token",
                          "KL from the policy to the frozen reference (PPO's start), k1 estimate")
    axes[-1].set_xlabel("epoch")
    return fig


def _success_rate(plt, data: RunData):
    fig, ax = plt.subplots(figsize=(9, 3.8), layout="constrained")
    fig.suptitle(f"Success rate per epoch\n{HOW_TO_READ}", fontsize=10)
    won = describe_metric("success_rate", data.task) if data.task else None
    _metric_panel(ax, data, "success_rate", "fraction of games",
                  won[0].upper() + won[1:] if won else
                  "Games won (Password Game: every rule holds; Wordle: word found; "
                  "OpenSpiel: game won)")
    ax.set_xlabel("epoch")
    return fig


def _rule_pass_rates(plt, data: RunData):
    bars = [(label, row["per_rule_pass_rate"], color) for label, row, color in (
        ("held-out, before PPO", data.baseline, "silver"),
        ("held-out, after PPO", data.final, HELDOUT_COLOR))
        if row is not None and isinstance(row.get("per_rule_pass_rate"), list)]
    n = max(len(rates) for _, rates, _ in bars)
    labels = metric_entry_labels("per_rule_pass_rate", n)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * n + 4.5), 4.4), layout="constrained")
    fig.suptitle("Per-rule pass rate on the held-out games, before vs after PPO\n"
                 "fraction of games whose last password satisfies the rule (a rule never "
                 "revealed counts as failed)", fontsize=10)
    width = 0.8 / len(bars)
    for i, (label, rates, color) in enumerate(bars):
        offset = (i - (len(bars) - 1) / 2) * width
        container = ax.bar([j + offset for j in range(len(rates))], rates, width=width,
                           color=color, label=label)
        if n <= 10:  # the values, so a 0% bar reads as 0% rather than as missing; upright,
            # in the bar's own width, so neighbouring labels ("100%" "100%") never overprint
            for text in ax.bar_label(container, labels=[f"{r:.0%}" for r in rates],
                                     fontsize=7, padding=2, rotation=90):
                text.set_bbox(dict(facecolor="white", edgecolor="none", pad=0.4, alpha=0.85))
                text.set_zorder(5)  # over a reference line that crosses it
    refs = [(name, row) for name, row in data.references.items()
            if isinstance(row.get("per_rule_pass_rate"), list)]
    for (name, row), (color, style) in zip(refs, REFERENCE_STYLES):
        # A line across the whole rule group (before and after bars alike: the reference is
        # the same for both), in the reference's line style, so equal rates (the solver's and
        # random strings' 100% on rule 1) show both: a dotted line over a dashed one.
        rates = row["per_rule_pass_rate"]
        xs, ys = [], []
        for j, r in enumerate(rates):
            xs += [j - 0.42, j + 0.42, float("nan")]
            ys += [r, r, float("nan")]
        ax.plot(xs, ys, linestyle=style, linewidth=2.2, color=color, gid="segments",
                label=f"{row.get('label', name)}, held-out")
    ax.set_xticks(range(n), labels, rotation=35, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_xlabel("rule (numbered as in the game)")
    ax.set_ylabel("games passing the rule (fraction)")
    _fraction_axis(ax)
    if n <= 10:
        ax.set_ylim(-0.03, 1.2)  # room above 100% for the upright labels
    ax.grid(axis="y", alpha=0.3)
    _legend_outside(ax)
    return fig


# ----------------------------------------------------------------------------- what was drawn

def describe_figure(fig) -> dict[str, Any]:
    """What ``fig`` shows, read from its drawn artists: the suptitle and, per panel, title, axis
    labels, the x ticks inside the view, each series (kind, label, data), and the legend's
    entries and whether it lies outside the panel."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = []
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        series = []
        for line in ax.get_lines():
            kind = line.get_gid() or "line"
            x, y = list(map(float, line.get_xdata())), list(map(float, line.get_ydata()))
            entry: dict[str, Any] = {"kind": kind, "label": line.get_label()}
            if kind == "hline":
                entry["y"] = y[0]
            elif kind == "vline":
                entry["x"] = x[0]
            elif kind == "segments":  # one flat segment per group: x0, x1, gap
                entry.update(x=[(a + b) / 2 for a, b in zip(x[0::3], x[1::3])], y=y[0::3])
            else:
                entry.update(x=x, y=y)
            series.append(entry)
        for container in ax.containers:
            series.append({"kind": "bars", "label": container.get_label(),
                           "y": [float(p.get_height()) for p in container.patches]})
        legend = ax.get_legend()
        panels.append({
            "title": ax.get_title(loc="left") or ax.get_title(),
            "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "xticks": [float(t) for t in ax.get_xticks() if lo <= t <= hi],
            "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
            "series": series,
            "legend": None if legend is None else {
                "labels": [t.get_text() for t in legend.get_texts()],
                "outside_axes": not legend.get_window_extent(renderer).overlaps(
                    ax.get_window_extent(renderer))},
        })
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    return {"title": suptitle, "panels": panels}


def _save(fig, path: Path, plt) -> Path:
    description = describe_figure(fig)
    fig.savefig(path, dpi=110, metadata={FIGURE_METADATA_KEY: json.dumps(description)})
    plt.close(fig)
    return path


def read_figure_description(path: str | Path) -> dict[str, Any]:
    """The JSON a figure saved by :func:`save_figures` carries (see :func:`describe_figure`)."""
    from PIL import Image

    with Image.open(path) as image:
        return json.loads(image.text[FIGURE_METADATA_KEY])


def save_figures(run_dir: str | Path, history: list[dict[str, Any]],
                 baseline: Optional[dict[str, Any]] = None,
                 final: Optional[dict[str, Any]] = None,
                 headline: str = "rules_satisfied", *,
                 references: Optional[Mapping[str, Mapping[str, Any]]] = None,
                 best_epoch: Optional[int] = None, final_from_best: bool = False,
                 task: Optional[str] = None) -> list[Path]:
    """Write training_curves.png, success_rate.png and, when the evaluations have
    ``per_rule_pass_rate`` (the Password Game), rule_pass_rates.png into ``run_dir``.

    ``history``: the records of metrics.jsonl (``kind`` "epoch", and "eval" rows, used for the
    baseline and final evaluations when those arguments are None). ``headline``: the task's
    number for the second panel (``Task.headline[0]``). ``references``: the reference agents'
    held-out rows (``evaluate.reference_rows``: name -> metrics with a ``label``), drawn as flat
    lines. ``best_epoch``: the 0-based epoch of best/ (``TrainerState.best_epoch``), marked with
    a vertical line at x = best_epoch + 1. ``final_from_best``: ``final`` evaluated best/ (the
    notebook does), so its point sits at the best epoch, not the last. ``task``: the game, for
    what "success" means in its panel's title."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; safe in tests and on servers
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    data = RunData(history, baseline, final, references, best_epoch, final_from_best, task)
    out = [_save(_training_curves(plt, data, headline), run_dir / "training_curves.png", plt),
           _save(_success_rate(plt, data), run_dir / "success_rate.png", plt)]
    if any(row is not None and isinstance(row.get("per_rule_pass_rate"), list)
           for row in (data.baseline, data.final)):
        out.append(_save(_rule_pass_rates(plt, data), run_dir / "rule_pass_rates.png", plt))
    return out
