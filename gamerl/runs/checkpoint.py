"""Checkpoints: ``best/``, ``last/`` (and the warm start's) in the run directory, each written
atomically, sealed by a manifest, and loaded without unpickling anything but tensors.

A checkpoint directory holds everything a resumed run needs to continue exactly where it stopped:

    config.json, model.safetensors, generation_config.json   the LM (save_pretrained; load_policy)
    tokenizer.json, tokenizer_config.json, ...               the tokenizer
    value_head.pt                                            the value head (PolicyWithValue.save)
    optimizer.pt                                             AdamW state (moments, step counts)
    rng.json                                                 python, numpy, torch (+cuda) RNG states
    trainer_state.json                                       epoch/step counters, best metric, ...
    train_config.json                                        the TrainConfig of the run
    metrics.json                                             the metrics of the epoch it was saved at
    manifest.json                                            every other file: size and sha256

Safe loading: weights are safetensors, tensors in ``.pt`` files load with
``torch.load(weights_only=True)`` (tensors and plain containers only), and everything else is
JSON. No file of a checkpoint goes through the full unpickler, so a crafted file cannot run code.

The manifest is written last. It marks a complete checkpoint and lets a load notice what a file
system cannot: a missing file (fresh Adam moments from a lost ``optimizer.pt``) or bytes
overwritten in the middle of the weights (which still parse). ``verify_checkpoint`` refuses
both, and files that are not in the manifest. It guards against damage, not attackers (they can
rewrite the manifest): safety against crafted files comes from the loaders above.

Atomicity: everything is written into a fresh temporary sibling directory ``.NAME.tmp-*``; only a
complete, sealed directory is renamed into place. A directory cannot be renamed over a non-empty
one, so replacing takes two renames (old -> ``.NAME.old``, temp -> NAME). A kill can leave:

* an unsealed ``.NAME.tmp-*`` (killed while writing): removed by ``find_checkpoint``;
* a sealed ``.NAME.tmp-*`` (killed before or between the renames): the newest checkpoint there is;
  ``find_checkpoint`` checks it and moves it into place;
* ``.NAME.old`` without NAME (killed between the renames, no newer copy): renamed back;
* ``.NAME.old`` beside a sound NAME (killed before its removal): removed.

``find_checkpoint`` renames and deletes, so only the process that holds the run's lock
(gamerl.runs.rundir) may call it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import numpy as np
import torch

log = logging.getLogger("gamerl")

CONFIG_FILE = "train_config.json"
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.json"
METRICS_FILE = "metrics.json"
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1


class CheckpointError(RuntimeError):
    """A checkpoint that must not be used: missing, incomplete, damaged or not ours."""


# ----------------------------------------------------------------------------- RNG states


def rng_state() -> dict[str, Any]:
    """Python, numpy, torch (and CUDA) RNG states as plain JSON values."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(internal), gauss],
             "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
             "torch": torch.random.get_rng_state().tolist()}
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.random.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


# ----------------------------------------------------------------------------- the manifest


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _files(directory: Path) -> list[str]:
    """Every regular file below ``directory`` but the manifest, as relative POSIX paths."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                  if p.is_file() and p.name != MANIFEST_FILE)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(directory: str | Path) -> dict[str, Any]:
    """Seal ``directory``: write manifest.json listing every other file's size and sha256."""
    directory = Path(directory)
    files = {}
    for name in _files(directory):
        p = directory / name
        files[name] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    manifest = {"format": MANIFEST_FORMAT, "created_ns": time.time_ns(), "files": files}
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of ``directory``; CheckpointError when it is missing or unreadable."""
    path = Path(directory) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(
            f"{directory} has no {MANIFEST_FILE}: the checkpoint is incomplete (its write was "
            "interrupted) or was written by a gamerl without manifests; it cannot be checked, "
            "so it is not used") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path} is unreadable ({e}): the checkpoint is damaged") from e
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT \
            or not isinstance(manifest.get("files"), dict):
        raise CheckpointError(f"{path} is not a gamerl manifest (format {MANIFEST_FORMAT})")
    return manifest


def verify_checkpoint(directory: str | Path, require: Iterable[str] = ()) -> dict[str, Any]:
    """Check ``directory`` against its manifest (every file there, with its size and sha256,
    nothing else) and that it lists the ``require``d files. Returns the manifest; raises
    CheckpointError naming every problem."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory} does not exist")
    manifest = read_manifest(directory)
    listed = manifest["files"]
    problems = [f"{name} is not in it (a checkpoint saved without it cannot be resumed)"
                for name in require if name not in listed]
    for name, meta in sorted(listed.items()):
        p = directory / name
        if not p.is_file():
            problems.append(f"{name} is missing")
        elif p.stat().st_size != meta["size"]:
            problems.append(f"{name} has {p.stat().st_size} bytes, not {meta['size']}")
        elif _sha256(p) != meta["sha256"]:
            problems.append(f"{name} has other contents than were written (sha256 differs)")
    problems += [f"{name} is not in the manifest (not written with this checkpoint)"
                 for name in _files(directory) if name not in listed]
    if problems:
        raise CheckpointError(f"checkpoint {directory} fails its {MANIFEST_FILE} check: "
                              + "; ".join(problems))
    return manifest


def is_sealed(directory: str | Path) -> bool:
    """Whether ``directory`` has a readable manifest (cheap: no checksums)."""
    try:
        read_manifest(directory)
        return True
    except CheckpointError:
        return False


# ----------------------------------------------------------------------------- writing


def _install(tmp: Path, target: Path) -> None:
    """Move the sealed ``tmp`` to ``target``, the previous ``target`` out of the way first."""
    old = target.parent / f".{target.name}.old"
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    _fsync(target.parent)  # the renames themselves survive a power cut
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_dir(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_dir)``, seal it with a manifest and move the finished directory to
    ``target`` atomically (see the module docstring)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        write(tmp)
        for f in tmp.rglob("*"):  # flush contents before the manifest vouches for them
            if f.is_file():
                _fsync(f)
        write_manifest(tmp)  # last: its presence marks a complete directory
        _fsync(tmp / MANIFEST_FILE)
        _fsync(tmp)
        _install(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# ----------------------------------------------------------------------------- recovery


def _created(directory: Path) -> int:
    return int(read_manifest(directory).get("created_ns", 0))


def find_checkpoint(path: str | Path, *, verify: bool = True,
                    require: Iterable[str] = ()) -> Optional[Path]:
    """The checkpoint at ``path`` after recovering an interrupted write, or None if there is none.

    The newest sealed copy wins: a sealed ``.NAME.tmp-*`` newer than ``path`` (checked in full
    first) replaces it; ``.NAME.old`` comes back only when ``path`` is missing. Unsealed and
    superseded temporary copies are removed (gigabytes each at Qwen3 size). With ``verify`` the
    checkpoint is checked against its manifest (``verify_checkpoint``, with ``require``) and a
    damaged one raises CheckpointError; nothing else is removed then, so a user can look.

    Renames and deletes: call it only while holding the run's lock (gamerl.runs.rundir).
    """
    path = Path(path)
    old = path.parent / f".{path.name}.old"
    tmps = sorted(path.parent.glob(f".{path.name}.tmp-*"))

    def age(d: Path) -> Optional[int]:  # None: absent; -1: there but unsealed
        return None if not d.exists() else _created(d) if is_sealed(d) else -1

    current = age(path)
    if current is None:  # killed between the renames: the old copy is what there is
        current = age(old)
    sealed = sorted((t for t in tmps if is_sealed(t)), key=_created, reverse=True)
    for tmp in sealed:
        if current is not None and _created(tmp) <= current:
            break
        try:
            verify_checkpoint(tmp)
        except CheckpointError as e:
            log.warning("ignoring the interrupted checkpoint write %s: %s", tmp, e)
            continue
        log.warning("recovering %s from %s: its write was complete, the rename was interrupted",
                    path, tmp)
        _install(tmp, path)
        break
    if not path.exists() and old.exists():
        log.warning("recovering %s from %s (interrupted replacement)", path, old)
        os.replace(old, path)
    for tmp in tmps:  # incomplete or superseded writes
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if not path.exists():
        return None
    if verify:
        verify_checkpoint(path, require)
        if old.exists():  # killed before the replaced copy was removed: stale
            shutil.rmtree(old, ignore_errors=True)
    return path


# ----------------------------------------------------------------------------- the trainer's files


def save_checkpoint(target: str | Path, policy, tokenizer, optimizer: Optional[torch.optim.Optimizer],
                    state: dict[str, Any], train_config: dict[str, Any],
                    metrics: Optional[dict[str, Any]] = None) -> Path:
    """Write a checkpoint directory atomically (see the module docstring for its files)."""

    def write(tmp: Path) -> None:
        policy.save(tmp, tokenizer)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        (tmp / RNG_FILE).write_text(json.dumps(rng_state()) + "\n")
        (tmp / CONFIG_FILE).write_text(json.dumps(train_config, indent=2, sort_keys=True) + "\n")
        (tmp / METRICS_FILE).write_text(json.dumps(metrics or {}, indent=2, sort_keys=True) + "\n")
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")

    return atomic_write_dir(target, write)


def load_checkpoint_state(path: str | Path, verify: bool = True) -> dict[str, Any]:
    """The JSON parts and RNG/optimizer states of a checkpoint (the model loads separately with
    ``PolicyWithValue.load``), checked against its manifest first unless ``verify=False`` (the
    caller just did: ``find_checkpoint``)."""
    path = Path(path)
    if verify:
        verify_checkpoint(path)
    out = {"state": json.loads((path / STATE_FILE).read_text()),
           "train_config": json.loads((path / CONFIG_FILE).read_text()),
           "metrics": json.loads((path / METRICS_FILE).read_text()),
           "rng": json.loads((path / RNG_FILE).read_text())}
    if (path / OPTIMIZER_FILE).exists():
        out["optimizer"] = load_tensors(path / OPTIMIZER_FILE)
    return out


def load_tensors(path: str | Path, map_location: Any = "cpu") -> Any:
    """``torch.load`` that accepts tensors and plain containers only (``weights_only=True``); a
    file that needs more (a crafted pickle, or one from elsewhere) is a CheckpointError."""
    import pickle

    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).split("\n")[0][:300]
        raise CheckpointError(f"{path} holds more than tensors and plain values; refusing to "
                              f"unpickle it ({first})") from e


__all__ = ["CheckpointError", "MANIFEST_FILE", "atomic_write_dir", "find_checkpoint",
           "is_sealed", "load_checkpoint_state", "load_tensors", "read_manifest", "rng_state",
           "save_checkpoint", "set_rng_state", "verify_checkpoint", "write_manifest"]
