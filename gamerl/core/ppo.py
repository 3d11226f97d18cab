"""PPO math core: advantages, losses, KL estimators and masked statistics.

Pure functions on tensors, no model or trainer state, so each piece can be unit-tested
against hand-computed numbers and stepped through in a debugger.

Conventions used everywhere in this file:

* Token tensors are ``[batch, tokens]``: one row per episode (a whole multi-turn chat,
  prompt + policy turns + environment turns + right padding), one column per token.
* ``mask`` is ``[batch, tokens]``, 1.0 (or True) on tokens the policy generated and 0.0 on
  prompt, environment-observation and padding tokens. Losses and statistics only look at
  mask-1 positions.
* Values at mask-0 positions are treated as garbage: functions never let them leak into a
  result (we select with ``torch.where`` instead of multiplying by the mask, because
  ``nan * 0 == nan``), and outputs are exactly 0 there unless a docstring says otherwise.
* Logprobs are log pi(token_t | tokens_<t), aligned with ``mask`` (the caller does the
  usual shift-by-one between logits and labels).

Semantics follow verl's ``core_algos.py`` (multi-turn-aware GAE, clipped policy/value loss,
k1/k2/k3 KL, GRPO outcome advantage, token-mean loss aggregation) and CleanRL's ``ppo.py``
(approx-KL and clip-fraction diagnostics); the code is written from scratch.

One recipe, the one every preset runs: the clipped surrogate with a symmetric clip and no dual
clip, every loss term a mean over the batch's policy tokens ("token-mean"). The variants verl
offers (clip-higher, dual clip, sequence-mean aggregation, other policy losses by name) were
settings here until 2026-12-07, set by no preset; the git tag ``experiments-2026-12`` has them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import torch

__all__ = [
    "masked_mean",
    "masked_var",
    "masked_whiten",
    "compute_gae",
    "compute_turn_gae",
    "turn_ends",
    "compute_grpo_advantages",
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "get_advantage_estimator",
    "register_advantage_estimator",
    "kl_penalty",
    "PolicyLossOutput",
    "ppo_policy_loss",
    "importance_ratio",
    "clipped_surrogate",
    "ratio_diagnostics",
    "ppo_value_loss",
    "entropy_from_logits",
    "logprobs_from_logits",
    "explained_variance",
    "all_finite",
]

# log-ratios are clamped to this range before exp(): exp(20) ~ 4.9e8 is already far outside
# any clip range, and exp(88) overflows float32 to inf, which would turn the loss into nan.
_LOG_RATIO_CLAMP = 20.0
# The k3 estimator is additionally clamped to [-10, 10] like verl's "low_var_kl".
_K3_CLAMP = 10.0


# --------------------------------------------------------------------------------------
# Masked statistics
# --------------------------------------------------------------------------------------


def _as_bool(mask: torch.Tensor) -> torch.Tensor:
    return mask if mask.dtype == torch.bool else mask != 0


def _zero_masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x where mask is 1, exactly 0 elsewhere (also when x is nan/inf there).

    ``torch.where`` (not ``x * mask``) so that garbage in ignored positions cannot turn
    the result into nan; its backward sends exactly 0 to the masked-out positions.
    """
    return torch.where(_as_bool(mask), x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_mean(
    x: torch.Tensor, mask: torch.Tensor, dim: Optional[Union[int, Sequence[int]]] = None
) -> torch.Tensor:
    """Mean of ``x`` over positions where ``mask`` is 1.

    Args:
        x: ``[batch, tokens]`` (any shape, as long as ``mask`` has the same one).
        mask: same shape as ``x``, 1/True = include.
        dim: ``None`` reduces over everything (0-dim result); an int/tuple reduces over
            those dims only (e.g. ``dim=-1`` gives a per-sequence mean ``[batch]``).

    An empty selection gives 0 (not nan): a fully masked row in a per-sequence mean is
    then harmless.
    """
    m = _as_bool(mask)
    total = _zero_masked(x, m).sum(dim=dim) if dim is not None else _zero_masked(x, m).sum()
    count = m.sum(dim=dim) if dim is not None else m.sum()
    return total / count.clamp(min=1).to(total.dtype)


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` over all mask-1 positions (a 0-dim tensor).

    ``unbiased=True`` applies Bessel's correction n/(n-1), as verl does before whitening.
    Raises ValueError when the mask selects nothing, or exactly one element with
    ``unbiased=True`` (the correction is undefined); a silent nan there would poison a
    whole update.
    """
    m = _as_bool(mask)
    count = int(m.sum())
    if count == 0:
        raise ValueError("masked_var: mask selects no elements")
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m)
    if unbiased:
        if count == 1:
            raise ValueError("masked_var: unbiased variance needs at least 2 masked elements")
        var = var * (count / (count - 1))
    return var


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Normalise ``x`` to mean 0 and (unbiased) std 1 over the mask-1 positions.

    Args:
        x: ``[batch, tokens]``.
        mask: ``[batch, tokens]``.
        shift_mean: if False, only rescale (the original masked mean is kept). Use this for
            quantities whose sign matters, e.g. rewards.
        eps: added to the variance inside the rsqrt, so a constant input gives ~0, not nan.

    Returns:
        ``[batch, tokens]``; masked-out positions are set to exactly 0 (so a stray padding
        value can never reach a loss, even one that forgets to mask).

    Statistics are over the whole batch (all masked tokens), not per row: whitening per
    row would erase the signal of which episode did better than another.
    """
    m = _as_bool(mask)
    mean = masked_mean(x, m)
    var = masked_var(x, m, unbiased=True)
    whitened = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return _zero_masked(whitened, m)


# --------------------------------------------------------------------------------------
# Advantage estimators
# --------------------------------------------------------------------------------------


@torch.no_grad()
def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
    bootstrap: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level Generalized Advantage Estimation for multi-turn episodes.

    Args:
        rewards: ``[batch, tokens]`` token-level rewards. Game rewards go on the LAST token
            of each policy turn (and a per-token KL penalty, if used, on every policy token).
            Must be 0 on mask-0 tokens: a reward there could never be credited (see below),
            so a non-zero one raises ValueError rather than vanishing silently.
        values: ``[batch, tokens]`` critic values V(s_t) at each token (old critic, detached).
        mask: ``[batch, tokens]`` 1 on policy tokens.
        gamma: discount per POLICY token.
        lam: GAE lambda; 1 gives Monte-Carlo returns minus V, 0 gives the one-step TD error.
        bootstrap: ``[batch]`` the value of the state after each row's last policy token: 0
            where the episode ended (terminated), V(cut) where it was cut short (truncated: the
            context budget ran out while the game went on). None: every row terminated.

    Returns:
        ``(advantages, returns)``, both ``[batch, tokens]``, float32 (or float64 if the
        values are float64), exactly 0 on mask-0 positions.
        ``returns = advantages + values`` (the critic's regression target).
        The advantages are RAW, NOT whitened: whitening is a separate explicit step
        (``masked_whiten(advantages, mask)``) so both versions can be inspected and logged,
        and so returns are computed from unwhitened advantages.

    Recursion, scanning tokens right to left over the policy tokens only::

        delta_t = r_t + gamma * V_next - V_t
        A_t     = delta_t + gamma * lam * A_next

    where V_next / A_next belong to the next POLICY token of the same row; after the last one
    V_next is ``bootstrap`` (0 when the episode ended there) and A_next is 0. WHY bootstrap: a
    truncated episode is not a terminal one (Gymnasium's terminated/truncated split); the turns
    it did not get to play would still have paid, and a target of r alone teaches the critic
    that long answers lead nowhere. Environment/prompt/padding tokens (mask 0) are skipped:
    the running V_next and A_next pass straight through them, so the last token of turn k
    bootstraps from V(first token of turn k+1) and the gap costs no discount. WHY: the
    environment's reply is part of the state transition, not an action; the critic's value
    at the first token of the next turn (which has read the observation) is the right
    bootstrap. This matches verl's multi-turn-aware ``compute_gae_advantage_return``
    (verl then whitens inside the function; we do not).
    """
    m = _as_bool(mask)
    f64 = dict(dtype=torch.float64, device=m.device)  # exact factors; the scan casts them
    return _gae_scan(rewards, values, m, torch.full(m.shape, gamma, **f64),
                     torch.full(m.shape, lam, **f64), "compute_gae", bootstrap)


def turn_ends(mask: torch.Tensor) -> torch.Tensor:
    """``[batch, tokens]`` bool: True on the LAST token of each policy turn.

    A turn is a maximal run of consecutive mask-1 tokens (the rollout always puts at least one
    environment token between two answers); its last token is a policy token whose right
    neighbour is not one (or that ends the row)."""
    m = _as_bool(mask)
    next_is_policy = torch.zeros_like(m)
    next_is_policy[:, :-1] = m[:, 1:]
    return m & ~next_is_policy


@torch.no_grad()
def compute_turn_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
    bootstrap: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn-level GAE: ``gamma`` and ``lam`` act between TURNS; inside an answer both are 1.

    Same arguments (``bootstrap`` included), outputs and mask-0 handling as ``compute_gae``. The only difference is
    where the discount is applied: from the last token of turn k to the first token of turn
    k+1 (``turn_ends``), and nowhere else. So for every token t of turn k, ending at token L::

        A_t = (r_L + gamma * V(first token of turn k+1) - V_t)     # rewards inside the turn
              + gamma * lam * A(first token of turn k+1)           # are summed undiscounted
        R_t = A_t + V_t  (the same target for every token of the turn)

    WHY: in a multi-turn game the decision is the whole answer. Per-token discounting
    (``compute_gae``) gives the first token of a 40-token password (gamma * lam)^39 of the
    credit of its last token (9% at the seed's gamma 0.99, lam 0.95), and makes gamma mean
    "per token", so 0.99 over a 30-turn game of 256-token answers is a horizon of one or two
    turns. Here gamma 0.99 / lam 0.95 mean what they say for turns, whatever the answer
    lengths. Each token keeps its own baseline V_t (the critic still sees every prefix).
    """
    m = _as_bool(mask)
    ends = turn_ends(m)
    one = torch.ones(m.shape, dtype=torch.float64, device=m.device)
    return _gae_scan(rewards, values, m, torch.where(ends, gamma, one),
                     torch.where(ends, lam, one), "compute_turn_gae", bootstrap)


def _gae_scan(rewards: torch.Tensor, values: torch.Tensor, m: torch.Tensor,
              gamma_t: torch.Tensor, lam_t: torch.Tensor, name: str,
              bootstrap: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The GAE recursion with a per-token discount: ``gamma_t[b, t]`` / ``lam_t[b, t]`` are
    the factors from policy token t to the NEXT policy token of its row (skipping mask-0
    tokens). ``compute_gae`` passes constants, ``compute_turn_gae`` puts them on turn ends."""
    if rewards.shape != values.shape or values.shape != m.shape:
        raise ValueError(
            f"{name}: shapes differ: rewards {tuple(rewards.shape)}, "
            f"values {tuple(values.shape)}, mask {tuple(m.shape)}"
        )
    # bf16 critic outputs would make the long recursion drift; do the arithmetic in >= fp32.
    dtype = torch.promote_types(values.dtype, torch.float32)
    zero = torch.zeros((), dtype=dtype, device=values.device)
    # Sanitize first: values at mask-0 positions may be anything (even nan) and must not
    # leak through the arithmetic below.
    r = torch.where(m, rewards.to(dtype), zero)
    v = torch.where(m, values.to(dtype), zero)
    if bool((torch.where(m, zero, rewards.to(dtype)) != 0).any()):
        raise ValueError(
            f"{name}: non-zero reward on a mask-0 (prompt/environment/padding) token; "
            "put rewards on the last policy token of the turn instead"
        )

    gamma_t = gamma_t.to(dtype=dtype, device=v.device)
    lam_t = lam_t.to(dtype=dtype, device=v.device)
    batch, n_tokens = v.shape
    advantages = torch.zeros_like(v)
    # V of the next policy token; after a row's last one, the state the episode stopped in:
    # 0 if it ended there, V(cut) if it was truncated (compute_gae's ``bootstrap``)
    next_value = (torch.zeros(batch, dtype=dtype, device=v.device) if bootstrap is None
                  else bootstrap.to(dtype=dtype, device=v.device).clone())
    next_adv = torch.zeros(batch, dtype=dtype, device=v.device)  # A of next policy token
    # Loop over tokens (vectorised over the batch): the recursion is sequential in t.
    for t in reversed(range(n_tokens)):
        delta = r[:, t] + gamma_t[:, t] * next_value - v[:, t]
        adv_t = delta + gamma_t[:, t] * lam_t[:, t] * next_adv
        is_policy = m[:, t]
        # Policy token: it becomes the "next" token for t-1.
        # Mask-0 token: carry the running values over it unchanged (the skip).
        next_value = torch.where(is_policy, v[:, t], next_value)
        next_adv = torch.where(is_policy, adv_t, next_adv)
        advantages[:, t] = torch.where(is_policy, adv_t, zero)

    returns = torch.where(m, advantages + v, zero)
    return advantages, returns


@torch.no_grad()
def compute_grpo_advantages(
    scores: torch.Tensor,
    group_ids: Union[torch.Tensor, Sequence[int]],
    mask: torch.Tensor,
    eps: float = 1e-6,
    normalize_std: bool = True,
) -> torch.Tensor:
    """GRPO outcome advantage: each episode's score relative to its group.

    Args:
        scores: ``[batch]`` episode returns.
        group_ids: ``[batch]`` ints; episodes sharing an id were rolled out from the same
            game instance / prompt. Ids need not be contiguous or sorted.
        mask: ``[batch, tokens]``.
        eps: added to the std, so a group with identical scores gives 0, not nan.
        normalize_std: False gives the "Dr. GRPO" variant ``score - group_mean`` (dividing
            by the std up-weights groups whose scores barely differ).

    Returns:
        ``[batch, tokens]``: ``(score - group_mean) / (group_std + eps)`` (std with Bessel's
        correction, like ``torch.std``) copied onto every mask-1 token of the episode, 0 on
        mask-0 tokens. Groups of size 1 get advantage 0: with no sibling there is no
        baseline, and the raw score is not an advantage.
    """
    m = _as_bool(mask)
    scores = torch.as_tensor(scores)
    if not scores.is_floating_point():
        scores = scores.float()
    scores = scores.to(m.device)
    group_ids = torch.as_tensor(group_ids, device=scores.device)
    if scores.ndim != 1 or group_ids.shape != scores.shape or m.shape[0] != scores.shape[0]:
        raise ValueError(
            f"compute_grpo_advantages: need scores [batch], group_ids [batch], mask [batch, T]; "
            f"got {tuple(scores.shape)}, {tuple(group_ids.shape)}, {tuple(m.shape)}"
        )

    # inverse[i] = index of episode i's group in 0..n_groups-1
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    n_groups = counts.shape[0]
    counts_f = counts.to(scores.dtype)
    group_sum = torch.zeros(n_groups, dtype=scores.dtype, device=scores.device)
    group_sum.index_add_(0, inverse, scores)
    group_mean = group_sum / counts_f
    centered = scores - group_mean[inverse]

    advantage = centered
    if normalize_std:
        group_sq = torch.zeros_like(group_sum).index_add_(0, inverse, centered**2)
        group_std = torch.sqrt(group_sq / (counts_f - 1).clamp(min=1))
        advantage = centered / (group_std[inverse] + eps)
    advantage = torch.where(counts[inverse] > 1, advantage, torch.zeros_like(advantage))

    # broadcast the per-episode number to every policy token of the episode
    return _zero_masked(advantage[:, None].expand(m.shape), m)


# --------------------------------------------------------------------------------------
# Advantage estimators, by name (verl's register_adv_est / get_adv_estimator_fn)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdvantageEstimator:
    """One way to turn rewards into advantages and returns, with one signature:
    ``fn(rewards [B, T], values [B, T], mask [B, T], group_ids [B], gamma, lam, bootstrap [B])``
    -> ``(advantages [B, T], returns [B, T])``, 0 on mask-0 tokens (``bootstrap``: V where an
    episode was truncated, 0 where it ended; ``compute_gae``).

    ``uses_critic``: it needs the value head's estimates (and trains it: the value loss, the
    KL-in-reward penalty and explained variance apply); ``whiten``: its advantages are then
    normalised over the batch's policy tokens (GRPO's are normalised per group already)."""

    name: str
    fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    uses_critic: bool
    whiten: bool


class Registry(dict):
    """Name -> entry (an advantage estimator), with one clear error for a name not registered."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def lookup(self, name: str):
        if name not in self:
            raise ValueError(f"unknown {self.what} {name!r}; registered: {', '.join(sorted(self))}")
        return self[name]


ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator")  # name -> AdvantageEstimator


def register_advantage_estimator(name: str, *, uses_critic: bool, whiten: bool):
    """Decorator: make ``fn`` the estimator ``name`` (``TrainConfig.estimator_name``)."""
    def register(fn):
        ADVANTAGE_ESTIMATORS[name] = AdvantageEstimator(name, fn, uses_critic, whiten)
        return fn
    return register


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    return ADVANTAGE_ESTIMATORS.lookup(name)


@register_advantage_estimator("gae_turn", uses_critic=True, whiten=True)
def _gae_per_turn(rewards, values, mask, group_ids, gamma, lam, bootstrap=None):
    """GAE with gamma and lam applied between turns (every token of an answer shares it)."""
    return compute_turn_gae(rewards, values, mask, gamma, lam, bootstrap)


@register_advantage_estimator("gae_token", uses_critic=True, whiten=True)
def _gae_per_token(rewards, values, mask, group_ids, gamma, lam, bootstrap=None):
    """verl's per-token GAE: gamma and lam applied at every policy token."""
    return compute_gae(rewards, values, mask, gamma, lam, bootstrap)


@register_advantage_estimator("grpo", uses_critic=False, whiten=False)
def _grpo(rewards, values, mask, group_ids, gamma, lam, bootstrap=None):
    """The episode's return against the other plays of its game (its group); the returns are
    advantage + value, only for the log (no critic learns from them). No critic, so nothing
    to bootstrap a truncated episode from: its return is what it earned."""
    advantages = compute_grpo_advantages(rewards.sum(-1), group_ids, mask)
    returns = torch.where(_as_bool(mask), advantages + values, torch.zeros_like(advantages))
    return advantages, returns


# --------------------------------------------------------------------------------------
# KL estimators
# --------------------------------------------------------------------------------------


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, kind: str = "k1") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from the sampled tokens' logprobs.

    Args:
        logprobs: ``[batch, tokens]`` log pi(a_t), tokens sampled from pi.
        ref_logprobs: ``[batch, tokens]`` log pi_ref(a_t) for the same tokens.
        kind: one of
            - ``"k1"``: ``logp - ref``. Unbiased estimate of KL(pi||ref); high variance and
              can be negative per token. The standard choice for a KL *reward* penalty
              (no gradient flows through a reward). As a loss its expected gradient is 0.
            - ``"k2"``: ``0.5 * (logp - ref)**2``. Biased as a value (low variance, >= 0),
              but as a LOSS its expected gradient equals the gradient of KL(pi||ref).
            - ``"k3"`` (alias ``"low_var_kl"``): ``exp(ref - logp) - (ref - logp) - 1``.
              Unbiased estimate of KL(pi||ref), >= 0, low variance (Schulman's estimator;
              GRPO's KL loss). As a loss its expected gradient is that of the FORWARD
              KL(ref||pi), not KL(pi||ref).

    Returns:
        ``[batch, tokens]`` (not masked; aggregate with ``masked_mean``).

    Clamp (k3 only, like verl): ``ref - logp`` is clamped to [-20, 20] before exp() and the
    result to [-10, 10]; a single token the policy has moved far from the reference would
    otherwise give exp(large) = inf and one token would dominate (or nan) the batch.
    """
    log_ratio = logprobs - ref_logprobs  # log pi/pi_ref
    if kind == "k1":
        return log_ratio
    if kind == "k2":
        return 0.5 * log_ratio.square()
    if kind in ("k3", "low_var_kl"):
        x = (-log_ratio).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)  # log pi_ref/pi
        return (torch.exp(x) - x - 1).clamp(-_K3_CLAMP, _K3_CLAMP)
    raise ValueError(f"kl_penalty: unknown kind {kind!r} (use 'k1', 'k2' or 'k3')")


# --------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------


@dataclass
class PolicyLossOutput:
    """Result of the policy loss (``ppo_policy_loss``).

    ``loss`` is a differentiable 0-dim tensor; the diagnostics are detached 0-dim tensors
    (call ``.item()`` when logging; we avoid forcing a device sync here).
    """

    loss: torch.Tensor
    clip_fraction: torch.Tensor  # fraction of masked tokens whose clipped branch is active
    approx_kl: torch.Tensor  # k3 estimate of KL(pi_old || pi) over masked tokens
    ratio_mean: torch.Tensor  # mean of pi/pi_old over masked tokens


def ppo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float = 0.2,
) -> PolicyLossOutput:
    """PPO clipped surrogate loss (to minimise).

    Args:
        logprobs: ``[batch, tokens]`` log pi_theta(a_t), requires grad.
        old_logprobs: ``[batch, tokens]`` log pi_old(a_t) from the rollout policy, detached.
        advantages: ``[batch, tokens]`` (usually whitened), detached.
        mask: ``[batch, tokens]``.
        clip_range: the ratio is clipped to ``[1 - clip_range, 1 + clip_range]``: symmetric
            (PPO's; DAPO's "clip-higher" upper bound was set by no preset).

    The three steps: the ratio pi/pi_old (``importance_ratio``), the per-token clipped loss
    (``clipped_surrogate``), its mean over the policy tokens (token-mean: every token weighs
    the same, so a long answer is not down-weighted per token; DAPO and Dr. GRPO's choice);
    and the diagnostics (``ratio_diagnostics``).
    """
    m = _as_bool(mask)
    # Sanitize ignored positions before any arithmetic (see _zero_masked) so padding
    # garbage cannot produce nan values or nan gradients.
    logprobs = _zero_masked(logprobs, m)
    old_logprobs = _zero_masked(old_logprobs, m)
    advantages = _zero_masked(advantages, m)

    log_ratio, ratio = importance_ratio(logprobs, old_logprobs)
    loss_mat, switched_off = clipped_surrogate(ratio, advantages, clip_range)
    loss = masked_mean(loss_mat, m)
    return PolicyLossOutput(loss=loss, **ratio_diagnostics(log_ratio, ratio, switched_off, m))


def importance_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log_ratio, ratio)``, both ``[batch, tokens]``: ``log pi/pi_old`` clamped to
    [-20, 20] (exp of more overflows float32 to inf, a nan loss) and its exp."""
    log_ratio = (logprobs - old_logprobs).clamp(-_LOG_RATIO_CLAMP, _LOG_RATIO_CLAMP)
    return log_ratio, torch.exp(log_ratio)


def clipped_surrogate(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    clip_range: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped PPO loss per token: ``(loss_mat, switched_off)``, both ``[batch, tokens]``
    (``ratio`` and ``advantages`` as ``ppo_policy_loss`` has them, sanitized).

    Per token, with ``r = ratio``::

        loss_t = max(-A * r, -A * clip(r, 1 - c, 1 + c))   # = -min(r A, clip(r) A)

    Taking the pessimistic (larger) loss means clipping only removes incentive, never adds
    it: when the clipped branch wins, it is constant in theta and the token's gradient is 0.
    (No dual clip, verl's ``clip_ratio_c``, which caps ``-A r`` for A < 0: no preset set it;
    the git tag ``experiments-2026-12`` has it.)

    ``switched_off`` (bool, no gradient) marks the tokens where the clipped branch is strictly
    larger, i.e. exactly the tokens whose gradient was switched off (verl's ``pg_clipfrac``).
    A ratio outside the range on the "harmless" side (e.g. r < 1 - c with A > 0) is NOT
    counted, since its gradient still flows.
    """
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * ratio.clamp(1.0 - clip_range, 1.0 + clip_range)
    loss_mat = torch.maximum(loss_unclipped, loss_clipped)
    with torch.no_grad():
        switched_off = loss_clipped > loss_unclipped
    return loss_mat, switched_off


@torch.no_grad()
def ratio_diagnostics(log_ratio: torch.Tensor, ratio: torch.Tensor, switched_off: torch.Tensor,
                      mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """``clip_fraction``, ``approx_kl`` and ``ratio_mean`` of ``PolicyLossOutput``: detached
    0-dim tensors over the mask-1 tokens of the ``[batch, tokens]`` inputs. ``approx_kl`` is
    k3 for KL(old || new) with samples from old: ``(r - 1) - log r`` (CleanRL's)."""
    m = _as_bool(mask)
    return {"clip_fraction": masked_mean(switched_off.to(ratio.dtype), m).detach(),
            "approx_kl": masked_mean((ratio - 1.0) - log_ratio, m).detach(),
            "ratio_mean": masked_mean(ratio, m).detach()}


def ppo_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range_value: Optional[float] = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss ``0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)``.

    Args:
        values: ``[batch, tokens]`` current critic output, requires grad.
        old_values: ``[batch, tokens]`` critic output at rollout time (the ones used in GAE).
        returns: ``[batch, tokens]`` targets from ``compute_gae``.
        mask: ``[batch, tokens]``.
        clip_range_value: c, in units of the returns (so it must match the reward scale);
            None disables clipping (plain 0.5 * MSE).

    Returns:
        ``(loss, value_clip_fraction)``: the mean over the policy tokens, as the policy loss's
        (differentiable, 0-dim), and the detached fraction of masked tokens where the clipped
        term is strictly larger (the tokens whose value gradient is switched off).

    WHY clip: keeps the critic near the one that produced the advantages, like the policy
    clip; taking the max (pessimistic) means it can only slow the critic down.
    """
    m = _as_bool(mask)
    values = _zero_masked(values, m)
    old_values = _zero_masked(old_values, m)
    returns = _zero_masked(returns, m)

    loss_unclipped = (values - returns).square()
    if clip_range_value is None:
        loss_clipped = loss_unclipped
    else:
        values_clipped = old_values + (values - old_values).clamp(-clip_range_value, clip_range_value)
        loss_clipped = (values_clipped - returns).square()
    loss = 0.5 * masked_mean(torch.maximum(loss_unclipped, loss_clipped), m)
    with torch.no_grad():
        clip_fraction = masked_mean((loss_clipped > loss_unclipped).to(loss_unclipped.dtype), m)
    return loss, clip_fraction.detach()


# --------------------------------------------------------------------------------------
# Logits -> per-token quantities
# --------------------------------------------------------------------------------------

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax distribution at each position.

    Args:
        logits: ``[batch, tokens, vocab]``.

    Returns:
        ``[batch, tokens]`` float32 (float64 for float64 logits), differentiable.

    Uses ``H = logsumexp(z) - sum_i softmax(z)_i * z_i``, which never takes log of a
    probability, so it stays finite for very peaked logits (a naive -sum p log p gives
    0 * log 0 = nan). fp16/bf16 logits are processed one row at a time in float32: the
    precision is needed, and a float32 copy of a whole ``[batch, tokens, vocab]`` tensor
    (vocab ~150k) is what runs out of memory.
    """
    if logits.dtype in _LOW_PRECISION:
        return torch.stack([entropy_from_logits(row.float()) for row in logits])
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] at each position.

    Args:
        logits: ``[batch, tokens, vocab]`` (already aligned: position t predicts labels[:, t]).
        labels: ``[batch, tokens]`` int64 token ids.

    Returns:
        ``[batch, tokens]`` float32 (float64 for float64 logits), differentiable.

    Memory: for float32/64 we gather the label logit and subtract ``logsumexp`` over the
    vocab, which never materialises a full ``[batch, tokens, vocab]`` log-softmax output.
    For fp16/bf16 we upcast ONE ROW at a time to float32 and use log_softmax + gather:
    logprob ratios in PPO need float32 precision (bf16 has ~3 significant digits, so
    exp(logp - old_logp) would be noise), and row-wise keeps the float32 copy small.
    """
    labels = labels.long()
    if logits.dtype in _LOW_PRECISION:
        rows = [
            torch.log_softmax(row.float(), dim=-1).gather(-1, lab.unsqueeze(-1)).squeeze(-1)
            for row, lab in zip(logits, labels)
        ]
        return torch.stack(rows)
    label_logits = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return label_logits - torch.logsumexp(logits, dim=-1)


# --------------------------------------------------------------------------------------
# Diagnostics and guards
# --------------------------------------------------------------------------------------


@torch.no_grad()
def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """``1 - Var[R - V] / Var[R]`` over mask-1 tokens, as a Python float.

    1 = the critic predicts the returns perfectly, 0 = no better than a constant, < 0 =
    worse than a constant. Returns ``nan`` when Var[R] == 0 (e.g. every episode got the
    same score) or when fewer than 2 tokens are masked: the ratio is undefined, and nan
    shows up as a gap in a plot instead of a fake 0 or 1. Population variances (the
    n/(n-1) factors would cancel anyway).
    """
    m = _as_bool(mask)
    if int(m.sum()) < 2:
        return math.nan
    values = values.to(torch.promote_types(values.dtype, torch.float32))
    returns = returns.to(values.dtype)
    var_returns = masked_var(returns, m, unbiased=False)
    if float(var_returns) == 0.0:
        return math.nan
    return float(1.0 - masked_var(returns - values, m, unbiased=False) / var_returns)


def all_finite(*tensors: Optional[torch.Tensor]) -> bool:
    """True if every element of every given tensor is finite (no nan, no +-inf).

    The trainer calls this on the loss (and/or gradients) and skips the optimizer step
    when it is False: one bad update can destroy a policy. ``None`` arguments are skipped
    so optional quantities can be passed as-is; empty tensors count as finite. Plain
    Python numbers are accepted too.
    """
    for t in tensors:
        if t is None:
            continue
        t = torch.as_tensor(t)
        if t.is_floating_point() or t.is_complex():
            if not bool(torch.isfinite(t).all()):
                return False
    return True
