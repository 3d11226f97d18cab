"""Model directories built once and renamed into place (the tiny model, SmolLM2, Qwen3-random).

A build writes to a temporary sibling directory, adds a marker file (what it was built from),
and renames it into place: a reader never sees half a model, and two processes building the
same model at once both end with one complete copy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Sequence


def is_current(path: Path, marker_name: str, expected: dict,
               required: Sequence[str] = ("config.json",)) -> bool:
    """Whether ``path`` holds a complete build whose marker agrees with ``expected``."""
    try:
        found = json.loads((path / marker_name).read_text())
    except (OSError, ValueError):
        return False
    return ({k: found.get(k) for k in expected} == expected
            and all((path / name).exists() for name in required))


def build_atomically(out: Path, write: Callable[[Path], dict], marker_name: str, expected: dict,
                     required: Sequence[str] = ("config.json",)) -> Path:
    """Run ``write(tmp)`` (it fills ``tmp`` and returns marker fields beyond ``expected``), write
    the marker, rename into place.

    A failure removes the temporary directory. An error is forgiven when another process has
    put a current build in place meanwhile (the rename race); an interrupt (Ctrl-C) never is.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        extra = write(tmp)
        marker = {**expected, **(extra or {})}
        (tmp / marker_name).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o755)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        if not is_current(out, marker_name, expected, required):
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
