"""Pre-flight for verl's resume: refuse a checkpoint whose files could run code when loaded.

verl 0.9 resumes a run by default (``trainer.resume_mode=auto``) and reads its own checkpoint files
with the full unpickler, ``torch.load(..., weights_only=False)``: the model and optimizer shards
and ``extra_state`` (RNG, lr scheduler) in ``verl/utils/checkpoint/fsdp_checkpoint_manager.py``,
and ``data.pt`` (the dataloader) in ``verl/trainer/ppo/ray_trainer.py``. A crafted file there runs
code on every node. verl is not ours to change, so ``launch.sh`` runs this check first.

It finds the checkpoint verl would resume from, by verl's rule (``resume_mode`` ``disable``: none;
``resume_path``: ``trainer.resume_from_path``; ``auto``: the step named in
``<trainer.default_local_dir>/latest_checkpointed_iteration.txt``), and loads every ``.pt`` file
in it with ``torch.load(weights_only=True)`` (memory-mapped, so shards cost no RAM): tensors,
DTensors, plain containers and numbers, plus numpy arrays (numpy RNG states). A file that loads
that way names no other callable or class, so unpickling it again in verl runs nothing else.
Any other file is refused, naming the types it needs; after checking where they come from,
allow them with ``GAMERL_VERL_ALLOW_GLOBALS=module.Name,...``.

    python -m gamerl.integrations.verl.resume_guard --experiment NAME [hydra overrides...]

Exit status 0: nothing to resume, or every file is plain; 2: refused (the message says why).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np
import torch

TRACKER = "latest_checkpointed_iteration.txt"  # verl's find_latest_ckpt_path reads this file


def _numpy_globals() -> list:
    """What ``np.random.get_state()`` and small arrays pickle to: the array constructor, the
    array and dtype classes. Data only: none of them runs code of the file's choosing."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    dtypes = [type(np.dtype(t)) for t in (np.uint8, np.uint32, np.int64, np.float32, np.float64,
                                          np.bool_)]
    return [_reconstruct, np.ndarray, np.dtype, *dtypes]


def _extra_globals(names: Iterable[str]) -> list:
    import importlib

    out = []
    for name in names:
        module, _, attr = name.strip().rpartition(".")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        out.append(obj)
    return out


def check_file(path: Path, allowed: Sequence = ()) -> Optional[str]:
    """None if ``path`` loads with ``weights_only=True`` (and ``allowed``), else why not."""
    try:
        import torch.distributed.tensor  # noqa: F401 (registers DTensor as safe to load)
    except ImportError:
        pass
    with torch.serialization.safe_globals([*_numpy_globals(), *allowed]):
        try:
            try:
                torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:  # an old (non-zip) format cannot be memory-mapped
                if "mmap" not in str(e):
                    raise
                torch.load(path, map_location="cpu", weights_only=True)
            return None
        except pickle.UnpicklingError as e:
            try:
                unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
            except Exception:
                unsafe = []
            need = f" (it names {', '.join(sorted(unsafe))})" if unsafe else ""
            lines = [ln.strip() for ln in str(e).splitlines() if "WeightsUnpickler" in ln]
            return f"needs the full unpickler{need}: {(lines or [str(e)])[0][:300]}"
        except Exception as e:  # not a torch file, truncated, ...
            return f"does not load: {type(e).__name__}: {e}"


def resume_dir(project: str, experiment: str, overrides: dict[str, str]) -> Optional[Path]:
    """The checkpoint directory verl would resume from, or None. ``project`` and ``experiment``
    as launch.sh sets them; hydra ``overrides`` (``trainer.*=...``) win, as in verl, whose
    default ``default_local_dir`` is ``checkpoints/<project_name>/<experiment_name>``."""
    mode = overrides.get("trainer.resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "resume_path":
        return Path(overrides["trainer.resume_from_path"])
    project = overrides.get("trainer.project_name", project)
    experiment = overrides.get("trainer.experiment_name", experiment)
    root = Path(overrides.get("trainer.default_local_dir",
                              f"checkpoints/{project}/{experiment}"))
    try:
        step = int((root / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None  # verl then trains from scratch
    path = root / f"global_step_{step}"
    return path if path.exists() else None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", default="game_rl", help="trainer.project_name")
    parser.add_argument("--experiment", required=True, help="trainer.experiment_name")
    args, rest = parser.parse_known_args(argv)
    overrides = dict(a.lstrip("+").split("=", 1) for a in rest if "=" in a and
                     not a.startswith("-"))
    ckpt = resume_dir(args.project, args.experiment, overrides)
    if ckpt is None:
        return 0
    allowed = _extra_globals(n for n in os.environ.get("GAMERL_VERL_ALLOW_GLOBALS", "").split(",")
                             if n.strip())
    files = sorted(ckpt.rglob("*.pt"))
    bad = [(f, why) for f in files if (why := check_file(f, allowed)) is not None]
    if bad:
        print(f"resume_guard: refusing to let verl resume from {ckpt}: verl loads these files "
              "with the full unpickler (torch.load weights_only=False), and they hold more than "
              "tensors and plain values:", file=sys.stderr)
        for f, why in bad:
            print(f"  {f}: {why}", file=sys.stderr)
        print("If you trust them, allow the named types with GAMERL_VERL_ALLOW_GLOBALS="
              "module.Name,...; or train without resuming (trainer.resume_mode=disable).",
              file=sys.stderr)
        return 2
    print(f"resume_guard: {len(files)} checkpoint files in {ckpt} hold only tensors and plain "
          "values", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
