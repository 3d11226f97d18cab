"""Tests for gamerl/core/ppo.py against hand-computed numbers (CPU, fast).

Expected values are written out as literal arithmetic in comments, never produced by a
second implementation of the same formula.
"""

import math

import pytest
import torch

from gamerl.core.ppo import (
    PolicyLossOutput,
    all_finite,
    compute_gae,
    compute_grpo_advantages,
    compute_turn_gae,
    entropy_from_logits,
    explained_variance,
    kl_penalty,
    logprobs_from_logits,
    masked_mean,
    masked_var,
    masked_whiten,
    ppo_policy_loss,
    ppo_value_loss,
    turn_ends,
)

F64 = torch.float64


def t(x, dtype=F64):
    return torch.tensor(x, dtype=dtype)


def close(actual, expected, atol=1e-6):
    expected = torch.as_tensor(expected, dtype=actual.dtype)
    assert torch.allclose(actual, expected, atol=atol, rtol=0), f"\n{actual}\n!=\n{expected}"


# ======================================================================================
# masked statistics
# ======================================================================================


def test_masked_mean_all_and_per_row():
    x = t([[1.0, 2.0, 3.0, 100.0], [4.0, 6.0, 50.0, 50.0], [9.0, 9.0, 9.0, 9.0]])
    mask = t([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    # (1 + 2 + 3 + 4 + 6) / 5 = 16 / 5
    close(masked_mean(x, mask), 3.2)
    # row 0: 6/3 = 2; row 1: 10/2 = 5; row 2: empty -> 0 (documented)
    close(masked_mean(x, mask, dim=-1), [2.0, 5.0, 0.0])


def test_masked_mean_ignores_nan_in_masked_out_positions():
    x = t([[1.0, float("nan"), float("inf")]])
    mask = t([[1, 0, 0]])
    close(masked_mean(x, mask), 1.0)


def test_masked_var_biased_and_unbiased():
    x = t([[1.0, 2.0, 3.0, 1000.0]])
    mask = t([[1, 1, 1, 0]])
    # mean 2; squared deviations 1 + 0 + 1 = 2; biased 2/3, unbiased 2/2 = 1
    close(masked_var(x, mask, unbiased=False), 2.0 / 3.0)
    close(masked_var(x, mask, unbiased=True), 1.0)


def test_masked_var_raises_when_undefined():
    x = t([[1.0, 2.0]])
    with pytest.raises(ValueError):
        masked_var(x, t([[0, 0]]))
    with pytest.raises(ValueError):
        masked_var(x, t([[1, 0]]), unbiased=True)
    close(masked_var(x, t([[1, 0]]), unbiased=False), 0.0)


def test_masked_whiten_mean0_std1_and_zero_outside_mask():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 9, generator=g, dtype=F64) * 3.0 + 5.0
    mask = (torch.rand(4, 9, generator=g) > 0.4).to(F64)
    mask[0, :3] = 1.0  # make sure there are enough entries
    x[mask == 0] = float("nan")  # garbage outside the mask must not leak
    w = masked_whiten(x, mask)
    sel = w[mask.bool()]
    close(sel.mean(), 0.0, atol=1e-9)
    close(sel.std(unbiased=True), 1.0, atol=1e-6)  # unbiased std, like masked_var default
    assert (w[~mask.bool()] == 0).all()  # documented: masked-out entries are set to 0


def test_masked_whiten_no_shift_keeps_mean():
    x = t([[1.0, 2.0, 3.0, 7.0]])
    mask = t([[1, 1, 1, 0]])
    w = masked_whiten(x, mask, shift_mean=False)
    # mean 2, unbiased var 1 -> (x - 2) / 1 + 2 = x on masked entries
    close(w, [[1.0, 2.0, 3.0, 0.0]], atol=1e-6)


# ======================================================================================
# GAE
# ======================================================================================


def test_gae_hand_computed_single_and_multi_turn():
    gamma, lam = 0.9, 0.8  # gamma * lam = 0.72
    # row 0: one policy turn (tokens 0-3), padding tail (4-5).
    # row 1: turn 1 = tokens 0-1, environment tokens 2-3, turn 2 = token 4, padding 5.
    mask = t([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 1, 0]])
    rewards = t([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0, 1.0, 0.0]])
    # values at mask-0 positions are garbage (9.0 / 7.0): they must not be used.
    values = t([[0.5, 0.6, 0.7, 0.8, 9.0, 9.0], [0.2, 0.4, 7.0, 7.0, 0.6, 7.0]])

    adv, ret = compute_gae(rewards, values, mask, gamma=gamma, lam=lam)

    # Row 0 (next value after the last policy token is 0):
    #   t=3: delta = 1 + 0.9*0   - 0.8 = 0.2 ;  A3 = 0.2
    #   t=2: delta = 0 + 0.9*0.8 - 0.7 = 0.02;  A2 = 0.02 + 0.72*0.2     = 0.164
    #   t=1: delta = 0 + 0.9*0.7 - 0.6 = 0.03;  A1 = 0.03 + 0.72*0.164   = 0.14808
    #   t=0: delta = 0 + 0.9*0.6 - 0.5 = 0.04;  A0 = 0.04 + 0.72*0.14808 = 0.1466176
    #   returns = A + V: 0.6466176, 0.74808, 0.864, 1.0
    # Row 1 (tokens 2-3 skipped; token 1 bootstraps from V[4] = 0.6 with no extra discount):
    #   t=4: delta = 1.0 + 0.9*0   - 0.6 = 0.4 ;  A4 = 0.4
    #   t=1: delta = 0.5 + 0.9*0.6 - 0.4 = 0.64;  A1 = 0.64 + 0.72*0.4   = 0.928
    #   t=0: delta = 0   + 0.9*0.4 - 0.2 = 0.16;  A0 = 0.16 + 0.72*0.928 = 0.82816
    #   returns = A + V: 1.02816, 1.328, -, -, 1.0
    # mask-0 positions are 0 in both outputs (documented).
    close(adv, [[0.1466176, 0.14808, 0.164, 0.2, 0.0, 0.0], [0.82816, 0.928, 0.0, 0.0, 0.4, 0.0]])
    close(ret, [[0.6466176, 0.74808, 0.864, 1.0, 0.0, 0.0], [1.02816, 1.328, 0.0, 0.0, 1.0, 0.0]])


def test_gae_gamma_lam_one_zero_values_is_reward_to_go():
    mask = t([[1, 1, 0, 1, 1, 0]])
    rewards = t([[0.0, 2.0, 0.0, 0.0, 3.0, 0.0]])
    values = torch.zeros_like(rewards)
    adv, ret = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    # reward-to-go over policy tokens: t0: 2+3, t1: 2+3, t3: 3, t4: 3
    close(adv, [[5.0, 5.0, 0.0, 3.0, 3.0, 0.0]])
    close(ret, [[5.0, 5.0, 0.0, 3.0, 3.0, 0.0]])


def test_gae_discount_counts_policy_tokens_only():
    mask = t([[1, 1, 0, 1, 1, 0]])
    rewards = t([[0.0, 2.0, 0.0, 0.0, 3.0, 0.0]])
    values = torch.zeros_like(rewards)
    adv, _ = compute_gae(rewards, values, mask, gamma=0.5, lam=1.0)
    # t4: 3; t3: 0.5*3 = 1.5; t1: 2 + 0.5*1.5 = 2.75 (the gap costs no discount);
    # t0: 0.5*2.75 = 1.375
    close(adv, [[1.375, 2.75, 0.0, 1.5, 3.0, 0.0]])


def test_gae_lambda_zero_is_one_step_td():
    mask = t([[1, 0, 1, 1, 0]])
    rewards = t([[0.0, 0.0, 0.5, 1.0, 0.0]])
    values = t([[1.0, 123.0, 2.0, 3.0, 123.0]])
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lam=0.0)
    # t3: 1.0 + 0.9*0   - 3.0 = -2.0
    # t2: 0.5 + 0.9*3.0 - 2.0 =  1.2
    # t0: 0   + 0.9*2.0 - 1.0 =  0.8   (bootstraps from t2, across the gap)
    close(adv, [[0.8, 0.0, 1.2, -2.0, 0.0]])
    # returns = A + V: 1.8, 3.2, 1.0
    close(ret, [[1.8, 0.0, 3.2, 1.0, 0.0]])


def test_gae_gaps_are_equivalent_to_removing_the_gap_tokens():
    g = torch.Generator().manual_seed(1)
    n = 7
    rew_c = torch.randn(1, n, generator=g, dtype=F64)
    val_c = torch.randn(1, n, generator=g, dtype=F64)
    adv_c, ret_c = compute_gae(rew_c, val_c, torch.ones(1, n, dtype=F64), gamma=0.95, lam=0.9)

    # same policy tokens with a prompt token in front, 2- and 3-token environment gaps and
    # padding at the end; garbage values in the gaps
    layout = [0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0]
    mask = t([layout])
    policy_pos = [i for i, m in enumerate(layout) if m]
    rewards = torch.zeros(1, len(layout), dtype=F64)
    values = torch.full((1, len(layout)), 55.0, dtype=F64)
    rewards[0, policy_pos] = rew_c[0]
    values[0, policy_pos] = val_c[0]
    adv, ret = compute_gae(rewards, values, mask, gamma=0.95, lam=0.9)

    close(adv[0, policy_pos], adv_c[0], atol=1e-12)
    close(ret[0, policy_pos], ret_c[0], atol=1e-12)
    assert (adv[mask == 0] == 0).all() and (ret[mask == 0] == 0).all()


def test_gae_rows_are_independent():
    g = torch.Generator().manual_seed(2)
    rewards = torch.randn(3, 5, generator=g, dtype=F64)
    values = torch.randn(3, 5, generator=g, dtype=F64)
    mask = t([[1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [0, 1, 1, 1, 1]])
    rewards = rewards * mask
    adv, _ = compute_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    for i in range(3):
        adv_i, _ = compute_gae(rewards[i : i + 1], values[i : i + 1], mask[i : i + 1], 0.9, 0.8)
        close(adv[i], adv_i[0], atol=1e-12)


def test_gae_no_grad_bool_mask_and_garbage_values():
    mask = torch.tensor([[True, True, False]])
    rewards = torch.tensor([[0.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.5, float("nan")]], requires_grad=True)
    adv, ret = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    assert not adv.requires_grad and not ret.requires_grad
    assert adv.dtype == torch.float32
    # t1: 1 - 0.5 = 0.5; t0: 0 + 0.5 - 0.5 + 0.5 = 0.5
    close(adv, [[0.5, 0.5, 0.0]])
    close(ret, [[1.0, 1.0, 0.0]])


def test_gae_rejects_reward_on_environment_token():
    mask = t([[1, 0, 1]])
    rewards = t([[0.0, 1.0, 0.0]])
    with pytest.raises(ValueError):
        compute_gae(rewards, torch.zeros_like(rewards), mask)


def test_gae_does_not_whiten():
    mask = t([[1, 1]])
    adv, _ = compute_gae(t([[0.0, 10.0]]), t([[0.0, 0.0]]), mask, gamma=1.0, lam=1.0)
    close(adv, [[10.0, 10.0]])  # whitened would be [0, 0]


# ----------------------------------------------------------------------------- turn-level GAE


def test_turn_ends_marks_the_last_token_of_each_answer():
    mask = t([[0, 1, 1, 1, 0, 0, 1, 1, 0], [1, 0, 1, 0, 0, 0, 0, 0, 1]])
    assert turn_ends(mask).tolist() == [[False, False, False, True, False, False, False, True, False],
                                        [True, False, True, False, False, False, False, False, True]]


def test_turn_gae_hand_computed():
    gamma, lam = 0.9, 0.8  # gamma * lam = 0.72, applied between turns only
    # turn 1 = tokens 0-2 (reward 1.0 on token 2), environment 3-4, turn 2 = tokens 5-6
    # (reward 2.0 on token 6), padding 7; garbage values (9.0) off the mask
    mask = t([[1, 1, 1, 0, 0, 1, 1, 0]])
    rewards = t([[0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0]])
    values = t([[0.5, 0.6, 0.7, 9.0, 9.0, 1.0, 1.5, 9.0]])
    adv, ret = compute_turn_gae(rewards, values, mask, gamma=gamma, lam=lam)
    # t6 (end of the last turn): delta = 2 + 0.9*0 - 1.5 = 0.5;         A6 = 0.5
    # t5 (inside, factors 1):    delta = 0 + 1.0*1.5 - 1.0 = 0.5;       A5 = 0.5 + 0.5 = 1.0
    # t2 (end of turn 1):        delta = 1 + 0.9*1.0 - 0.7 = 1.2;       A2 = 1.2 + 0.72*1.0 = 1.92
    # t1 (inside):               delta = 0 + 0.7 - 0.6 = 0.1;           A1 = 0.1 + 1.92 = 2.02
    # t0 (inside):               delta = 0 + 0.6 - 0.5 = 0.1;           A0 = 0.1 + 2.02 = 2.12
    close(adv, [[2.12, 2.02, 1.92, 0.0, 0.0, 1.0, 0.5, 0.0]])
    # returns = A + V: every token of a turn has the same target, r + gamma V' + gamma lam A'
    # (turn 1: 1 + 0.9*1.0 + 0.72*1.0 = 2.62; turn 2: 2)
    close(ret, [[2.62, 2.62, 2.62, 0.0, 0.0, 2.0, 2.0, 0.0]])


def test_turn_gae_gives_every_token_of_an_answer_the_same_credit():
    # A 40-token password, then feedback, then a second 40-token answer; critic at 0.
    n = 40
    mask = torch.cat([torch.ones(n), torch.zeros(5), torch.ones(n)])[None].to(F64)
    rewards = torch.zeros_like(mask)
    rewards[0, n - 1], rewards[0, -1] = 1.0, 1.0
    values = torch.zeros_like(mask)
    adv, _ = compute_turn_gae(rewards, values, mask, gamma=0.99, lam=0.95)
    # turn 2: 1; turn 1: 1 + 0.99 * 0.95 * 1 = 1.9405, on all 40 tokens alike
    close(adv[0, :n], torch.full((n,), 1.9405, dtype=F64), atol=1e-12)
    close(adv[0, -n:], torch.ones(n, dtype=F64), atol=1e-12)
    # token-level GAE decays inside the answer: (0.99 * 0.95)^39 = 0.0915 of the last token's
    token_adv, _ = compute_gae(rewards, values, mask, gamma=0.99, lam=0.95)
    assert token_adv[0, -n].item() / token_adv[0, -1].item() == pytest.approx(0.9405 ** 39, rel=1e-9)
    assert 0.09 < 0.9405 ** 39 < 0.092


def test_turn_gae_equals_token_gae_when_every_turn_is_one_token():
    g = torch.Generator().manual_seed(9)
    mask = t([[1, 0, 1, 0, 0, 1, 0, 1]])
    rewards = torch.randn(1, 8, generator=g, dtype=F64) * mask
    values = torch.randn(1, 8, generator=g, dtype=F64)
    a1, r1 = compute_turn_gae(rewards, values, mask, 0.9, 0.7)
    a2, r2 = compute_gae(rewards, values, mask, 0.9, 0.7)
    close(a1, a2, atol=1e-12)
    close(r1, r2, atol=1e-12)


# ======================================================================================
# GRPO
# ======================================================================================


def test_grpo_group_normalisation():
    scores = t([1.0, 0.0, 1.0, 0.0, 5.0])
    groups = torch.tensor([7, 7, 7, 7, 2])  # ids need not be contiguous or sorted
    mask = torch.ones(5, 3, dtype=F64)
    mask[0, 2] = 0.0
    adv = compute_grpo_advantages(scores, groups, mask, eps=0.0)
    # group 7: mean 0.5; unbiased std = sqrt((4 * 0.25) / 3) = sqrt(1/3) = 0.5773502692
    #          -> +-0.5 / 0.5773502692 = +-0.8660254038 on every mask-1 token, 0 on mask-0
    # group 2: size 1 -> 0
    a = 0.8660254038
    close(adv, [[a, a, 0.0], [-a, -a, -a], [a, a, a], [-a, -a, -a], [0.0, 0.0, 0.0]])


def test_grpo_identical_scores_and_eps():
    scores = t([3.0, 3.0, 1.0, 2.0])
    groups = [0, 0, 1, 1]
    mask = torch.ones(4, 2, dtype=F64)
    adv = compute_grpo_advantages(scores, groups, mask, eps=1e-6)
    # group 0: (3 - 3) / (0 + 1e-6) = 0
    # group 1: mean 1.5, unbiased std = sqrt((0.25 + 0.25) / 1) = 0.7071067812
    #          -> -+0.5 / (0.7071067812 + 1e-6)
    b = 0.5 / (0.7071067812 + 1e-6)
    close(adv, [[0.0, 0.0], [0.0, 0.0], [-b, -b], [b, b]])


def test_grpo_without_std_normalisation():
    scores = t([1.0, 0.0, 4.0])
    adv = compute_grpo_advantages(scores, [0, 0, 1], torch.ones(3, 1, dtype=F64), normalize_std=False)
    # group 0 mean 0.5 -> +0.5, -0.5; group 1 has one member -> 0
    close(adv, [[0.5], [-0.5], [0.0]])


def test_grpo_zero_on_masked_tokens_and_int_scores():
    mask = torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]])
    adv = compute_grpo_advantages(torch.tensor([2, 0]), torch.tensor([1, 1]), mask)
    assert adv.dtype == torch.float32
    # mean 1, unbiased std sqrt(2) = 1.41421356 -> +-1/1.41421456 (with eps 1e-6)
    c = 1.0 / (1.41421356 + 1e-6)
    close(adv, [[0.0, c, c, 0.0], [0.0, -c, 0.0, 0.0]], atol=1e-5)


# ======================================================================================
# KL estimators
# ======================================================================================


def test_kl_hand_numbers():
    logp = t([[-1.0, -2.0]])
    ref = t([[-1.5, -1.0]])
    # k1 = logp - ref
    close(kl_penalty(logp, ref, "k1"), [[0.5, -1.0]])
    # k2 = 0.5 * (logp - ref)^2
    close(kl_penalty(logp, ref, "k2"), [[0.125, 0.5]])
    # k3 with x = ref - logp = [-0.5, 1.0]:
    #   exp(-0.5) + 0.5 - 1 = 0.6065306597 - 0.5 = 0.1065306597
    #   exp(1.0)  - 1   - 1 = 2.7182818285 - 2   = 0.7182818285
    close(kl_penalty(logp, ref, "k3"), [[0.1065306597, 0.7182818285]], atol=1e-9)
    close(kl_penalty(logp, ref, "low_var_kl"), [[0.1065306597, 0.7182818285]], atol=1e-9)


def test_k3_nonnegative_zero_at_equality_and_clamped():
    g = torch.Generator().manual_seed(3)
    logp = torch.randn(64, 32, generator=g) * 3
    ref = torch.randn(64, 32, generator=g) * 3
    k3 = kl_penalty(logp, ref, "k3")
    assert (k3 >= 0).all()
    close(kl_penalty(logp, logp, "k3"), torch.zeros_like(logp))
    # ref >> logp: unclamped would be exp(1000) = inf; clamped to 10 (documented)
    big = kl_penalty(t([[-1000.0]]), t([[0.0]]), "k3")
    assert torch.isfinite(big).all() and big.item() == pytest.approx(10.0)


def test_k1_and_k3_are_unbiased_estimates_of_kl():
    p = torch.softmax(t([0.0, 1.0, -1.0, 0.5]), -1)
    q = torch.softmax(t([0.3, 0.2, -0.5, 1.0]), -1)
    true_kl = (p * (p.log() - q.log())).sum()
    g = torch.Generator().manual_seed(4)
    samples = torch.multinomial(p, 200_000, replacement=True, generator=g)
    logp, ref = p.log()[samples][None], q.log()[samples][None]
    assert kl_penalty(logp, ref, "k1").mean().item() == pytest.approx(true_kl.item(), abs=5e-3)
    assert kl_penalty(logp, ref, "k3").mean().item() == pytest.approx(true_kl.item(), abs=5e-3)


def test_kl_loss_gradients_k1_zero_k2_reverse_k3_forward():
    """The expected gradient of each estimator as a LOSS (tokens sampled from pi, the sampling
    weights held fixed as in PPO): k1's is exactly 0, so a KL loss with k1 pulls nowhere;
    k2's is the gradient of KL(pi || ref); k3's that of KL(ref || pi)."""
    theta = t([0.3, -1.2, 0.8, 0.0, 2.0]).requires_grad_(True)
    ref = torch.log_softmax(t([1.0, 0.0, -0.5, 0.2, 0.4]), -1)

    def expected_grad(kind):
        logp = torch.log_softmax(theta, -1)
        weights = logp.exp().detach()  # E over a ~ pi
        (g,) = torch.autograd.grad((weights * kl_penalty(logp, ref, kind)).sum(), theta)
        return g

    def grad_of(f):
        (g,) = torch.autograd.grad(f(torch.log_softmax(theta, -1)), theta)
        return g

    close(expected_grad("k1"), torch.zeros(5), atol=1e-12)
    reverse = grad_of(lambda lp: (lp.exp() * (lp - ref)).sum())  # KL(pi || ref)
    forward = grad_of(lambda lp: (ref.exp() * (ref - lp)).sum())  # KL(ref || pi)
    close(expected_grad("k2"), reverse, atol=1e-12)
    close(expected_grad("k3"), forward, atol=1e-12)
    assert reverse.abs().max() > 0.05 and forward.abs().max() > 0.05


def test_kl_unknown_kind():
    with pytest.raises(ValueError):
        kl_penalty(t([[0.0]]), t([[0.0]]), "k4")


# ======================================================================================
# policy loss
# ======================================================================================


def test_policy_loss_ratio_one_is_minus_mean_advantage():
    g = torch.Generator().manual_seed(5)
    old = -torch.rand(3, 6, generator=g, dtype=F64)
    logp = old.clone().requires_grad_(True)
    adv = torch.randn(3, 6, generator=g, dtype=F64)
    mask = t([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 0]])
    out = ppo_policy_loss(logp, old, adv, mask)
    assert isinstance(out, PolicyLossOutput)
    close(out.loss, -adv[mask.bool()].mean(), atol=1e-12)
    close(out.clip_fraction, 0.0)
    close(out.approx_kl, 0.0)
    close(out.ratio_mean, 1.0)


def _clip_case():
    # tokens: a, b, c, d, e, f(masked out)
    #   a: A=+1, r=1.5 -> max(-1.5, -1.2) = -1.2  clipped (gradient off)
    #   b: A=+1, r=0.5 -> max(-0.5, -0.8) = -0.5  unclipped (low ratio, positive A: keep grad)
    #   c: A=-1, r=1.5 -> max( 1.5,  1.2) =  1.5  unclipped (high ratio, negative A: keep grad)
    #   d: A=-1, r=0.5 -> max( 0.5,  0.8) =  0.8  clipped
    #   e: A=+2, r=1.1 -> max(-2.2, -2.2) = -2.2  inside the range
    #   f: masked out, garbage numbers
    ratios = t([1.5, 0.5, 1.5, 0.5, 1.1, 3.0])
    adv = t([1.0, 1.0, -1.0, -1.0, 2.0, 100.0])
    old = t([-1.0, -2.0, -0.5, -3.0, -1.5, -1.0])
    logp = (old + ratios.log()).detach().requires_grad_(True)
    mask = t([1, 1, 1, 1, 1, 0])
    return logp, old, adv, mask


def test_policy_loss_clipping_hand_numbers_and_gradients():
    logp, old, adv, mask = _clip_case()
    out = ppo_policy_loss(logp[None], old[None], adv[None], mask[None], clip_range=0.2)
    _check_clip_case(out, logp)


def _check_clip_case(out, logp):
    """The numbers of ``_clip_case`` under a plain 0.2 clip, token-mean, by hand."""
    # token-mean: (-1.2 - 0.5 + 1.5 + 0.8 - 2.2) / 5 = -1.6 / 5 = -0.32
    close(out.loss, -0.32, atol=1e-9)
    # a and d clipped -> 2/5
    close(out.clip_fraction, 0.4)
    # ratio_mean = (1.5 + 0.5 + 1.5 + 0.5 + 1.1) / 5 = 5.1 / 5
    close(out.ratio_mean, 1.02, atol=1e-9)
    # approx_kl = mean((r - 1) - log r):
    #   r=1.5: 0.5 - 0.4054651081 = 0.0945348919   (x2)
    #   r=0.5: -0.5 + 0.6931471806 = 0.1931471806  (x2)
    #   r=1.1: 0.1 - 0.0953101798 = 0.0046898202
    #   sum = 0.1890697838 + 0.3862943612 + 0.0046898202 = 0.5800539652; / 5
    close(out.approx_kl, 0.1160107930, atol=1e-9)

    out.loss.backward()
    # d loss / d logp = d(-A r)/d logp / 5 = -A r / 5 on unclipped tokens, 0 on clipped:
    #   a: 0 ; b: -0.5/5 = -0.1 ; c: 1.5/5 = 0.3 ; d: 0 ; e: -2.2/5 = -0.44 ; f: 0 (masked)
    close(logp.grad, [-0.0, -0.1, 0.3, 0.0, -0.44, 0.0], atol=1e-9)


def test_policy_loss_is_a_token_mean_across_rows():
    """Every policy token weighs the same, whatever its row (token-mean: the presets' only
    aggregation); a row without policy tokens adds nothing."""
    logp, old, adv, mask = _clip_case()
    # rows: [a, b, c], [d, e, pad], [all pad]
    idx = torch.tensor([[0, 1, 2], [3, 4, 5], [5, 5, 5]])
    m2 = t([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    tok = ppo_policy_loss(logp[idx], old[idx], adv[idx], m2)
    # (-1.2 - 0.5 + 1.5 + 0.8 - 2.2) / 5, as on one row
    close(tok.loss, -0.32, atol=1e-9)


def test_policy_loss_clip_is_symmetric():
    old = t([[-1.0, -1.0]])
    logp = old + t([[1.25, 0.75]]).log()
    adv = t([[1.0, -1.0]])
    mask = t([[1, 1]])
    # 0.2 each side: token0 A=+1 r=1.25 -> max(-1.25, -1.2) = -1.2 (clipped at 1.2);
    #                token1 A=-1 r=0.75 -> max(0.75, 0.8)   =  0.8 (clipped at 0.8)
    sym = ppo_policy_loss(logp, old, adv, mask, clip_range=0.2)
    close(sym.loss, (-1.2 + 0.8) / 2, atol=1e-9)
    close(sym.clip_fraction, 1.0)


def test_policy_loss_has_no_dual_clip():
    """A negative-advantage token made far likelier than at sampling keeps its whole loss
    ``-A r`` and its gradient (no cap at ``-A * c``: verl's dual clip is not the presets')."""
    old = t([[-2.0, -2.0, -2.0, -2.0]])
    logp = (old + t([[4.0, 2.0, 4.0, 0.5]]).log()).requires_grad_(True)
    adv = t([[-1.0, -1.0, 1.0, -2.0]])
    mask = t([[1, 1, 1, 1]])
    # clip 0.2:
    #   token0 A=-1 r=4:   max(4, 1.2) = 4 (gradient flows)
    #   token1 A=-1 r=2:   max(2, 1.2) = 2 (gradient flows)
    #   token2 A=+1 r=4:   max(-4, -1.2) = -1.2 (clipped)
    #   token3 A=-2 r=0.5: max(1.0, 1.6) = 1.6 (clipped)
    out = ppo_policy_loss(logp, old, adv, mask, clip_range=0.2)
    close(out.loss, (4.0 + 2.0 - 1.2 + 1.6) / 4, atol=1e-9)
    close(out.clip_fraction, 0.5)  # tokens 2 and 3 have no gradient
    out.loss.backward()
    # d/dlogp of (-A r)/4 = -A r / 4: token0 = 1 * 4 / 4 = 1; token1 = 1 * 2 / 4 = 0.5
    close(logp.grad, [[1.0, 0.5, 0.0, 0.0]], atol=1e-9)


def test_policy_loss_garbage_in_masked_positions_stays_finite():
    logp = torch.tensor([[-1.0, float("nan"), float("-inf")]], requires_grad=True)
    old = torch.tensor([[-1.0, float("nan"), -2.0]])
    adv = torch.tensor([[2.0, float("inf"), 1.0]])
    mask = torch.tensor([[1.0, 0.0, 0.0]])
    out = ppo_policy_loss(logp, old, adv, mask)
    out.loss.backward()
    close(out.loss, -2.0)
    assert all_finite(out.loss, logp.grad, out.approx_kl, out.ratio_mean)


# ======================================================================================
# value loss
# ======================================================================================


def test_value_loss_hand_numbers_with_clipping():
    # c = 0.2, clip(V, old - 0.2, old + 0.2)
    #   a: V=1.0 old=0.5 R=1.0: Vc=0.7; (0)^2=0    vs (-0.3)^2=0.09 -> 0.09 clipped
    #   b: V=1.0 old=0.5 R=0.0: Vc=0.7; 1.0        vs 0.49          -> 1.0
    #   c: V=0.3 old=0.4 R=0.0: in range; 0.09     vs 0.09          -> 0.09
    #   d: V=0.0 old=0.5 R=1.0: Vc=0.3; 1.0        vs 0.49          -> 1.0
    #   e: V=0.0 old=0.5 R=0.0: Vc=0.3; 0          vs 0.09          -> 0.09 clipped
    #   f: masked, garbage
    values = t([[1.0, 1.0, 0.3, 0.0, 0.0, 50.0]]).requires_grad_(True)
    old = t([[0.5, 0.5, 0.4, 0.5, 0.5, -50.0]])
    returns = t([[1.0, 0.0, 0.0, 1.0, 0.0, 7.0]])
    mask = t([[1, 1, 1, 1, 1, 0]])
    loss, clipfrac = ppo_value_loss(values, old, returns, mask, clip_range_value=0.2)
    # 0.5 * (0.09 + 1 + 0.09 + 1 + 0.09) / 5 = 0.5 * 2.27 / 5 = 0.227
    close(loss, 0.227, atol=1e-9)
    close(clipfrac, 0.4)  # a and e
    loss.backward()
    # grad = 0.5 * 2 * (V - R) / 5 where the unclipped term counts, 0 where clipped:
    #   a: 0 ; b: 1.0/5 = 0.2 ; c: 0.3/5 = 0.06 ; d: -1.0/5 = -0.2 ; e: 0 ; f: 0
    close(values.grad, [[0.0, 0.2, 0.06, -0.2, 0.0, 0.0]], atol=1e-9)


def test_value_loss_without_clipping_is_half_mse():
    values = t([[1.0, 2.0, 9.0]])
    old = t([[-5.0, 5.0, 0.0]])
    returns = t([[0.0, 0.0, 0.0]])
    mask = t([[1, 1, 0]])
    loss, clipfrac = ppo_value_loss(values, old, returns, mask, clip_range_value=None)
    # 0.5 * (1 + 4) / 2 = 1.25
    close(loss, 1.25)
    close(clipfrac, 0.0)


# ======================================================================================
# logits -> entropy / logprobs
# ======================================================================================


def test_entropy_uniform_is_log_vocab():
    logits = torch.zeros(2, 3, 50)
    close(entropy_from_logits(logits), torch.full((2, 3), math.log(50)), atol=1e-5)
    # shift invariance: adding a constant does not change the distribution
    close(entropy_from_logits(logits + 1234.5), torch.full((2, 3), math.log(50)), atol=1e-3)


def test_entropy_matches_definition_and_is_stable():
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(2, 4, 11, generator=g, dtype=F64) * 2
    logp = torch.log_softmax(logits, -1)
    close(entropy_from_logits(logits), -(logp.exp() * logp).sum(-1), atol=1e-10)
    peaked = torch.tensor([[[0.0, -1e4, -1e4], [1e4, 0.0, 0.0]]])
    h = entropy_from_logits(peaked)
    assert torch.isfinite(h).all()
    close(h, [[0.0, 0.0]], atol=1e-6)


def test_entropy_bf16_path_and_gradient():
    g = torch.Generator().manual_seed(7)
    logits = (torch.randn(2, 3, 17, generator=g) * 2).to(torch.bfloat16)
    h = entropy_from_logits(logits)
    assert h.dtype == torch.float32 and h.shape == (2, 3)
    close(h, entropy_from_logits(logits.float()), atol=1e-5)
    x = torch.randn(1, 2, 5, generator=g, requires_grad=True)
    entropy_from_logits(x).sum().backward()
    assert all_finite(x.grad) and x.grad.abs().sum() > 0


def test_logprobs_match_log_softmax_gather():
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(3, 5, 13, generator=g, dtype=F64, requires_grad=True)
    labels = torch.randint(0, 13, (3, 5), generator=g)
    lp = logprobs_from_logits(logits, labels)
    ref = torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1)
    assert lp.shape == (3, 5)
    close(lp, ref, atol=1e-12)
    lp.sum().backward()
    assert all_finite(logits.grad)


def test_logprobs_bf16_upcasts_to_float32():
    g = torch.Generator().manual_seed(9)
    logits = (torch.randn(2, 4, 19, generator=g) * 3).to(torch.bfloat16)
    labels = torch.randint(0, 19, (2, 4), generator=g)
    lp = logprobs_from_logits(logits, labels)
    assert lp.dtype == torch.float32
    ref = torch.log_softmax(logits.float(), -1).gather(-1, labels[..., None]).squeeze(-1)
    close(lp, ref, atol=1e-6)


# ======================================================================================
# explained variance, all_finite
# ======================================================================================


def test_explained_variance():
    mask = t([[1, 1, 1, 1, 0]])
    returns = t([[1.0, 2.0, 3.0, 4.0, 99.0]])
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    # predicting a constant: Var[R - c] = Var[R] -> 0
    assert explained_variance(torch.full_like(returns, 7.0), returns, mask) == pytest.approx(0.0)
    # V = R + [1, -1, 1, -1]: residual mean 0, var 1; Var[R] = 1.25 -> 1 - 1/1.25 = 0.2
    v = returns + t([[1.0, -1.0, 1.0, -1.0, 0.0]])
    assert explained_variance(v, returns, mask) == pytest.approx(0.2)
    # constant returns: undefined -> nan (documented)
    assert math.isnan(explained_variance(returns, torch.ones_like(returns), mask))
    assert math.isnan(explained_variance(returns, returns, t([[1, 0, 0, 0, 0]])))


def test_all_finite():
    assert all_finite(torch.ones(3), torch.zeros(2, 2), None, torch.empty(0))
    assert all_finite(torch.tensor([1, 2]))  # integers are always finite
    assert not all_finite(torch.ones(3), torch.tensor([1.0, float("nan")]))
    assert not all_finite(torch.tensor(float("inf")))
    assert not all_finite(torch.tensor([[-float("inf")]]))
    assert all_finite(1.0) and not all_finite(float("nan"))
