"""Rejection-sampling fine-tuning (RFT) in the warm start (gamerl.core.warmstart): which of the
model's own episodes a round keeps, that the kept episodes are what the steps train on, and that
a warm start killed after a round's games were played continues without playing them again.
Every test runs the embedded tiny model for a few seconds."""
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json

import pytest
import torch

import gamerl.core.evaluate as evaluate_module
import gamerl.core.warmstart as ws
from gamerl.config import get_config
from gamerl.core.rollout import Episode, Turn
from gamerl.models import load_policy

from conftest import Killed, count_calls  # pytest (prepend import mode) puts tests/ on sys.path


def rft_cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                warmstart=True, warmstart_steps=4, warmstart_examples=8,
                warmstart_batch_size=2, warmstart_checkpoint_seconds=0,
                warmstart_rft_rounds=1, warmstart_rft_episodes=8, warmstart_rft_keep=0.25,
                warmstart_rft_steps=3, wandb_mode="disabled", progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def fake_episode(i: int, turn_rewards: list[float]) -> Episode:
    """An episode whose tokens name it (``[i, i, i]``, the middle one an answer)."""
    ep = Episode(seed=i, token_ids=[i, i, i], policy_mask=[0, 1, 0], gen_logprobs=[0.0] * 3,
                 rewards=[0.0] * 3, prompt_len=1)
    ep.turns = [Turn(answer="x", action="x", reward=r, success=False, n_tokens=1, last_token=1)
                for r in turn_rewards]
    return ep


def test_a_round_keeps_the_highest_returns_and_the_earlier_game_of_a_tie(tiny_dir, monkeypatch):
    # returns 1, 3, 3, 0, 2, 3, -1, 0 (a return is the sum of the turns' rewards)
    turns = [[1.0], [1.0, 2.0], [3.0], [0.0], [2.0], [0.5, 2.5], [-1.0], [0.0, 0.0]]
    monkeypatch.setattr(evaluate_module, "rollout",
                        lambda *a, **k: [fake_episode(i, t) for i, t in enumerate(turns)])
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    kept, stats = ws.rejection_sampled(lm, tok, rft_cfg(tiny_dir, warmstart_rft_keep=0.25), 0)
    assert [ids[0] for ids, _ in kept] == [1, 2]  # ceil(0.25 * 8) = 2: the first two 3s
    assert kept[0] == ([1, 1, 1], [0, 1, 0])  # the episode's own tokens and answer mask
    assert stats["kept"] == 2 and stats["kept_reward_min"] == 3.0
    assert stats["reward"] == pytest.approx(11.0 / 8)  # the whole sample's mean return
    kept, stats = ws.rejection_sampled(lm, tok, rft_cfg(tiny_dir, warmstart_rft_keep=0.3), 0)
    assert [ids[0] for ids, _ in kept] == [1, 2, 5]  # ceil(2.4) = 3; then 2 (game 4) is next
    assert stats["kept_reward_mean"] == pytest.approx(3.0)
    kept, _ = ws.rejection_sampled(lm, tok, rft_cfg(tiny_dir, warmstart_rft_keep=1.0), 0)
    assert [ids[0] for ids, _ in kept] == [1, 2, 5, 4, 0, 3, 7, 6]


def test_a_round_plays_the_models_own_games_reproducibly(tiny_dir, monkeypatch):
    played = []
    real = evaluate_module.rollout

    def recording(*a, **k):
        episodes = real(*a, **k)
        played.append(episodes)
        return episodes

    monkeypatch.setattr(evaluate_module, "rollout", recording)
    cfg = rft_cfg(tiny_dir)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    kept, stats = ws.rejection_sampled(lm, tok, cfg, 0)
    episodes = played[-1]
    assert len(episodes) == 8 and stats["episodes"] == 8 and stats["kept"] == 2
    best = sorted(episodes, key=lambda ep: -ep.total_reward)[:2]
    assert kept == [(ep.token_ids, ep.policy_mask) for ep in best]
    assert all(sum(mask) > 0 for _, mask in kept)  # the model's answers carry the loss
    # the held-out seeds are never played: training instances only
    assert all(cfg.train_seed_start <= ep.seed < cfg.train_seed_start + cfg.train_seed_count
               for ep in episodes)
    again, _ = ws.rejection_sampled(lm, tok, cfg, 0)
    assert again == kept  # same round, same games and samples
    lm.train()  # the warm start's steps train: a round gives the model back in training mode
    ws.rejection_sampled(lm, tok, cfg, 0)
    assert lm.training
    ws.rejection_sampled(lm, tok, cfg, 1)
    assert [ep.seed for ep in played[-1]] != [ep.seed for ep in episodes]  # a new draw


def test_the_rft_steps_train_on_the_kept_episodes_only(tiny_dir, tmp_path, monkeypatch):
    seen = []
    real = ws.sft_loss

    def recording(lm, batch, *a, **k):
        seen.append([ids for ids, _ in batch])
        return real(lm, batch, *a, **k)

    monkeypatch.setattr(ws, "sft_loss", recording)
    cfg = rft_cfg(tiny_dir)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    demos = [ids for ids, _ in ws.demonstrations(cfg, tok, seed=cfg.seed)]
    kept = [ids for ids, _ in ws.rejection_sampled(lm, tok, cfg, 0)[0]]  # before any step
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    torch.manual_seed(0)
    stats = ws.warm_start(lm, tok, cfg, tmp_path / "run" / "warmstart")
    assert len(seen) == 4 + 3 and stats["steps"] == 7
    assert all(ids in demos for batch in seen[:4] for ids in batch)
    # the round was played by the model after its 4 demonstration steps: other samples than
    # the untrained model's, but from the same games, and every step trains on them alone
    rft = [ids for batch in seen[4:] for ids in batch]
    assert rft and not any(ids in demos for ids in rft)
    assert len({tuple(ids) for ids in rft}) <= 2
    (round_stats,) = stats["rft"]
    assert round_stats["round"] == 1 and round_stats["kept"] == 2
    assert {"loss_first", "loss_last", "kept_reward_min", "reward"} <= set(round_stats)
    marker = json.loads((tmp_path / "run" / "warmstart" / ws.MARKER).read_text())
    assert marker["settings"]["warmstart_rft_rounds"] == 1
    assert kept  # (the untrained model's round, for the record: it kept episodes too)


def test_a_warm_start_killed_after_a_round_was_played_does_not_play_it_again(
        tiny_dir, tmp_path, monkeypatch):
    cfg = rft_cfg(tiny_dir)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    straight = ws.warm_start(lm, tok, cfg, tmp_path / "straight" / "warmstart")

    real_loss = ws.sft_loss
    # killed at the round's second step: its games were played and saved
    count_calls(monkeypatch, ws, "sft_loss", kill_at=6)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    with pytest.raises(Killed):
        ws.warm_start(lm, tok, cfg, tmp_path / "killed" / "warmstart")
    monkeypatch.setattr(ws, "sft_loss", real_loss)
    rounds = count_calls(monkeypatch, ws, "rejection_sampled")
    torch.manual_seed(0)
    lm2, tok = load_policy(str(tiny_dir), device="cpu")
    resumed = ws.warm_start(lm2, tok, cfg, tmp_path / "killed" / "warmstart")
    assert rounds["n"] == 0  # the round's games came from the checkpoint
    assert resumed["rft"][0]["kept_reward_min"] == straight["rft"][0]["kept_reward_min"]
    assert resumed["rft"][0]["loss_last"] == pytest.approx(straight["rft"][0]["loss_last"],
                                                           rel=1e-5)
    a = load_policy(str(tmp_path / "straight" / "warmstart"), device="cpu")[0]
    b = load_policy(str(tmp_path / "killed" / "warmstart"), device="cpu")[0]
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name


# (setting, another value): each changes what the warm start trains on: how later turns render
# (feedback, the context budget) and which of its own games an RFT round keeps (the rewards)
CHANGES_THE_DATA = [("feedback", "full"), ("max_context_tokens", 300), ("reward_per_rule", 2.0),
                    ("length_penalty", 0.05), ("episode_bonus", 3.0), ("bonus_min_rules", 2),
                    ("reward_mode", "absolute"), ("warmstart_rft_keep", 0.5), ("top_p", 0.9)]


@pytest.fixture(scope="module")
def rft_warm_start(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rft_key") / "warmstart"
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    ws.warm_start(lm, tok, rft_cfg(tiny_dir), out)
    return out


@pytest.mark.parametrize("name,value", CHANGES_THE_DATA)
def test_a_setting_the_warm_start_read_misses_its_cache(tiny_dir, rft_warm_start, name, value):
    """The cache is keyed on every setting the warm start read (derived from what ran, not a
    list kept by hand): before, feedback and the context budget counted only with RFT rounds
    on, and the reward settings never, so a changed setting reused a stale warm start."""
    assert ws.cached_warm_start(rft_cfg(tiny_dir), rft_warm_start) is not None
    assert getattr(rft_cfg(tiny_dir), name) != value
    assert ws.cached_warm_start(rft_cfg(tiny_dir, **{name: value}), rft_warm_start) is None


def test_without_rounds_the_feedback_still_keys_the_cache(tiny_dir, tmp_path):
    """The demonstrations' later turns render the feedback within the context budget: a
    warm start without RFT rounds depends on both too (before, only with rounds)."""
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    ws.warm_start(lm, tok, rft_cfg(tiny_dir, warmstart_rft_rounds=0), tmp_path / "ws")
    plain = rft_cfg(tiny_dir, warmstart_rft_rounds=0)
    assert ws.cached_warm_start(plain, tmp_path / "ws") is not None
    for name, value in (("feedback", "full"), ("max_context_tokens", 300)):
        assert ws.cached_warm_start(plain.replace(**{name: value}), tmp_path / "ws") is None


def test_settings_the_warm_start_never_read_keep_its_cache(tiny_dir, rft_warm_start):
    """PPO's own settings (more epochs on resume, another learning rate) and how the run is
    shown keep the warm start."""
    cfg = rft_cfg(tiny_dir, epochs=99, lr=1e-3, clip_range=0.3, progress=True,
                  warmstart_checkpoint_seconds=60)
    assert ws.cached_warm_start(cfg, rft_warm_start) is not None


@pytest.mark.parametrize("bad", [dict(warmstart_rft_keep=0.0), dict(warmstart_rft_keep=1.5),
                                 dict(warmstart_rft_rounds=-1), dict(warmstart_rft_steps=0),
                                 dict(warmstart_rft_episodes=0)])
def test_bad_rft_settings_are_refused_with_their_name(tiny_dir, bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        rft_cfg(tiny_dir, **bad)
