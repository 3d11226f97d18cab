"""Checkpoints: ``best/`` and ``last/`` in the run directory, each written atomically.

A checkpoint directory holds everything a resumed run needs to continue exactly where it stopped:

    config.json, model.safetensors, generation_config.json   the LM (save_pretrained; load_policy)
    tokenizer.json, tokenizer_config.json, ...               the tokenizer
    value_head.pt                                            the value head (PolicyWithValue.save)
    optimizer.pt                                             AdamW state (moments, step counts)
    rng.pt                                                   python, numpy, torch (+cuda) RNG states
    trainer_state.json                                       epoch/step counters, best metric, ...
    train_config.json                                        the TrainConfig of the run
    metrics.json                                             the metrics of the epoch it was saved at

Atomicity: everything is written into a fresh temporary sibling directory first; only a complete
directory is renamed into place. A directory cannot be renamed over a non-empty one, so replacing
takes two renames (old -> ``.NAME.old``, temp -> NAME); a crash between them leaves ``.NAME.old``,
which ``find_checkpoint`` renames back. A reader never sees a half-written checkpoint, and a failed
write (exception, full disk) removes its temporary directory and leaves the previous one intact.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch

CONFIG_FILE = "train_config.json"
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.pt"
METRICS_FILE = "metrics.json"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.random.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.random.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_write_dir(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_dir)`` and move the finished directory to ``target`` atomically."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    old = target.parent / f".{target.name}.old"
    try:
        write(tmp)
        for f in tmp.iterdir():  # flush file contents before the rename makes them visible
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        if old.exists():
            shutil.rmtree(old)
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return target


def find_checkpoint(path: str | Path) -> Optional[Path]:
    """``path`` if it is a complete checkpoint, recovering an interrupted replacement; else None."""
    path = Path(path)
    old = path.parent / f".{path.name}.old"
    if not path.exists() and old.exists():
        os.replace(old, path)  # crashed between the two renames: the old copy is complete
    return path if (path / STATE_FILE).exists() else None


def save_checkpoint(target: str | Path, policy, tokenizer, optimizer: Optional[torch.optim.Optimizer],
                    state: dict[str, Any], train_config: dict[str, Any],
                    metrics: Optional[dict[str, Any]] = None) -> Path:
    """Write a checkpoint directory atomically (see the module docstring for its files)."""

    def write(tmp: Path) -> None:
        policy.save(tmp, tokenizer)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        torch.save(rng_state(), tmp / RNG_FILE)
        (tmp / CONFIG_FILE).write_text(json.dumps(train_config, indent=2, sort_keys=True) + "\n")
        (tmp / METRICS_FILE).write_text(json.dumps(metrics or {}, indent=2, sort_keys=True) + "\n")
        # Written last: its presence marks a complete checkpoint (find_checkpoint).
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")

    return atomic_write_dir(target, write)


def load_checkpoint_state(path: str | Path) -> dict[str, Any]:
    """The JSON parts and RNG/optimizer states of a checkpoint (the model loads separately with
    ``PolicyWithValue.load``)."""
    path = Path(path)
    out = {"state": json.loads((path / STATE_FILE).read_text()),
           "train_config": json.loads((path / CONFIG_FILE).read_text()),
           "metrics": json.loads((path / METRICS_FILE).read_text()),
           # RNG states hold numpy arrays and tuples: not loadable with weights_only=True.
           "rng": torch.load(path / RNG_FILE, weights_only=False)}
    if (path / OPTIMIZER_FILE).exists():
        out["optimizer"] = torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=True)
    return out


__all__ = ["atomic_write_dir", "find_checkpoint", "load_checkpoint_state", "rng_state",
           "save_checkpoint", "set_rng_state"]
