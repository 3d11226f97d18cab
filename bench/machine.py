"""What a benchmark's JSON says about where it ran, writing that JSON, and waiting for the GPU
before a clock is read: one place for the scripts in bench/ that time things (rollout_bench,
decode_graphs_bench)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import torch


def machine_info(**extra: Any) -> dict[str, Any]:
    """Platform, the CPU model, Python, torch, CPU count and threads, the GPU's name (or None),
    the code's commit, plus ``extra``."""
    from gamerl.runs.code_version import code_version, cpu_model

    return {"platform": platform.platform(), "cpu": cpu_model(), **code_version(),
            "python": platform.python_version(),
            "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, **extra}


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so a timer read after it counts that work (CUDA)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def write_json(path: str | None, result: dict[str, Any]) -> None:
    """Write ``result`` to ``path`` (folders made), and say so; nothing when ``path`` is None."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {path}")
