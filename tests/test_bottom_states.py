"""The frozen bottom's output kept from the rollout (``gamerl.core.bottom_states``): it equals a
fresh pass over each episode's tokens, and scoring then runs only the top layers."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from dataclasses import replace

import pytest
import torch

import gamerl.core.forward as forward
from gamerl.config import get_config
from gamerl.core.bottom_states import batch_states, boundary_layer
from gamerl.core.epoch import collect, epoch_seeds
from gamerl.core.evaluate import local_env_factory
from gamerl.core.rollout import LMPolicy, RolloutConfig, episodes_to_batch, rollout
from gamerl.models import (PolicyWithValue, SplitTrunk, freeze_below_top_layers, load_policy,
                           load_reference)

N_TOP = 2


def _cfg(tiny_dir):
    # 3 turns of up to 12 tokens: the shared prompt prefix, the turn cache and finished rows
    # leaving the decoding batch all move the kept states
    return get_config("tiny", model=str(tiny_dir), num_rules=4, max_steps=3, max_new_tokens=12,
                      episodes_per_epoch=8, warmstart=False, wandb_mode="disabled",
                      progress=False, device="cpu", trainable_layers=N_TOP)


@pytest.mark.parametrize("drop_finished_rows", [True, False])
def test_the_rollout_keeps_what_a_fresh_bottom_pass_computes(tiny_dir, drop_finished_rows):
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = _cfg(tiny_dir)
    rcfg = replace(RolloutConfig.from_train_config(cfg), drop_finished_rows=drop_finished_rows)
    torch.manual_seed(0)
    episodes = rollout(LMPolicy(lm, tok, rcfg, bottom_states_layer=boundary_layer(lm, N_TOP)),
                       tok, epoch_seeds(cfg, 0), local_env_factory(cfg), rcfg)
    tb = episodes_to_batch(episodes, tok.pad_token_id)
    with torch.no_grad():
        fresh = SplitTrunk.of(lm, N_TOP).bottom_states(tb.input_ids, tb.attention_mask)
    assert max(len(ep.turns) for ep in episodes) >= 2  # the turn cache carried a turn
    for i, ep in enumerate(episodes):
        states, tokens = ep.bottom_states
        n = states.shape[0]
        assert tokens == ep.token_ids[:n]
        assert n >= int(tb.mask[i].nonzero()[-1])  # every scored position is there
        assert torch.allclose(states, fresh[i, :n], atol=1e-5)
    kept = batch_states(episodes, tb.input_ids, tb.attention_mask, tb.mask)
    assert kept is not None and kept.shape == fresh.shape


def test_scoring_runs_no_bottom_layer_when_the_rollout_kept_it(tiny_dir, monkeypatch):
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = _cfg(tiny_dir)
    ref = load_reference(lm)
    policy = PolicyWithValue(lm)
    freeze_below_top_layers(lm, N_TOP)
    policy.split = SplitTrunk.of(lm, N_TOP)
    bottoms = []
    plain = forward.trunk_hidden
    monkeypatch.setattr(forward, "trunk_hidden",
                        lambda trunk, *a, **k: bottoms.append(trunk) or plain(trunk, *a, **k))
    torch.manual_seed(0)
    batch = collect(policy, ref, tok, epoch_seeds(cfg, 0), local_env_factory(cfg), cfg)
    assert bottoms == []  # neither the policy's old pass nor the reference's ran the bottom
    assert all(ep.bottom_states is None for ep in batch.episodes)  # let go after scoring
    with torch.no_grad():
        fresh = policy.split.bottom_states(batch.input_ids, batch.attention_mask)
    m = batch.attention_mask.bool()
    scored = torch.zeros_like(m)  # the positions before each policy token
    scored[:, :-1] = batch.mask[:, 1:].bool()
    assert torch.allclose(batch.trunk_cache[scored], fresh[scored], atol=1e-5)


def test_a_row_that_lacks_a_scored_state_means_the_bottom_runs(tiny_dir):
    ids = torch.tensor([[1, 2, 3, 4, 5, 0]])
    am = torch.tensor([[1, 1, 1, 1, 1, 0]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 0]], dtype=torch.float)  # scored from positions 2, 3

    class Ep:
        context_exhausted = False
        bottom_states = None

    ep = Ep()
    ep.bottom_states = (torch.ones(4, 8), [1, 2, 3, 4])
    assert batch_states([ep], ids, am, mask)[0, :4].eq(1).all()
    ep.bottom_states = (torch.ones(3, 8), [1, 2, 3])  # position 3 missing
    assert batch_states([ep], ids, am, mask) is None
    ep.bottom_states = (torch.ones(4, 8), [1, 2, 9, 4])  # other tokens
    assert batch_states([ep], ids, am, mask) is None
    ep.bottom_states = (torch.ones(4, 8), [1, 2, 3, 4])
    ep.context_exhausted = True  # its last state is the value GAE bootstraps from
    assert batch_states([ep], ids, am, mask) is None
