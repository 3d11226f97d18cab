"""gamerl.tracking: JSONL always, wandb optional (missing wandb is said once, then ignored),
resume truncation, figures."""

import logging
import math
import sys
import time

from gamerl.tracking import Tracker, read_jsonl, save_figures, truncate_jsonl


def test_without_wandb_logs_locally_and_says_so_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` now raises ImportError
    with caplog.at_level(logging.WARNING, logger="gamerl"):
        tr = Tracker(tmp_path, {"lr": 1e-4}, mode="offline")
        tr.log({"kind": "epoch", "epoch": 0, "rollout/reward": 1.5, "x": math.nan}, step=1)
        tr.log({"kind": "epoch", "epoch": 1, "rollout/reward": 2.5}, step=2)
        tr.log_episodes([{"seed": 3, "reward": 1.0}], epoch=1)
        tr.finish()
    assert caplog.text.count("wandb is not installed") == 1
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["rollout/reward"] for r in rows] == [1.5, 2.5]
    assert rows[0]["x"] is None  # nan -> null: strict JSON
    assert read_jsonl(tmp_path / "episodes.jsonl") == [{"epoch": 1, "seed": 3, "reward": 1.0}]


def test_disabled_mode_and_resume_truncation(tmp_path):
    tr = Tracker(tmp_path, {}, mode="disabled")
    assert tr.wandb_run is None
    for e in range(4):
        tr.log({"kind": "epoch", "epoch": e})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"kind": "epoch", "ep')  # a line cut short by a kill
    truncate_jsonl(tmp_path / "metrics.jsonl", keep_through_epoch=1)
    assert [r["epoch"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [0, 1]


def test_figures(tmp_path):
    history = [{"kind": "epoch", "epoch": e, "rollout/reward": e, "rollout/rules_satisfied": e / 2,
                "rollout/success_rate": e / 10} for e in range(5)]
    base = {"reward": 1, "rules_satisfied": 1, "success_rate": 0.1, "per_rule_pass_rate": [1, .5, .2]}
    final = {"reward": 3, "rules_satisfied": 2, "success_rate": 0.6, "per_rule_pass_rate": [1, 1, .7]}
    paths = save_figures(tmp_path, history, base, final)
    assert [p.name for p in paths] == ["training_curves.png", "success_rate.png",
                                       "rule_pass_rates.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def _scalars(tb_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_disabled_mode_writes_tensorboard(tmp_path):
    tr = Tracker(tmp_path, {}, mode="disabled")
    for e in range(3):
        tr.log({"kind": "epoch", "epoch": e, "rollout/reward": 0.5 * e, "note": "text",
                "per_rule": [1, 2], "x": math.nan}, step=10 + e)
    tr.log({"kind": "eval", "epoch": 2, "success_rate": 0.25})  # no step: the epoch
    tr.finish()
    assert tr.tb_writer is None
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    scalars = _scalars(tmp_path / "tensorboard")
    assert scalars["epoch/rollout/reward"] == [(10, 0.0), (11, 0.5), (12, 1.0)]
    assert scalars["eval/success_rate"] == [(2, 0.25)]
    assert not any(t.endswith(("note", "per_rule", "/x")) for t in scalars)  # numbers only
    assert [r["epoch"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [0, 1, 2, 2]  # JSONL kept


def test_tensorboard_when_wandb_missing_and_resume_purge(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    tr = Tracker(tmp_path, {}, mode="offline")
    for e in range(4):
        tr.log({"kind": "epoch", "epoch": e, "loss": float(e)}, step=e)
    tr.finish()
    # TensorBoard reads a run's event files in name order: creation second, host, pid, then a
    # per-process counter written without padding (so "...10" sorts before "...9" once a
    # process has opened ten writers, as the whole suite does). A resumed run is a later
    # process: start the second writer in a later second, as it would be.
    time.sleep(1.05 - time.time() % 1.0)
    # A resumed run redoes epochs 2..: purge_step hides what the first run wrote from there on.
    tr = Tracker(tmp_path, {}, mode="offline", purge_step=2)
    tr.log({"kind": "epoch", "epoch": 2, "loss": 20.0}, step=2)
    tr.finish()
    assert _scalars(tmp_path / "tensorboard")["epoch/loss"] == [(0, 0.0), (1, 1.0), (2, 20.0)]
    off = Tracker(tmp_path / "off", {}, mode="disabled", tensorboard=False)
    assert off.tb_writer is None and not (tmp_path / "off" / "tensorboard").exists()
