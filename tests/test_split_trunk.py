"""Training only the top layers (``trainable_layers``): the frozen bottom runs once per epoch and
its cached output feeds every update pass; results equal the full model's."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch

from gamerl.config import get_config
from gamerl.core.evaluate import local_env_factory
from gamerl.models import (PolicyWithValue, SplitTrunk, freeze_below_top_layers, lm_trunk,
                           load_policy, load_reference, positions_from_mask)
from gamerl.core.scoring import Sampling
from gamerl.core.epoch import (collect, compute_advantages, epoch_seeds, make_optimizer,
                               ppo_update)
from gamerl.core.forward import forward_policy


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_policy(str(tiny_dir), device="cpu")


def left_padded_batch(tok):
    ids = torch.tensor([[tok.pad_token_id] * 3 + list(range(10, 17)), list(range(20, 30))])
    am = (ids != tok.pad_token_id).long()
    return ids, am


@pytest.mark.parametrize("n_top", [1, 2, 4])
def test_bottom_then_top_equals_the_whole_trunk(tiny, n_top):
    lm, tok = tiny
    ids, am = left_padded_batch(tok)
    split = SplitTrunk.of(lm, n_top)
    with torch.no_grad():
        whole = lm_trunk(lm)(input_ids=ids, attention_mask=am,
                             position_ids=positions_from_mask(am)).last_hidden_state
        parts = split.top_states(split.bottom_states(ids, am), am)
    m = am.bool()
    assert torch.allclose(parts[m], whole[m], atol=1e-5)
    assert len(lm_trunk(lm).layers) == 4  # the model itself is untouched by the views


def test_trainer_path_trains_only_the_top_and_matches_the_full_pass(tiny_dir):
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = get_config("tiny", model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                     episodes_per_epoch=8, minibatch_size=4, ppo_epochs=2, warmstart=False,
                     wandb_mode="disabled", progress=False, device="cpu", trainable_layers=2)
    ref = load_reference(lm)
    policy = PolicyWithValue(lm)
    trainable = freeze_below_top_layers(lm, 2)
    policy.split = SplitTrunk.of(lm, 2)
    assert 0 < trainable < sum(p.numel() for p in lm.parameters())
    torch.manual_seed(0)
    batch = collect(policy, ref, tok, epoch_seeds(cfg, 0), local_env_factory(cfg), cfg)
    assert batch.trunk_cache is not None and batch.trunk_cache.shape[:2] == batch.mask.shape
    # the cached path's old log-probs are the full model's
    with torch.no_grad():
        full = forward_policy(PolicyWithValue(lm, policy.value_head), batch.input_ids,
                              batch.attention_mask, Sampling.from_config(cfg), mask=batch.mask,
                              support=batch.support)
    m = batch.mask.bool()
    assert torch.allclose(full.logprobs[m], batch.old_logprobs[m], atol=1e-5)
    stats = compute_advantages(batch, cfg)
    assert stats["check/gen_vs_old_mismatch"] == 0
    frozen = {n: p.detach().clone() for n, p in lm.named_parameters() if not p.requires_grad}
    top = {n: p.detach().clone() for n, p in lm.named_parameters() if p.requires_grad}
    upd = ppo_update(policy, make_optimizer(policy, cfg), batch, cfg)
    assert upd["check/first_ratio_max_abs"] < 1e-5 and upd["optimizer_steps"] == 4
    assert all(torch.equal(p, frozen[n]) for n, p in lm.named_parameters() if n in frozen)
    assert any(not torch.equal(p, top[n]) for n, p in lm.named_parameters() if n in top)


def test_warm_start_runs_the_frozen_bottom_once_per_demonstration(tiny_dir, tmp_path):
    """The warm start with ``trainable_layers``: every demonstration's frozen-bottom output is
    computed once, ahead (``warmstart.frozen_bottoms``), and each step runs only the top layers;
    its loss is the one a step that ran the whole model computes."""
    import gamerl.core.warmstart as ws

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    cfg = get_config("tiny", model=str(tiny_dir), num_rules=4, max_steps=2, warmstart=True,
                     warmstart_steps=6, warmstart_examples=8, warmstart_batch_size=4,
                     warmstart_checkpoint_seconds=0, wandb_mode="disabled", progress=False,
                     device="cpu", trainable_layers=2)
    layers = lm_trunk(lm).layers
    calls = {"bottom": 0, "top": 0}
    hooks = [layers[0].register_forward_hook(lambda *a: calls.__setitem__("bottom", calls["bottom"] + 1)),
             layers[-1].register_forward_hook(lambda *a: calls.__setitem__("top", calls["top"] + 1))]
    try:
        ws.warm_start(lm, tok, cfg, tmp_path / "warmstart")
    finally:
        for h in hooks:
            h.remove()
    assert calls["top"] == 6  # one top pass per step
    assert calls["bottom"] <= 2  # 8 demonstrations in one batch: the shared prefix, the rest
    # the losses agree: cached bottoms, the bottom run per step, the whole model
    examples = ws.demonstrations(cfg, tok, seed=1)[:3]
    split = SplitTrunk.of(lm, 2)
    bottoms = ws.frozen_bottoms(lm, split, examples, tok.pad_token_id)
    assert [b.shape[0] for b in bottoms] == [len(ids) for ids, _ in examples]
    with torch.no_grad():
        cached = ws.sft_loss(lm, examples, tok.pad_token_id, split, bottoms)
        per_step = ws.sft_loss(lm, examples, tok.pad_token_id, split)
        whole = ws.sft_loss(lm, examples, tok.pad_token_id)
    assert torch.allclose(cached, whole, atol=1e-5) and torch.allclose(per_step, whole, atol=1e-5)


def test_warm_start_bottoms_are_not_kept_past_the_memory_cap(tiny_dir, monkeypatch):
    import gamerl.core.warmstart as ws

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    examples = [([5] * 40, [0] * 30 + [1] * 10)] * 4
    monkeypatch.setattr(ws, "BOTTOM_CACHE_BYTES", 4 * 40 * lm.config.hidden_size * 4 - 1)
    assert ws.frozen_bottoms(lm, SplitTrunk.of(lm, 1), examples, tok.pad_token_id) is None
    monkeypatch.setattr(ws, "BOTTOM_CACHE_BYTES", 4 * 40 * lm.config.hidden_size * 4)
    assert len(ws.frozen_bottoms(lm, SplitTrunk.of(lm, 1), examples, tok.pad_token_id)) == 4
