"""``python -m gamerl``: train (end to end, tiny overrides), evaluate, build-tiny.

Subprocesses, CPU, offline; the train run uses wandb in its default offline mode.
"""

import json
import os
import subprocess
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
