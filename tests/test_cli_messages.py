"""Mistakes answered in one line, at once: every setting is checked before anything loads or is
written; the exit status is 2 and nothing is left behind."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gamerl(*args, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "gamerl", *args], capture_output=True, text=True,
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    return proc, time.time() - t0


@pytest.mark.parametrize("args, says", [
    (["--set", "lr=fast"], "lr='fast': expected a number"),
    (["--set", "learning_rate=1e-4"], "unknown setting 'learning_rate'; did you mean 'lr'?"),
    (["--epochs", "-3"], "epochs must be >= 0, not -3"),
    (["--set", "kl_loss_estimator=k1"], "zero expected gradient"),
    (["--set", "lora_dropout=0.1"], "RL uses no dropout"),
    (["--env-url", "http://127.0.0.1:9"], "no game server answers at http://127.0.0.1:9"),
    (["--model", "Qwen/Qwen3-8B"], "model 'Qwen/Qwen3-8B' is not available"),
])
def test_train_mistakes_are_one_clear_message_and_nothing_is_written(args, says, tmp_path):
    out = tmp_path / "run"
    proc, seconds = gamerl("train", "--out", str(out), *args, tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("python -m gamerl train: ")
    assert not out.exists()  # no run directory holding a lone config.json
    assert seconds < 60  # no model was loaded (the torch import alone is a few seconds)


def test_evaluate_against_a_closed_port_is_one_line(tmp_path):
    proc, _ = gamerl("evaluate", "--checkpoint", str(tmp_path), "--env-url",
                     "http://127.0.0.1:9", tmp_path=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no game server answers" in proc.stderr


@pytest.mark.parametrize("args, says", [
    ([], "give --checkpoint DIR (a trained run) or --model NAME"),
    (["--model", "tiny", "--checkpoint", "x"], "not both"),
    (["--checkpoint", "x", "--preset", "tiny"], "a checkpoint keeps its run's settings"),
    (["--model", "Qwen/Qwen3-8B"], "model 'Qwen/Qwen3-8B' is not available"),
])
def test_evaluate_mistakes_are_one_line(args, says, tmp_path):
    proc, _ = gamerl("evaluate", *args, tmp_path=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert says in proc.stderr


def test_evaluate_a_model_before_training(tmp_path):
    """--model: the zero-shot row (the untrained model with the preset's settings), beside the
    reference rows and per-rule pass rates, as for a checkpoint."""
    proc, _ = gamerl("evaluate", "--model", "tiny", "--episodes", "2", "--json",
                     str(tmp_path / "rows.json"), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "solver (all rules)" in proc.stdout and "per-rule pass rate (policy):" in proc.stdout
    import json

    assert json.loads((tmp_path / "rows.json").read_text())["policy"]["episodes"] == 2


def test_progress_is_not_a_run_setting(tmp_path):
    from gamerl.config import TrainConfig, get_config

    cfg = get_config("tiny", progress=False)
    cfg.save(tmp_path / "config.json")
    assert "progress" not in (tmp_path / "config.json").read_text()
    assert TrainConfig.load(tmp_path / "config.json").progress  # a resumed run shows its bars
