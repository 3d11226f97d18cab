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
    (["--set", "kl_loss_estimator=k1"],
     "unknown setting 'kl_loss_estimator': removed from the trainer on 2026-12-07 (no preset "
     "changed it); it is 'k3' now, and the git tag experiments-2026-12 still has it"),
    (["--set", "lora_dropout=0.1"], "unknown setting 'lora_dropout': removed from the trainer on "
     "2026-12-07 (no preset changed it); it is 0.0 now"),
    (["--env-url", "http://127.0.0.1:9"], "no game server answers at http://127.0.0.1:9"),
    (["--model", "Qwen/Qwen3-8B"], "model 'Qwen/Qwen3-8B' is not available"),
    # The game's own settings, read by the game before the model loads (a traceback from inside
    # the Trainer before 2026-11-29).
    (["--task", "wordle", "--set", 'task_config={"reward": {"typo": 1}}'],
     "unexpected keyword argument 'typo'"),
    (["--task", "wordle", "--set", 'task_config={"reward": {"fit_reward": -1}}'],
     "reward.fit_reward must be >= 0"),
])
def test_train_mistakes_are_one_clear_message_and_nothing_is_written(args, says, tmp_path):
    out = tmp_path / "run"
    proc, seconds = gamerl("train", "--out", str(out), *args, tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("python -m gamerl train: ")
    assert not out.exists()  # no run directory holding a lone config.json
    assert seconds < 60  # no model was loaded (the torch import alone is a few seconds)


def one_line_refusal(proc, says):
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CUDA GPU is here")
def test_a_device_this_torch_lacks_is_refused_before_anything_is_written(tmp_path):
    """--device cuda on a CPU-only torch raised torch's AssertionError inside the model load,
    after config.json was written; the next start was then refused as a partial run."""
    out = tmp_path / "run"
    proc, _ = gamerl("train", "--out", str(out), "--device", "cuda", tmp_path=tmp_path)
    one_line_refusal(proc, "device 'cuda': this torch build has no CUDA")
    assert "--device cpu" in proc.stderr and not out.exists()
    # A partial run left by an older start on that device: --resume names the way out.
    from gamerl.config import get_config

    out.mkdir()
    get_config("tiny", device="cuda", out_dir=str(out)).save(out / "config.json")
    before = sorted(p.name for p in out.iterdir())
    proc, _ = gamerl("train", "--out", str(out), "--resume", tmp_path=tmp_path)
    one_line_refusal(proc, "given with --resume, --device changes the run's device")
    assert sorted(p.name for p in out.iterdir()) == before
    proc, _ = gamerl("evaluate", "--model", "tiny", "--device", "cuda:0", tmp_path=tmp_path)
    assert proc.returncode == 2 and "no CUDA" in proc.stderr


@pytest.mark.parametrize("text, says", [
    (None, "missing.json: no such file"),
    ('{"model": "tiny",}', "JSON allows no trailing comma"),
    ('{"model": "tiny", // the model\n}', "JSON has no comments"),
])
def test_a_config_file_that_is_missing_or_not_json_is_one_line(text, says, tmp_path):
    path = tmp_path / "missing.json"
    if text is not None:
        path.write_text(text)
    proc, _ = gamerl("train", "--config", str(path), "--out", str(tmp_path / "run"),
                     tmp_path=tmp_path)
    one_line_refusal(proc, says)
    assert not (tmp_path / "run").exists()
    if "comma" in says:
        assert "comment" not in proc.stderr  # the hint names the mistake that was made


def test_resume_of_a_directory_that_does_not_exist_changes_nothing(tmp_path):
    """Refused at once: no directory, no lock file in it, no model built on the way."""
    proc, seconds = gamerl("train", "--resume", "--out", str(tmp_path / "nothere"),
                           tmp_path=tmp_path)
    one_line_refusal(proc, "nothere holds no run to continue (it does not exist)")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no nothere/, no checkpoints/tiny
    assert seconds < 30


def test_resume_of_a_finished_run_says_so_and_changes_nothing(tmp_path):
    """A finished run (summary.json) resumed without more epochs would only repeat its final
    evaluation and rewrite summary.json: refused, saying how to train further or evaluate."""
    from gamerl.config import get_config

    out = tmp_path / "run"
    out.mkdir()
    get_config("tiny", epochs=2, out_dir=str(out)).save(out / "config.json")
    (out / "summary.json").write_text('{"epochs": 2}')
    proc, _ = gamerl("train", "--out", str(out), "--resume", tmp_path=tmp_path)
    one_line_refusal(proc, "is a finished run (2 epochs, summary.json written)")
    assert "--epochs N with N > 2" in proc.stderr and "evaluate --checkpoint" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "summary.json"]
    assert (out / "summary.json").read_text() == '{"epochs": 2}'


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
    (["--model", "tiny", "--task", "wordle", "--task-config", "{not json"], "--task-config: "),
    (["--model", "tiny", "--task", "wordle", "--task-config", '{"max_guesses": 0}'],
     "max_guesses must be an int in [1, 100]"),
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


def test_evaluate_under_another_reward_plays_the_same_games(tmp_path):
    """--task-config: the same held-out games and samples scored under other game settings (a
    policy trained on a shaped reward, under the game's own): every column but the reward is
    the same."""
    import json

    rows = []
    for i, extra in enumerate([[], ["--task-config", '{"reward": {"invalid_penalty": 0.5}}']]):
        proc, _ = gamerl("evaluate", "--model", "tiny", "--task", "wordle", "--episodes", "3",
                         "--json", str(tmp_path / f"rows{i}.json"), *extra, tmp_path=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows.append(json.loads((tmp_path / f"rows{i}.json").read_text())["policy"])
    same = {k for k in rows[0] if "reward" not in k and "seconds" not in k}
    assert {k: rows[0][k] for k in same} == {k: rows[1][k] for k in same}
    assert rows[0]["invalid_rate"] > 0  # the untrained model's guesses: mostly not words
    assert rows[1]["reward"] < rows[0]["reward"]
