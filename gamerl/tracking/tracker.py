"""Logging: local JSONL always, wandb when available (offline by default), else tensorboard.
The figures made from these files are gamerl/tracking/figures.py's (``save_figures``,
re-exported here).

Files in the run directory:
    metrics.jsonl    one JSON object per line: {"kind": "epoch" | "eval", "epoch": ..., ...}
    episodes.jsonl   one line per training episode: {"epoch": ..., "seed": ..., "reward": ...}
    wandb/           the wandb run (offline mode: sync later with `wandb sync <dir>`)
    tensorboard/     event files when wandb is off (`tensorboard --logdir <run_dir>/tensorboard`)
    *.png            figures (gamerl/tracking/figures.py: save_figures)

wandb is optional: if it cannot be imported, or ``wandb.init`` fails, the tracker says so once
and keeps writing the JSONL files, which are the source of truth (figures and summaries are made
from them, so a run without wandb loses nothing). Without a wandb run (mode "disabled", not
installed, or failed) the numeric metrics also go to a local tensorboard log, so curves can be
browsed live; tags are the same as wandb's (``<kind>/<metric>``).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from .figures import save_figures  # noqa: F401  (the trainer imports it from here)

log = logging.getLogger("gamerl")

METRICS_JSONL = "metrics.jsonl"
EPISODES_JSONL = "episodes.jsonl"
TENSORBOARD_DIR = "tensorboard"


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None  # strict JSON has no nan/inf; a gap reads better than a crash
    if hasattr(v, "item") and callable(v.item):
        return _jsonable(v.item())
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line cut short by a kill: ignore it
                pass
    return rows


def truncate_jsonl(path: str | Path, keep_through_epoch: int) -> None:
    """Drop records of epochs after ``keep_through_epoch`` (a resumed run redoes them), atomically."""
    path = Path(path)
    if not path.exists():
        return
    rows = [r for r in read_jsonl(path) if r.get("epoch", -1) <= keep_through_epoch]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The finite numeric values (bools count as 0/1); strings, lists, None and nan are left out."""
    return {k: v for k, v in _jsonable(metrics).items()
            if isinstance(v, (int, float)) and v is not None}


class Tracker:
    """``log(metrics)`` to metrics.jsonl (+ wandb, or tensorboard without it),
    ``log_episodes(records)`` to episodes.jsonl.

    ``tensorboard``: None (default) writes ``<run_dir>/tensorboard`` exactly when no wandb run
    is active; True always, False never. ``purge_step``: on resume, the first step the resumed
    run will log again: tensorboard then hides the events at and after it that the interrupted
    run wrote (as truncate_jsonl does for the JSONL files).
    """

    def __init__(self, run_dir: str | Path, config: dict[str, Any], mode: str = "offline",
                 project: str = "game-rl", run_id: Optional[str] = None,
                 name: Optional[str] = None, tensorboard: Optional[bool] = None,
                 purge_step: Optional[int] = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.wandb_run = None
        self.tb_writer = None
        self.run_id = run_id
        if mode != "disabled":
            try:
                import wandb
            except ImportError:
                log.warning("wandb is not installed: logging to %s only (pip install wandb)",
                            self.run_dir / METRICS_JSONL)
            else:
                try:
                    # resume="allow" with our own id: a resumed run appends to the same wandb run.
                    self.wandb_run = wandb.init(
                        project=project, mode=mode, dir=str(self.run_dir), config=config,
                        id=run_id, name=name, resume="allow" if run_id else None,
                        settings=wandb.Settings(quiet=True))  # no 70-line summary at exit
                    self.run_id = self.wandb_run.id
                    if mode == "offline":
                        log.info("wandb (offline): %s; upload later with `wandb sync %s`",
                                 self.run_dir / "wandb", self.run_dir / "wandb" / "offline-run-*")
                except Exception as e:  # no network in online mode, bad credentials, ...
                    log.warning("wandb.init failed (%s): logging to %s only", e,
                                self.run_dir / METRICS_JSONL)
        if tensorboard or (tensorboard is None and self.wandb_run is None):
            self._open_tensorboard(purge_step)

    def _open_tensorboard(self, purge_step: Optional[int]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:  # torch without the tensorboard package
            log.warning("tensorboard is not available (%s): no local tensorboard log "
                        "(pip install tensorboard)", e)
            return
        tb_dir = self.run_dir / TENSORBOARD_DIR
        # flush_secs=30: a live `tensorboard --logdir` sees new points within half a minute.
        self.tb_writer = SummaryWriter(log_dir=str(tb_dir), purge_step=purge_step, flush_secs=30)
        log.info("tensorboard log: %s (view with `tensorboard --logdir %s`)", tb_dir, tb_dir)

    def _append(self, name: str, rows: Iterable[dict[str, Any]]) -> None:
        with open(self.run_dir / name, "a") as f:
            for r in rows:
                f.write(json.dumps(_jsonable(r)) + "\n")

    def log_table(self, name: str, header: list[str], rows: list[list[str]],
                  step: Optional[int] = None) -> None:
        """A table of text (an evaluation's sample episodes): a wandb Table under
        ``samples/<name>``, or, without a wandb run, TensorBoard text (a Markdown table) under
        the same tag. The JSONL logs hold numbers only; RUN/samples_<name>.md has the table."""
        if self.wandb_run is not None:
            import wandb

            self.wandb_run.log({f"samples/{name}": wandb.Table(columns=list(header),
                                                                data=[list(r) for r in rows])},
                               step=step)
        if self.tb_writer is not None:
            lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            self.tb_writer.add_text(f"samples/{name}", "\n".join(lines), global_step=step or 0)

    def log(self, metrics: dict[str, Any], step: Optional[int] = None) -> None:
        """One JSONL line; every numeric value also to wandb / tensorboard as ``<kind>/<key>``
        at ``step`` (tensorboard needs a step: without one it uses the record's epoch)."""
        self._append(METRICS_JSONL, [metrics])
        if self.wandb_run is None and self.tb_writer is None:
            return
        kind = metrics.get("kind", "epoch")
        flat = {f"{kind}/{k}": v for k, v in _numeric(metrics).items()}
        if self.wandb_run is not None:
            self.wandb_run.log(flat, step=step)
        if self.tb_writer is not None:
            tb_step = step if step is not None else metrics.get("epoch")
            for tag, v in flat.items():
                self.tb_writer.add_scalar(tag, float(v), global_step=tb_step)

    def log_episodes(self, records: list[dict[str, Any]], epoch: int) -> None:
        self._append(EPISODES_JSONL, [{"epoch": epoch, **r} for r in records])

    def summary(self, values: dict[str, Any]) -> None:
        if self.wandb_run is not None:
            for k, v in _jsonable(values).items():
                self.wandb_run.summary[k] = v

    def finish(self) -> None:
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None
        if self.tb_writer is not None:
            self.tb_writer.close()  # flushes the pending events
            self.tb_writer = None


__all__ = ["EPISODES_JSONL", "METRICS_JSONL", "TENSORBOARD_DIR", "Tracker", "read_jsonl",
           "save_figures", "truncate_jsonl"]
