"""``warmstart_all_layers``: the warm start trains every layer, PPO then only the top
``trainable_layers``. The warm start is the one a run with every layer trainable makes (same
weights, same cached marker); in a run the bottom moves in the warm start and not in PPO."""

from __future__ import annotations

import pytest
import torch

from gamerl.config import get_config
from gamerl.models import PolicyWithValue, lm_trunk, load_policy


def _cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12, warmstart=True,
                warmstart_steps=4, warmstart_examples=8, warmstart_batch_size=4,
                warmstart_lr=3e-3, warmstart_checkpoint_seconds=0, episodes_per_epoch=4,
                minibatch_size=4, ppo_epochs=1, eval_episodes=4, epochs=1,
                wandb_mode="disabled", progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def _bottom(lm) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in lm_trunk(lm).layers[0].parameters()])


def _top(lm) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in lm_trunk(lm).layers[-1].parameters()])


def test_the_warm_start_on_every_layer_is_the_all_layer_runs_own(tiny_dir, tmp_path):
    import gamerl.core.warmstart as ws

    def made(name, **kw):
        lm, tok = load_policy(str(tiny_dir), device="cpu")
        ws.warm_start(lm, tok, _cfg(tiny_dir, **kw), tmp_path / name)
        return lm

    base, _ = load_policy(str(tiny_dir), device="cpu")
    top_only = made("top", trainable_layers=1)
    every = made("every", trainable_layers=1, warmstart_all_layers=True)
    whole = made("whole", trainable_layers=None)
    assert torch.equal(_bottom(top_only), _bottom(base))  # the default: PPO's layers only
    assert not torch.equal(_bottom(every), _bottom(base))  # the option: the bottom learns too
    # the same warm start as a run that trains every layer throughout: same weights, and each
    # one's cached result serves the other
    for a, b in zip(every.parameters(), whole.parameters()):
        assert torch.equal(a, b)
    for name in ("every", "whole"):
        assert ws.cached_warm_start(_cfg(tiny_dir, trainable_layers=1, warmstart_all_layers=True),
                                    tmp_path / name) is not None
        assert ws.cached_warm_start(_cfg(tiny_dir, trainable_layers=None), tmp_path / name)
    # and not the top-only warm start's
    assert ws.cached_warm_start(_cfg(tiny_dir, trainable_layers=1, warmstart_all_layers=True),
                                tmp_path / "top") is None


def test_in_a_run_the_bottom_moves_in_the_warm_start_and_not_in_ppo(tiny_dir, tmp_path):
    from gamerl.core.trainer import Trainer

    cfg = _cfg(tiny_dir, trainable_layers=1, warmstart_all_layers=True)
    summary = Trainer(cfg, tmp_path / "run").train()
    assert summary["config"]["warmstart_all_layers"] is True
    base, _ = load_policy(str(tiny_dir), device="cpu")
    warm, _ = load_policy(str(tmp_path / "run" / "warmstart"), device="cpu")
    trained = PolicyWithValue.load(tmp_path / "run" / "last", device="cpu").lm
    assert not torch.equal(_bottom(warm), _bottom(base))
    assert torch.equal(_bottom(trained), _bottom(warm))  # frozen in PPO
    assert not torch.equal(_top(trained), _top(warm))  # PPO trained the top layer


def test_all_layers_without_a_warm_start_is_refused(tiny_dir):
    with pytest.raises(ValueError, match="warmstart_all_layers"):
        get_config("tiny", warmstart=False, warmstart_all_layers=True)
