"""One optimizer step per batch with GRPO: the update scores the batch itself
(``gamerl.core.epoch.scores_in_update``). The step it takes, the KL numbers and the self-check
must be those of the path with a separate scoring pass, on the same episodes."""

import copy
import math

import torch

from gamerl.config import get_config
from gamerl.core.epoch import (collect, compute_advantages, epoch_seeds, make_optimizer,
                               ppo_update, scores_in_update)
from gamerl.core.evaluate import local_env_factory
from gamerl.models import PolicyWithValue, load_policy, load_reference


def grpo_cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, max_new_tokens=12,
                advantage_estimator="grpo", group_size=4, episodes_per_epoch=8,
                minibatch_size=8, micro_batch_size=4, ppo_epochs=1, kl_coef=0.05,
                top_k=20, top_p=0.9, lr=1e-3, warmstart=False, wandb_mode="disabled",
                progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def test_when_the_update_scores_the_batch(tiny_dir):
    cfg = grpo_cfg(tiny_dir)
    assert scores_in_update(cfg, 8)
    assert not scores_in_update(cfg, 9)  # two minibatches: the second needs pi_old
    assert not scores_in_update(cfg.replace(ppo_epochs=2), 8)
    assert not scores_in_update(cfg.replace(advantage_estimator="gae"), 8)


def test_deferred_scoring_takes_the_same_step(tiny_dir):
    cfg = grpo_cfg(tiny_dir)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    policy = PolicyWithValue(lm)
    reference = load_reference(lm)
    seeds = epoch_seeds(cfg, 0)
    torch.manual_seed(0)
    deferred = collect(policy, reference, tok, seeds, local_env_factory(cfg), cfg)
    assert deferred.scores_deferred and deferred.support is None
    # The same episodes through the scoring pass (as a 2-epoch config would score them).
    torch.manual_seed(0)
    scored = collect(policy, reference, tok, seeds, local_env_factory(cfg),
                     cfg.replace(ppo_epochs=2))
    assert not scored.scores_deferred
    assert torch.equal(scored.input_ids, deferred.input_ids)

    results = {}
    for name, batch in (("scored", scored), ("deferred", deferred)):
        pol = copy.deepcopy(policy)
        if batch.scores_deferred:
            batch.deferred_reference = reference
        torch.manual_seed(1)  # the same minibatch order
        adv = compute_advantages(batch, cfg)
        upd = ppo_update(pol, make_optimizer(pol, cfg), batch, cfg)
        results[name] = adv, upd, pol, batch
    (adv_s, upd_s, pol_s, b_s), (adv_d, upd_d, pol_d, b_d) = results["scored"], results["deferred"]
    assert upd_d["optimizer_steps"] == upd_s["optimizer_steps"] == 1
    torch.testing.assert_close(b_d.advantages, b_s.advantages)
    m = b_s.mask.bool()
    # the update's pass filled in pi_old and pi_ref: the scoring pass's numbers
    torch.testing.assert_close(b_d.old_logprobs[m], b_s.old_logprobs[m], atol=1e-5, rtol=0)
    torch.testing.assert_close(b_d.ref_logprobs[m], b_s.ref_logprobs[m], atol=1e-5, rtol=0)
    # ... and the statistics that need them, in the dict compute_advantages returned
    for key in ("kl_ref", "kl_ref_k3"):
        assert not math.isnan(adv_d[key])
        assert abs(adv_d[key] - adv_s[key]) < 1e-5, key
    assert upd_d["check/gen_vs_old_mismatch"] == 0.0
    assert abs(upd_d["check/gen_vs_old_mean_abs"] - adv_s["check/gen_vs_old_mean_abs"]) < 1e-5
    for key in ("policy_loss", "kl_ref_update", "entropy", "grad_norm"):
        assert abs(upd_d[key] - upd_s[key]) < 1e-4 * max(1.0, abs(upd_s[key])), key
    # the same step: every trained parameter lands in the same place, to 1% of the step. Adam's
    # first step is lr * g / (|g| + eps), about lr * sign(g), so a weight whose gradient is near
    # eps turns the two paths' float rounding into up to 5.4e-6 of a 1e-3 step (AMD EPYC, AVX2,
    # 2026-11-25; on the Intel Xeon CI had before, under 1e-6).
    for (name, a), b in zip(pol_s.named_parameters(), pol_d.parameters()):
        torch.testing.assert_close(b, a, atol=0.01 * cfg.lr, rtol=0, msg=name)
    assert any(not torch.equal(a, b) for a, b in zip(pol_s.parameters(), policy.parameters()))


def test_first_ratio_check_can_fail_when_scoring_is_deferred(tiny_dir, caplog):
    """With deferred scoring pi_old is the update pass itself, so the ratio-1 self-check must
    compare with the sampling-time log-probs: a batch whose recorded log-probs disagree with
    the weights is caught. Before the fix it compared a tensor with itself and passed
    (issue 22, defect 4)."""
    cfg = grpo_cfg(tiny_dir)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    policy = PolicyWithValue(lm)
    reference = load_reference(lm)
    torch.manual_seed(0)
    batch = collect(policy, reference, tok, epoch_seeds(cfg, 0), local_env_factory(cfg), cfg)
    assert batch.scores_deferred
    batch.deferred_reference = reference
    batch.gen_logprobs = batch.gen_logprobs - 0.5 * batch.mask  # as if another policy sampled
    compute_advantages(batch, cfg)
    upd = ppo_update(policy, make_optimizer(policy, cfg), batch, cfg)
    assert upd["check/first_ratio_mismatch"] == 1.0
    assert abs(upd["check/first_ratio_mean_abs"] - 0.5) < 1e-3
