"""``python -m gamerl``: train (end to end, tiny overrides), evaluate, build-tiny.

Subprocesses, CPU, offline; the train run uses wandb in its default offline mode.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gamerl.models import build_tiny

from conftest import run_gamerl  # pytest (prepend import mode) puts tests/ on sys.path

ROOT = Path(__file__).resolve().parents[1]

METRIC_KEYS = {"reward", "rules_satisfied", "success_rate", "episodes", "turns",
               "per_rule_pass_rate"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tiny = build_tiny(tmp_path_factory.mktemp("cli") / "tiny")
    return {**os.environ, "GAMERL_TINY_DIR": str(tiny), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "WANDB_SILENT": "true"}


def gamerl(env, *args, timeout=300):
    return run_gamerl(*args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def run(env, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    res = gamerl(env, "train", "--preset", "tiny", "--out", str(out), "--epochs", "1",
                 "--episodes-per-epoch", "4", "--eval-episodes", "4", "--no-progress",
                 "--set", "num_rules=4", "--set", "max_steps=2", "--set", "max_new_tokens=12",
                 "--set", "warmstart_steps=5", "--set", "warmstart_examples=16",
                 "--set", "minibatch_size=2", "--set", "ppo_epochs=1")
    assert res.returncode == 0, res.stdout + res.stderr
    return out, res


@pytest.mark.slow
def test_train_writes_summary_figures_metrics_and_checkpoints(run):
    out, res = run
    summary = json.loads((out / "summary.json").read_text())
    # zero-shot (before the warm start), baseline (after it), final (after PPO), references
    for row in ("zero_shot", "baseline", "final", "solver", "random"):
        assert METRIC_KEYS <= set(summary[row]), row
        assert summary[row]["episodes"] == 4
        assert len(summary[row]["per_rule_pass_rate"]) == 4
    assert summary["solver"]["success_rate"] == 1.0
    assert summary["eval_seeds"] == [1_000_000, 1_000_003]  # first and last, both played
    # the code it ran: this checkout's commit (None outside git), read when the run started
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or None
    assert summary["git_commit"] == head and isinstance(summary["git_dirty"], (bool, type(None)))
    # and the machine (the same seed samples other episodes on another CPU)
    import torch
    assert summary["host"]["torch"] == torch.__version__ and summary["host"]["cpu"]
    assert summary["host"]["torch_threads"] >= 1 and summary["host"]["accelerator"] is None
    assert summary["config"]["epochs"] == 1 and summary["config"]["num_rules"] == 4
    for fig in ("training_curves.png", "success_rate.png", "rule_pass_rates.png"):
        assert (out / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", fig
        assert fig in summary["figures"]
    # the end-of-run table, baseline vs final
    assert "baseline" in res.stdout and "final" in res.stdout and "rules satisfied" in res.stdout
    assert "zero_shot" in res.stdout
    # per-epoch metrics, including every PPO diagnostic the issue asks for
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    (epoch,) = [r for r in rows if r["kind"] == "epoch"]
    for key in ("rollout/reward", "rollout/rules_satisfied", "rollout/success_rate",
                "update/policy_loss", "update/value_loss", "update/entropy", "update/approx_kl",
                "adv/kl_ref", "update/clip_fraction", "update/value_clip_fraction",
                "adv/explained_variance", "update/grad_norm", "update/update_tokens_per_s",
                "perf/rollout_tokens_per_s", "update/skipped_updates"):
        assert key in epoch, key
    assert [r["name"] for r in rows if r["kind"] == "eval"] == ["zero_shot", "baseline", "final"]
    episodes = (out / "episodes.jsonl").read_text().splitlines()
    assert len(episodes) == 4 and "passwords" in json.loads(episodes[0])
    for ckpt in ("best", "last"):
        assert (out / ckpt / "trainer_state.json").exists() and (out / ckpt / "value_head.pt").exists()
    assert (out / "warmstart" / "warmstart.json").exists()
    assert list((out / "wandb").glob("offline-run-*")), "wandb offline run missing"


@pytest.mark.slow
def test_evaluate_checkpoint(run, env, tmp_path):
    out, _ = run
    res = gamerl(env, "evaluate", "--checkpoint", str(out / "last"), "--episodes", "3",
                 "--json", str(tmp_path / "eval.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads((tmp_path / "eval.json").read_text())
    assert set(rows) == {"policy", "solver", "random"} and rows["policy"]["episodes"] == 3
    assert "per-rule pass rate" in res.stdout


def test_build_tiny_and_bad_override(env, tmp_path):
    res = gamerl(env, "build-tiny", "--out", str(tmp_path / "t"))
    assert res.returncode == 0 and (tmp_path / "t" / "config.json").exists()
    res = gamerl(env, "train", "--preset", "tiny", "--set", "no_such_field=1", "--out",
                 str(tmp_path / "x"))
    assert res.returncode != 0 and "no_such_field" in res.stderr


def test_train_help_lists_every_preset_with_what_it_is():
    from gamerl.config.presets import PRESET_SUMMARIES, PRESETS

    res = subprocess.run([sys.executable, "-m", "gamerl", "train", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    help_text = " ".join(res.stdout.split())
    for name in PRESETS:
        assert f"{name} {' '.join(PRESET_SUMMARIES[name].split())}" in help_text


def test_print_config_shows_every_setting_without_loading_a_model(tmp_path):
    """Every setting with its section and value, and exit 0, without importing torch (so no
    model is loaded) and without writing anything."""
    from gamerl.config.train_config import SETTING_SECTION

    code = ("import sys; from gamerl.cli import main; "
            "rc = main(['train', '--preset', 'smollm2-135m-r12', '--run-name', 'mine', "
            "'--set', 'lr=1e-5', '--print-config']); print('torch loaded:', 'torch' in "
            "sys.modules); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for name in SETTING_SECTION:
        assert any(line.split("=")[0].strip() == name for line in lines), name
    assert any(line.startswith("  lr ") and "= 1e-05" in line for line in lines)
    assert any('out_dir' in line and '"checkpoints/mine"' in line for line in lines)
    assert "torch loaded: False" in res.stdout
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_preset_made_for_one_game_is_refused_with_another(tmp_path):
    res = subprocess.run([sys.executable, "-m", "gamerl", "train", "--preset", "smollm2-135m-r12",
                          "--task", "wordle"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "made for password_game" in res.stderr
    assert not list(tmp_path.iterdir())
