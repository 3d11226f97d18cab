"""Fixtures shared by the test modules that train: the embedded tiny model, built fresh."""

import os

import pytest

from gamerl.models import build_tiny


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


def train_and_compare(cfg, run_dir):
    """Run ``Trainer(cfg, run_dir).train()``, print its held-out table and wall time, and
    return ``(summary, baseline, final)`` for a learning test to compare."""
    import time

    from gamerl.trainer import Trainer

    t0 = time.time()
    summary = Trainer(cfg, run_dir).train()
    print(summary["table"], f"\n{time.time() - t0:.0f}s")
    return summary, summary["baseline"], summary["final"]
