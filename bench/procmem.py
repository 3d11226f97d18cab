"""A process's memory as Linux reports it in /proc, and its accelerator's as torch does, for the
benchmarks (one place).

``status_bytes("VmRSS")`` is the resident memory now, ``status_bytes("VmHWM")`` its peak since
start or since ``reset_peak()``. None where there is no /proc (not Linux). ``gpu_peak_gb`` is
the peak GPU memory allocated since ``gpu_reset_peak`` (None off a GPU).
"""

from __future__ import annotations

from typing import Optional


def status_bytes(key: str, pid: int | str = "self") -> Optional[int]:
    """``key`` (``VmRSS``, ``VmHWM``, ...) of process ``pid`` from /proc/<pid>/status, in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB
    except OSError:
        pass
    return None


def reset_peak() -> bool:
    """Start ``VmHWM`` over from the resident memory now; False where the kernel does not allow
    it (then the peak counts from process start)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def gpu_peak_gb(device) -> Optional[float]:
    """Peak accelerator memory allocated on ``device`` since the last ``gpu_reset_peak`` (None
    on CPU)."""
    import torch

    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 1e9


def gpu_reset_peak(device) -> None:
    """Start the accelerator's peak over, after the work queued so far (nothing on CPU)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
