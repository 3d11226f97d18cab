"""Runs and checkpoints under faults: damaged or crafted checkpoints, interrupted writes, a
killed warm start, two processes on one run directory (issue 13).

Every test builds its run directory in a few seconds (a Trainer on the tiny model that saves
checkpoints without training); the CLI test that needs two live processes is marked slow.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import builtins
import gc
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gamerl.runs.checkpoint import find_checkpoint, save_checkpoint
from gamerl.config import get_config
from gamerl.models import load_policy
from gamerl.core.trainer import Trainer
from gamerl.core.warmstart import warm_start

from conftest import Killed, count_calls  # pytest (prepend import mode) puts tests/ on sys.path

REPO = Path(__file__).resolve().parents[1]


def small_cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                episodes_per_epoch=4, minibatch_size=4, ppo_epochs=1, eval_episodes=4, epochs=4,
                warmstart=False, wandb_mode="disabled", progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def release(trainer) -> None:
    """Let go of a Trainer's run directory (its lock) as a finished process would."""
    trainer.tracker.finish()
    close = getattr(trainer, "close", None)
    if close is not None:
        close()
    del trainer
    gc.collect()


def make_run(cfg, run_dir: Path, epochs_done: int = 2) -> Path:
    """A run directory as a run leaves it after ``epochs_done`` epochs: best/ and last/,
    metrics.jsonl (baseline + epochs), episodes.jsonl, baseline.json. No training: the
    checkpoints hold the initial weights, which is all these tests need."""
    t = Trainer(cfg, run_dir)
    t.baseline = {"reward": 0.5, "success_rate": 0.0}
    (run_dir / "baseline.json").write_text(json.dumps(t.baseline) + "\n")
    t.tracker.log({"kind": "eval", "epoch": -1, "name": "baseline", "reward": 0.5}, step=0)
    for epoch in range(epochs_done):
        metrics = {"kind": "epoch", "epoch": epoch, "rollout/reward": 1.0 + epoch}
        t.tracker.log(metrics, step=epoch + 1)
        t.tracker.log_episodes([{"seed": epoch, "reward": 1.0 + epoch}], epoch)
        t.state.epoch = epoch + 1
        t.state.best_reward, t.state.best_epoch = 1.0 + epoch, epoch
        t.save("best", metrics)
        t.save("last", metrics)
    release(t)
    return run_dir


def snapshot(run_dir: Path) -> dict[str, str]:
    """Every file of a run directory (the lock file aside) with its sha256."""
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture(scope="module")
def base_run(tiny_dir, tmp_path_factory):
    cfg = small_cfg(tiny_dir)
    return cfg, make_run(cfg, tmp_path_factory.mktemp("base") / "run")


@pytest.fixture
def run(base_run, tmp_path):
    """A fresh copy of the module's run directory, free to damage."""
    cfg, src = base_run
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return cfg, dst


def refuses(cfg, run_dir, resume=True, match=None):
    """Trainer(...) must refuse (an error naming the problem) and leave the run as it was."""
    before = snapshot(run_dir)
    with pytest.raises((RuntimeError, OSError), match=match) as err:
        Trainer(cfg, run_dir, resume=resume)
    assert snapshot(run_dir) == before, "a refused start changed the run directory"
    gc.collect()
    return str(err.value)


# ----------------------------------------------------------------------------- 1. resume refuses


def test_resume_refuses_a_last_checkpoint_without_its_state(run):
    cfg, run_dir = run
    (run_dir / "last" / "trainer_state.json").unlink()
    msg = refuses(cfg, run_dir, match="last")
    assert "trainer_state.json" in msg


def test_resume_refuses_when_last_is_missing_but_the_run_went_further(run):
    cfg, run_dir = run
    shutil.rmtree(run_dir / "last")
    msg = refuses(cfg, run_dir, match="last")
    assert "best" in msg  # says what a restart would overwrite


def test_fresh_run_refuses_a_directory_holding_a_partial_run(run):
    """Killed before its first checkpoint: logs and baseline, no last/. A run without --resume
    must not delete them."""
    cfg, run_dir = run
    for name in ("last", "best"):
        shutil.rmtree(run_dir / name)
    refuses(cfg, run_dir, resume=False, match="--resume")


def test_fresh_run_refuses_a_finished_run(run):
    cfg, run_dir = run
    (run_dir / "summary.json").write_text("{}\n")
    refuses(cfg, run_dir, resume=False, match="--resume")


def test_resume_never_replaces_a_better_best(run, tiny_dir):
    """best/ newer and better than last/ (a kill between their saves): the resumed run must compare against
    best/'s reward, not last/'s older one, or its next epoch overwrites a better model."""
    cfg, run_dir = run
    state = json.loads((run_dir / "best" / "trainer_state.json").read_text())
    t = Trainer(cfg, run_dir, resume=True)
    assert t.state.best_reward == state["best_reward"]
    t.state.best_reward, t.state.best_epoch, t.state.epoch = 9.0, 5, 6
    t.save("best", {"rollout/reward": 9.0})
    release(t)
    t = Trainer(cfg, run_dir, resume=True)
    assert t.state.epoch == 2 and t.state.best_reward == 9.0 and t.state.best_epoch == 5
    release(t)


def test_resume_refuses_a_damaged_best(run):
    """The resumed run compares against best/'s reward, so best/ must be sound as well."""
    cfg, run_dir = run
    (run_dir / "best" / "trainer_state.json").write_text("{}")
    assert "best" in refuses(cfg, run_dir)


# ----------------------------------------------------------------------------- 2. no code runs


class _Payload:
    """Unpickling this creates ``marker``: stands for any code a crafted checkpoint runs."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


def test_resume_runs_no_code_from_a_crafted_rng_file(run, tmp_path):
    cfg, run_dir = run
    marker = tmp_path / "pwned"
    torch.save({"python": _Payload(marker)}, run_dir / "last" / "rng.pt")
    try:
        release(Trainer(cfg, run_dir, resume=True))
    except (RuntimeError, OSError):
        pass  # refusing is fine; running the payload is not
    assert not marker.exists()


def test_every_checkpoint_file_loads_without_unpickling_objects(run):
    """Tensors with weights_only=True, the rest JSON or safetensors: no file of a checkpoint
    needs the full unpickler."""
    _, run_dir = run
    last = run_dir / "last"
    for f in last.iterdir():
        if f.suffix in (".pt", ".pth", ".bin"):
            torch.load(f, weights_only=True)
        elif f.suffix == ".json":
            json.loads(f.read_text())


@pytest.mark.parametrize("name", ["optimizer.pt", "value_head.pt"])
def test_a_crafted_tensor_file_is_refused_even_with_a_matching_manifest(run, tmp_path, name):
    """The manifest guards against damage, not attacks: an attacker can rewrite it. The
    loaders themselves must never run code, and the refusal changes nothing."""
    from gamerl.runs.checkpoint import write_manifest

    cfg, run_dir = run
    marker = tmp_path / "pwned"
    torch.save({"state": {0: _Payload(marker)}, "param_groups": []}, run_dir / "last" / name)
    write_manifest(run_dir / "last")
    assert name in refuses(cfg, run_dir, match="more than tensors")
    assert not marker.exists()


# ----------------------------------------------------------------------------- 3. manifest


def test_only_last_keeps_the_optimizer_state(run):
    """last/ is what a resume continues from: it keeps AdamW's moments; best/ is for evaluation
    and export, and does not (SmolLM2: 109 MB saved per run), yet a resume still checks it."""
    cfg, run_dir = run
    assert (run_dir / "last" / "optimizer.pt").exists()
    assert not (run_dir / "best" / "optimizer.pt").exists()
    release(Trainer(cfg, run_dir, resume=True))


def test_resume_refuses_a_checkpoint_without_optimizer_state(run):
    cfg, run_dir = run
    (run_dir / "last" / "optimizer.pt").unlink()
    assert "optimizer.pt" in refuses(cfg, run_dir)


def test_resume_refuses_a_model_with_overwritten_bytes(run):
    cfg, run_dir = run
    model = run_dir / "last" / "model.safetensors"
    size = model.stat().st_size
    with open(model, "r+b") as f:  # 4 KB of zeros in the middle: the file still parses
        f.seek(size // 2)
        f.write(bytes(4096))
    assert model.stat().st_size == size
    assert "model.safetensors" in refuses(cfg, run_dir)


def test_evaluate_refuses_a_damaged_checkpoint(run, capsys):
    from gamerl.cli import main

    _, run_dir = run
    model = run_dir / "best" / "model.safetensors"
    with open(model, "r+b") as f:
        f.seek(model.stat().st_size // 2)
        f.write(bytes(4096))
    with pytest.raises(SystemExit) as err:
        main(["evaluate", "--checkpoint", str(run_dir / "best"), "--episodes", "2",
              "--device", "cpu"])
    assert "model.safetensors" in str(err.value)


# ----------------------------------------------------------------------------- 4. interrupted writes


def _state_epoch(ckpt: Path) -> int:
    return json.loads((ckpt / "trainer_state.json").read_text())["epoch"]


def test_a_complete_newer_temp_checkpoint_wins_over_the_old_one(run):
    """Killed between the two renames of a replacement: .last.old (epoch 2) and a complete
    .last.tmp-* (epoch 3), no last/. The newer one is the checkpoint to continue from."""
    cfg, run_dir = run
    t = Trainer(cfg, run_dir, resume=True)
    t.state.epoch = 3
    t.save("newer")
    release(t)
    os.replace(run_dir / "last", run_dir / ".last.old")
    os.replace(run_dir / "newer", run_dir / ".last.tmp-x1y2z3")
    last = find_checkpoint(run_dir / "last")
    assert last == run_dir / "last" and _state_epoch(last) == 3
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".last")) == []


def test_a_complete_temp_checkpoint_newer_than_last_is_used(run):
    """Killed after the temp directory was complete, before any rename."""
    cfg, run_dir = run
    t = Trainer(cfg, run_dir, resume=True)
    t.state.epoch = 3
    t.save("newer")
    release(t)
    os.replace(run_dir / "newer", run_dir / ".last.tmp-abcdef")
    assert _state_epoch(find_checkpoint(run_dir / "last")) == 3


def test_incomplete_temp_directories_are_removed_on_resume(run):
    cfg, run_dir = run
    for name in (".last.tmp-aaaa", ".best.tmp-bbbb", ".warmstart.tmp-cccc"):
        (run_dir / name).mkdir()
        (run_dir / name / "model.safetensors").write_bytes(b"half a model")
    t = Trainer(cfg, run_dir, resume=True)
    assert t.state.epoch == 2
    release(t)
    assert not [p for p in run_dir.iterdir() if ".tmp-" in p.name]


def test_a_damaged_last_is_not_replaced_by_an_older_copy_silently(run):
    """last/ fails its check and .last.old is complete: never continue from the older copy
    without saying so; here it must refuse (the older copy is a stale leftover)."""
    cfg, run_dir = run
    shutil.copytree(run_dir / "last", run_dir / ".last.old")
    (run_dir / "last" / "optimizer.pt").unlink()
    refuses(cfg, run_dir)


def _warm_cfg(tiny_dir, **kw):
    return small_cfg(tiny_dir, warmstart=True, warmstart_steps=6, warmstart_examples=8,
                     warmstart_batch_size=2, warmstart_checkpoint_seconds=0, **kw)


def _count_steps(monkeypatch, kill_at=None):
    import gamerl.core.warmstart as ws

    return count_calls(monkeypatch, ws, "sft_loss", kill_at)


def test_a_killed_warm_start_resumes_where_it_stopped(tiny_dir, tmp_path, monkeypatch):
    cfg = _warm_cfg(tiny_dir)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    straight = warm_start(lm, tok, cfg, tmp_path / "straight" / "warmstart")

    calls = _count_steps(monkeypatch, kill_at=4)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    with pytest.raises(Killed):
        warm_start(lm, tok, cfg, tmp_path / "killed" / "warmstart")
    calls = _count_steps(monkeypatch)
    torch.manual_seed(0)
    lm2, tok = load_policy(str(tiny_dir), device="cpu")
    resumed = warm_start(lm2, tok, cfg, tmp_path / "killed" / "warmstart")
    assert calls["n"] == 6 - 3  # steps 4..6 only: 1..3 were checkpointed
    assert resumed["loss_last"] == pytest.approx(straight["loss_last"], rel=1e-5)
    a = load_policy(str(tmp_path / "straight" / "warmstart"), device="cpu")[0]
    b = load_policy(str(tmp_path / "killed" / "warmstart"), device="cpu")[0]
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name
    assert not [p for p in (tmp_path / "killed").iterdir() if p.name != "warmstart"]


def test_a_warm_start_killed_while_writing_its_result_is_not_redone(tiny_dir, tmp_path,
                                                                    monkeypatch):
    import gamerl.runs.checkpoint as ck

    cfg = _warm_cfg(tiny_dir)
    run_dir = tmp_path / "run"
    real_replace = os.replace

    def killed_replace(src, dst):
        if Path(dst).name == "warmstart":
            raise Killed()
        return real_replace(src, dst)

    monkeypatch.setattr(ck.os, "replace", killed_replace)
    with pytest.raises(Killed):
        Trainer(cfg, run_dir)
    gc.collect()
    monkeypatch.setattr(ck.os, "replace", real_replace)
    calls = _count_steps(monkeypatch)
    t = Trainer(cfg, run_dir, resume=True)
    assert calls["n"] == 0  # the finished warm start was not trained again
    assert (run_dir / "warmstart" / "config.json").exists()
    release(t)


# ----------------------------------------------------------------------------- 5. one writer


def test_a_second_trainer_on_a_live_run_directory_is_refused(run):
    cfg, run_dir = run
    first = Trainer(cfg, run_dir, resume=True)
    with pytest.raises(RuntimeError, match="in use"):
        Trainer(cfg, run_dir, resume=True)
    release(first)
    release(Trainer(cfg, run_dir, resume=True))  # free again once the first one is done


_HOLDER = """
import sys, time
from gamerl.config import get_config
from gamerl.core.trainer import Trainer
cfg = get_config("tiny", model=sys.argv[2], num_rules=4, max_steps=2, max_new_tokens=12,
                 episodes_per_epoch=4, minibatch_size=4, ppo_epochs=1, eval_episodes=4,
                 epochs=4, warmstart=False, wandb_mode="disabled", progress=False, device="cpu")
t = Trainer(cfg, sys.argv[1], resume=True)
print("holding", flush=True)
time.sleep(120)
"""


def test_the_lock_names_its_holder_and_dies_with_it(run, tiny_dir):
    cfg, run_dir = run
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir), str(tiny_dir)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, cwd=REPO)
    try:
        lines = []
        while not lines or lines[-1] not in ("holding", ""):  # "": it exited
            lines.append(child.stdout.readline().strip())
        assert lines[-1] == "holding", lines
        msg = refuses(cfg, run_dir, match="in use")
        assert str(child.pid) in msg
    finally:
        child.send_signal(signal.SIGKILL)  # no clean-up: the kernel drops the lock
        child.wait()
    release(Trainer(cfg, run_dir, resume=True))


@pytest.mark.slow
def test_cli_resume_without_out_does_not_attach_to_a_live_run(tiny_dir, tmp_path):
    """``train --preset tiny --resume`` (no --out) picks the newest tiny-* directory: while that
    run is training, the second process must be refused, and the live run's logs stay whole."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "GAMERL_TINY_DIR": str(tiny_dir),
           "HF_HUB_OFFLINE": "1", "WANDB_SILENT": "true"}
    args = ["--preset", "tiny", "--epochs", "40", "--episodes-per-epoch", "4",
            "--eval-episodes", "2", "--wandb-mode", "disabled", "--no-progress", "--device",
            "cpu", "--set", "num_rules=4", "--set", "max_steps=2", "--set", "max_new_tokens=12",
            "--set", "warmstart=false", "--set", "minibatch_size=4", "--set", "ppo_epochs=1"]
    run_dir = tmp_path / "checkpoints" / "tiny-20250101-000000"
    first = subprocess.Popen([sys.executable, "-m", "gamerl", "train", "--out", str(run_dir),
                              *args], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (run_dir / "last" / "trainer_state.json").exists() and time.time() < deadline:
            assert first.poll() is None, "the first run ended early"
            time.sleep(0.2)
        second = subprocess.run([sys.executable, "-m", "gamerl", "train", "--resume", *args],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode != 0
        assert "in use" in second.stderr and str(first.pid) in second.stderr, second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    epochs = [json.loads(l)["epoch"] for l in (run_dir / "metrics.jsonl").read_text().splitlines()
              if json.loads(l)["kind"] == "epoch"]
    assert len(epochs) == len(set(epochs))
