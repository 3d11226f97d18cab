"""Shared by the test modules: the embedded tiny model built fresh, the ``python -m gamerl``
runner, the learning tests' train-and-compare step, a kill at a function's n-th call
(``count_calls``, ``Killed``), a process's resident memory, and one torch thread for a module
(``pytestmark = pytest.mark.usefixtures("one_torch_thread")``)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamerl.models import build_tiny
from gamerl.core.trainer import Trainer

REPO = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@pytest.fixture(scope="module")
def one_torch_thread():
    """The tiny model is many times faster on one thread on a busy 2-core machine; put back."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A freshly built tiny model; while the module runs, the model name "tiny" resolves to it,
    in this process and in the subprocesses it starts (GAMERL_TINY_DIR). Modules that only need
    the files define their own ``tiny_dir``."""
    path = build_tiny(tmp_path_factory.mktemp("tiny") / "tiny")
    old = os.environ.get("GAMERL_TINY_DIR")
    os.environ["GAMERL_TINY_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("GAMERL_TINY_DIR", None)
    else:
        os.environ["GAMERL_TINY_DIR"] = old


class Killed(BaseException):
    """Stands for SIGKILL inside one process: nothing after it runs but finally blocks."""


def count_calls(monkeypatch, module, name: str, kill_at=None) -> dict:
    """``module.name`` wrapped for the test (monkeypatch puts it back) to count its calls, and
    to raise ``Killed`` at call ``kill_at``; returns the count, ``{"n": calls so far}``. It wraps
    whatever ``module.name`` is now (another wrapper too)."""
    real, calls = getattr(module, name), {"n": 0}

    def counting(*a, **k):
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise Killed()
        return real(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return calls


def train_and_compare(cfg, run_dir):
    """Run ``Trainer(cfg, run_dir).train()``, print its held-out table and wall time, and
    return ``(summary, baseline, final)`` for a learning test to compare."""
    t0 = time.time()
    summary = Trainer(cfg, run_dir).train()
    print(summary["table"], f"\n{time.time() - t0:.0f}s")
    return summary, summary["baseline"], summary["final"]


def run_gamerl(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    """``python -m gamerl ARGS`` from the repository root, offline (``env`` defaults to this
    process's environment), output captured as text."""
    env = {**(os.environ if env is None else env), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "WANDB_SILENT": "true"}
    return subprocess.run([sys.executable, "-m", "gamerl", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def rss_bytes(pid) -> int:
    """Resident memory of process ``pid`` (or ``"self"``), from /proc (Linux)."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def trained_answers(tokenizer, ids, mask) -> list[str]:
    """A warm-start example's trained spans (its loss mask's runs of 1s), each decoded: one
    answer per turn, ``<answer><|im_end|>``."""
    spans, current = [], []
    for token, m in zip(ids, mask):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return [tokenizer.decode(span) for span in spans]
