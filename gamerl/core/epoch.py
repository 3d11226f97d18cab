"""One PPO epoch for multi-turn games, in the style of CleanRL's ppo.py: the step functions.

One epoch (``gamerl.core.trainer.Trainer.train_epoch``) is three calls, each a plain function
you can run by hand:

    batch = collect(policy, reference, tokenizer, seeds, make_env, cfg)   # play, then score
    adv_stats = compute_advantages(batch, cfg)                            # rewards -> advantages
    upd_stats = ppo_update(policy, optimizer, batch, cfg)                 # clipped PPO steps

``collect``: all episodes play in lockstep (rollout.py: one batched ``generate`` per turn); then
one no-grad forward pass of the policy (``gamerl.core.forward``) gives the old log-probs and
values, and one of the frozen reference gives the reference log-probs, for every token. (The log-probs recorded while sampling
are kept as ``gen_logprobs`` and only compared: the ratio's denominator must come from the same
computation as its numerator, so the first minibatch sees a ratio of exactly 1.) The scoring
always comes before the update, whatever ``ppo_epochs``: the batch is complete when
``collect`` returns, and the update only reads it. (A run of one PPO epoch and one minibatch
could take pi_old from the update's own pass and save the scoring pass; no preset runs one, and
that path, ``scores_in_update``, is on the git tag ``experiments-2026-12``.)

Alignment: every per-token tensor is ``[B, T]`` with index t = token t. ``logprobs[:, t]`` is
log pi(x_t | x_<t) (from the logits at t-1) and ``values[:, t]`` is V of the state before x_t
(the hidden state at t-1), so the action x_t and the value of the state it was taken in share
an index, which is what ``ppo.compute_gae`` expects. ``mask`` is 1 on policy tokens only.

``compute_advantages``: env rewards (on each turn's last policy token) x ``reward_scale``;
optionally minus ``kl_coef`` x KL(pi_old || pi_ref) on every policy token (the KL-in-reward way);
token-level GAE skipping environment tokens (``ppo.compute_gae``; an episode cut by the context
budget bootstraps from the value where it was cut), or GRPO group advantages;
then whitening over the batch's policy tokens.

``ppo_update``: ``ppo_epochs`` passes over shuffled minibatches of episodes: clipped policy loss
+ vf_coef x clipped value loss - entropy_coef x entropy (+ kl_coef x KL when KL is a loss term);
gradient accumulation over micro-batches weighted so the minibatch is one token-mean; gradient
clipping; a NaN/inf guard that skips the optimizer step (and says so) when the loss or the
gradient norm is not finite.
"""


from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import numpy as np
import torch

from . import ppo
from ..config.train_config import TrainConfig
from ..games.registry import get_task
from ..models import PolicyWithValue, unwrap_lm
from .bottom_states import batch_states, boundary_layer, forget
from .forward import forward_policy, reference_logprobs
from .scoring import Sampling
from .rollout import Episode, LMPolicy, RolloutConfig, TokenBatch, episodes_to_batch, rollout

log = logging.getLogger("gamerl")


# ----------------------------------------------------------------------------- the batch


@dataclass
class PPOBatch:
    """Everything PPO needs about one epoch's episodes; ``[B, T]`` tensors, right padded."""

    episodes: list[Episode]
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor  # 1.0 on policy tokens
    env_rewards: torch.Tensor  # the game's per-turn rewards, on each turn's last policy token
    gen_logprobs: torch.Tensor  # recorded while sampling (the self-check compares them)
    old_logprobs: torch.Tensor  # pi_old, recomputed by a forward pass (the ratio's denominator)
    old_values: torch.Tensor  # V_old (the critic at collection time)
    ref_logprobs: torch.Tensor  # pi_ref, the frozen reference
    group_ids: torch.Tensor  # [B] which game seed (GRPO groups)
    # [B] what GAE bootstraps from after a row's last answer: V_old of the state where the
    # episode was cut (truncated: the context budget ran out, the game went on), 0 where the
    # episode ended (terminated, or played its max_turns)
    bootstrap_values: Optional[torch.Tensor] = None
    # The sampling supports (top-k/top-p) of the policy tokens, [N, V/8] packed, in row-major
    # order of mask[:, 1:]; support_index [B, T] is each policy token's row in it (-1 elsewhere).
    # None when sampling does not truncate.
    support: Optional[torch.Tensor] = None
    support_index: Optional[torch.Tensor] = None
    # [B, T, H] the frozen bottom layers' output (trainable_layers): updates start from it.
    trunk_cache: Optional[torch.Tensor] = None
    rewards: Optional[torch.Tensor] = None  # token rewards used for GAE (scaled, - KL)
    advantages: Optional[torch.Tensor] = None
    returns: Optional[torch.Tensor] = None
    rollout_seconds: float = 0.0
    score_seconds: float = 0.0
    dtype: torch.dtype = torch.float32  # the policy's, which sets the self-check's tolerance

    # Every per-row field ([B, ...]). ``select`` cuts exactly these, so a field added above is
    # added here once and cannot be forgotten by one caller (tests/test_lost_sessions.py checks
    # that every [B, ...] tensor of a collected batch is listed).
    PER_ROW = ("input_ids", "attention_mask", "mask", "env_rewards", "gen_logprobs",
               "old_logprobs", "old_values", "ref_logprobs", "group_ids", "bootstrap_values",
               "support_index", "trunk_cache", "rewards", "advantages", "returns")

    def select(self, idx: torch.Tensor) -> "PPOBatch":
        """The batch of rows ``idx`` (in that order): their episodes, every per-row tensor that
        is filled, and the packed supports their policy tokens own (re-indexed)."""
        rows = {n: getattr(self, n)[idx] for n in self.PER_ROW if getattr(self, n) is not None}
        support = self.support
        if support is not None:
            support = support[rows["support_index"][rows["mask"].bool()]]
            rows["support_index"] = support_rows(rows["mask"])
        return replace(self, episodes=[self.episodes[int(i)] for i in idx], support=support,
                       **rows)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx: torch.Tensor) -> dict[str, Any]:
        """The tensors of rows ``idx``, cut to the longest of them (right padding is waste),
        with their policy tokens' supports."""
        width = int(self.attention_mask[idx].sum(-1).max())
        names = ("input_ids", "attention_mask", "mask", "gen_logprobs", "old_logprobs",
                 "old_values", "ref_logprobs", "advantages", "returns")
        out: dict[str, Any] = {n: getattr(self, n)[idx, :width] for n in names}
        out["support"] = None
        out["trunk_cache"] = None if self.trunk_cache is None else self.trunk_cache[idx, :width]
        if self.support is not None:
            index = self.support_index[idx, :width][:, 1:]
            out["support"] = self.support[index[out["mask"][:, 1:].bool()]]
        return out


def collect(policy: PolicyWithValue, reference, tokenizer, seeds: list[Any],
            make_env: Callable[..., Any], cfg: TrainConfig) -> PPOBatch:
    """Play one episode per instance (seed) with the current policy, then score every token
    (``score_episodes``)."""
    t0 = time.time()
    rcfg = RolloutConfig.from_train_config(cfg)
    split = getattr(policy, "split", None)
    # the frozen bottom's output, kept by the rollout: scoring runs only the top layers
    layer = None if split is None else boundary_layer(policy.lm, split.n_top)
    episodes = rollout(LMPolicy(policy.lm, tokenizer, rcfg, bottom_states_layer=layer),
                       tokenizer, seeds, make_env, rcfg,
                       progress="rollout" if cfg.progress else None)
    batch = score_episodes(policy, reference, tokenizer, episodes, seeds, cfg)
    batch.rollout_seconds = time.time() - t0 - batch.score_seconds
    return batch


def score_episodes(policy: PolicyWithValue, reference, tokenizer, episodes: list[Episode],
                   seeds: list[Any], cfg: TrainConfig) -> PPOBatch:
    """Score every token of played episodes: old log-probs and values (deriving each token's
    sampling support), and the reference's log-probs over the same supports. With
    ``policy.split`` the frozen bottom's output is the one the rollout kept
    (``gamerl.core.bottom_states``), else it runs here, once per scoring batch."""
    t0 = time.time()
    split = getattr(policy, "split", None)
    tb: TokenBatch = episodes_to_batch(episodes, tokenizer.pad_token_id).to(policy.device)
    sampling = Sampling.from_config(cfg)
    old_logprobs, old_values, ref_logprobs, supports, caches, last = [], [], [], [], [], []
    was_training = policy.training
    policy.eval()
    with torch.no_grad():
        for s in range(0, len(episodes), cfg.score_batch_size):
            rows = slice(s, s + cfg.score_batch_size)
            ids, am, m = tb.input_ids[rows], tb.attention_mask[rows], tb.mask[rows]
            kept = None if split is None else batch_states(episodes[rows], ids, am, m)
            old = forward_policy(policy, ids, am, sampling, mask=m, derive_support=True,
                                 trunk_input=kept)
            bottom = kept if kept is not None else old.trunk_cache
            old_logprobs.append(old.logprobs)
            old_values.append(old.values)
            last.append(old.last_values)
            supports.append(old.support)
            caches.append(bottom)
            ref_logprobs.append(reference_logprobs(reference, ids, am, sampling, mask=m,
                                                   support=old.support, trunk_input=bottom,
                                                   n_top=cfg.trainable_layers))
    forget(episodes)
    policy.train(was_training)
    support = torch.cat(supports) if supports[0] is not None else None
    truncated = torch.tensor([ep.context_exhausted for ep in episodes], device=policy.device)
    bootstrap = torch.where(truncated, torch.cat(last).float(), 0.0)
    return PPOBatch(
        episodes=episodes, input_ids=tb.input_ids, attention_mask=tb.attention_mask,
        mask=tb.mask, env_rewards=tb.rewards, gen_logprobs=tb.gen_logprobs,
        old_logprobs=torch.cat(old_logprobs).float(), old_values=torch.cat(old_values).float(),
        ref_logprobs=torch.cat(ref_logprobs).float(), support=support,
        support_index=None if support is None else support_rows(tb.mask),
        trunk_cache=torch.cat(caches) if caches[0] is not None else None,
        group_ids=group_ids(seeds).to(policy.device), bootstrap_values=bootstrap,
        score_seconds=time.time() - t0, dtype=unwrap_lm(policy.lm).dtype)


def support_rows(mask: torch.Tensor) -> torch.Tensor:
    """[B, T] long: each policy token's row in the packed supports (row-major order of the
    policy tokens, as ``forward_policy`` scores them), -1 on other tokens."""
    sel = mask.bool()
    index = torch.full(sel.shape, -1, dtype=torch.long, device=sel.device)
    index[sel] = torch.arange(int(sel.sum()), device=sel.device)
    return index


def group_ids(instances: list[Any]) -> torch.Tensor:
    """[B] long: equal ids for equal instances (GRPO's groups: the same game played again)."""
    keys = [json.dumps(inst, sort_keys=True) for inst in instances]
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return torch.tensor([index[k] for k in keys], dtype=torch.long)


# ----------------------------------------------------------------------------- self-check

# Mean |log-prob difference| per token that two passes of the SAME weights may show, by dtype:
# fp32 differs only in summation order (~1e-6 measured on tiny); bf16's 8-bit mantissa gives
# ~1e-2 between a KV-cached generate and a full forward.
LOGPROB_TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-6, torch.float16: 2e-2,
                     torch.bfloat16: 5e-2}


def check_logprobs(name: str, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor,
                   dtype: torch.dtype) -> dict[str, float]:
    """Compare two passes' log-probs on policy tokens; warn, with the numbers, past the dtype's
    tolerance. Returns ``check/<name>_mean_abs``, ``_max_abs`` and ``_mismatch`` (0 or 1)."""
    m = mask.bool()
    diff = (a[m] - b[m]).abs() if m.any() else torch.zeros(1)
    mean, worst = float(diff.mean()), float(diff.max())
    tol = LOGPROB_TOLERANCE.get(dtype, 5e-2)
    bad = not mean <= tol  # nan counts as a mismatch
    if bad:
        log.warning(
            "self-check %s: log-probs of the same weights differ by %.4g nats per token on "
            "average (max %.4g) over %d policy tokens; the %s tolerance is %.0e. PPO is not "
            "optimising the policy that sampled: check the sampling settings, dropout, and "
            "the tokens (no re-encoding) of this batch.", name, mean, worst, int(m.sum()),
            str(dtype).removeprefix("torch."), tol)
    return {f"check/{name}_mean_abs": mean, f"check/{name}_max_abs": worst,
            f"check/{name}_mismatch": float(bad)}


# ----------------------------------------------------------------------------- advantages


@torch.no_grad()
def compute_advantages(batch: PPOBatch, cfg: TrainConfig) -> dict[str, float]:
    """Fill ``batch.rewards/advantages/returns``; return statistics for the log.

    The estimator is ``cfg.estimator_name``'s (``ppo.ADVANTAGE_ESTIMATORS``): GAE per turn
    (gamma/lam between turns) or per token (verl's), with the KL penalty (k1, logp - ref_logp)
    in the reward when ``kl_in_reward``, then whitened over the batch's policy tokens; GRPO: each
    episode's scaled return against its group's, used AS IS (already normalised per group:
    whitening again would shift a tied group's zeros, see ``ppo.compute_grpo_advantages``)."""
    # ALGO LOGIC
    mask = batch.mask
    m = mask.bool()
    rewards = batch.env_rewards * cfg.reward_scale
    estimator = ppo.get_advantage_estimator(cfg.estimator_name)
    kl = None  # per-token KL(pi_old || pi_ref), computed once when the reward needs it
    if estimator.uses_critic and cfg.kl_in_reward and cfg.kl_coef:
        kl = ppo.kl_penalty(batch.old_logprobs, batch.ref_logprobs, "k1")
        rewards = rewards - cfg.kl_coef * torch.where(m, kl, torch.zeros_like(kl))
    advantages, returns = estimator.fn(rewards, batch.old_values, mask, batch.group_ids,
                                       cfg.gamma, cfg.lam, batch.bootstrap_values)
    raw = advantages
    if estimator.whiten:
        advantages = ppo.masked_whiten(advantages, mask)
    batch.rewards, batch.advantages, batch.returns = rewards, advantages, returns
    stats = {
        "advantage_mean_raw": float(ppo.masked_mean(raw, mask)),
        "return_mean": float(ppo.masked_mean(returns, mask)),
        "value_mean": float(ppo.masked_mean(batch.old_values, mask)),
        "explained_variance": (ppo.explained_variance(batch.old_values, returns, mask)
                               if estimator.uses_critic else math.nan),  # no critic: nothing
        **kl_stats(batch, cfg, kl),
    }
    return stats


def kl_stats(batch: PPOBatch, cfg: TrainConfig,
             kl: Optional[torch.Tensor] = None) -> dict[str, float]:
    """The batch's KL(pi_old || pi_ref) per policy token (k1's and k3's) and the self-check of
    the sampling-time log-probs against pi_old's: numbers that need both scored. ``kl``: the k1
    per-token values [B, T] when the caller has them already."""
    mask = batch.mask
    if kl is None:
        kl = ppo.kl_penalty(batch.old_logprobs, batch.ref_logprobs, "k1")
    return {
        "kl_ref": float(ppo.masked_mean(kl, mask)),
        "kl_ref_k3": float(ppo.masked_mean(ppo.kl_penalty(
            batch.old_logprobs, batch.ref_logprobs, "k3"), mask)),
        # sampling-time vs recomputed log-probs: the inference and training numerics agree?
        **check_logprobs("gen_vs_old", batch.gen_logprobs, batch.old_logprobs, mask, batch.dtype),
    }


# ----------------------------------------------------------------------------- the update


def ppo_loss(new, mb: dict[str, torch.Tensor], cfg: TrainConfig
             ) -> tuple[torch.Tensor, dict[str, Any]]:
    """The PPO objective on one micro-batch ``mb`` (``PPOBatch.rows``) given the policy's fresh
    pass ``new`` (log-probs, values, entropy: [B, T]); returns the loss to minimise and its
    parts (for the log).

    loss = clipped PPO policy loss (ppo.ppo_policy_loss, symmetric clip_range)
           - entropy_coef * entropy
           + vf_coef * clipped value loss             (GAE: the critic learns; GRPO has none)
           + kl_coef * KL(policy || reference)         (when the KL is a loss term, not a
                                                        reward penalty: kl_in_reward)

    Every term is a mean over the micro-batch's policy tokens (token-mean), so that
    ``micro_batch_weight`` makes the accumulated gradient the whole minibatch's for each."""
    # ALGO LOGIC
    use_critic = ppo.get_advantage_estimator(cfg.estimator_name).uses_critic
    m = mb["mask"]
    pg = ppo.ppo_policy_loss(new.logprobs, mb["old_logprobs"], mb["advantages"], m,
                             cfg.clip_range)
    v_loss, v_clip = ppo.ppo_value_loss(new.values, mb["old_values"], mb["returns"], m,
                                        cfg.value_clip_range)
    ent = ppo.masked_mean(new.entropy, m)
    loss = pg.loss - cfg.entropy_coef * ent
    if use_critic:
        loss = loss + cfg.vf_coef * v_loss
    kl_in_loss = cfg.kl_coef > 0 and not (cfg.kl_in_reward and use_critic)  # else logged only
    with torch.set_grad_enabled(kl_in_loss and torch.is_grad_enabled()):
        # k3 (verl's low_var_kl): >= 0 and low-variance; its gradient is that of KL(ref || pi).
        # Never k1 as a loss: its expected gradient is exactly 0, the leash would be noise.
        kl = ppo.masked_mean(ppo.kl_penalty(new.logprobs, mb["ref_logprobs"], "k3"), m)
    if kl_in_loss:
        loss = loss + cfg.kl_coef * kl
    return loss, {"policy_loss": pg.loss, "value_loss": v_loss, "entropy": ent,
                  "approx_kl": pg.approx_kl, "clip_fraction": pg.clip_fraction,
                  "ratio_mean": pg.ratio_mean, "value_clip_fraction": v_clip,
                  "kl_ref_update": kl}


def ppo_update(policy: PolicyWithValue, optimizer: torch.optim.Optimizer, batch: PPOBatch,
               cfg: TrainConfig) -> dict[str, float]:
    """``ppo_epochs`` x minibatches of clipped PPO on one batch. Returns averaged diagnostics,
    with the self-check of the first micro-batch (before any step the new log-probs must equal
    the old ones: ratio 1). Deterministic on the CPU (``deterministic_backward``)."""
    with deterministic_backward(policy.device):
        return _ppo_update(policy, optimizer, batch, cfg)


def _ppo_update(policy: PolicyWithValue, optimizer: torch.optim.Optimizer, batch: PPOBatch,
                cfg: TrainConfig) -> dict[str, float]:
    policy.train()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sampling = Sampling.from_config(cfg)
    # The entropy is always logged; it needs a graph only when the bonus uses it.
    entropy_grad = cfg.entropy_coef != 0
    stats: dict[str, list[float]] = defaultdict(list)
    checks: dict[str, float] = {}
    skipped, steps, tokens_seen = 0, 0, 0
    t0 = time.time()
    n = len(batch)
    for ppo_epoch in range(cfg.ppo_epochs):  # every pass: no early stop on the KL (target_kl)
        order = torch.randperm(n)
        for start in range(0, n, cfg.minibatch_size):
            rows = order[start:start + cfg.minibatch_size]
            mb_mask = batch.mask[rows]
            micro = cfg.micro_batch_size or len(rows)
            optimizer.zero_grad(set_to_none=True)
            finite = True
            for ms in range(0, len(rows), micro):
                mb_rows = rows[ms:ms + micro]
                mb = batch.rows(mb_rows)
                new = forward_policy(policy, mb["input_ids"], mb["attention_mask"], sampling,
                                     mask=mb["mask"], support=mb["support"], with_entropy=True,
                                     entropy_grad=entropy_grad, trunk_input=mb["trunk_cache"])
                if not checks:  # the first micro-batch, before any optimizer step: ratio 1?
                    checks = check_logprobs("first_ratio", new.logprobs.detach(),
                                            mb["old_logprobs"], mb["mask"], batch.dtype)
                loss, parts = ppo_loss(new, mb, cfg)  # ALGO LOGIC: the objective
                if not ppo.all_finite(loss):  # the NaN guard, part 1: never backprop a nan
                    finite = False
                    break
                (loss * micro_batch_weight(mb["mask"], mb_mask)).backward()
                tokens_seen += int(mb["attention_mask"].sum())
                for k, v in {**parts, "loss": loss}.items():
                    stats[k].append(float(v.detach()) if torch.is_tensor(v) else float(v))
            grad_norm = (float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
                         if finite else math.nan)
            if not finite or not math.isfinite(grad_norm):  # the NaN guard, part 2
                optimizer.zero_grad(set_to_none=True)
                skipped += 1
                log.warning("skipped update (PPO epoch %d, minibatch %d): non-finite %s; "
                            "parameters unchanged", ppo_epoch, start // cfg.minibatch_size,
                            "loss" if not finite else "gradient norm")
                continue
            optimizer.step()
            steps += 1
            stats["grad_norm"].append(grad_norm)
    seconds = time.time() - t0
    out = {k: float(np.nanmean(v)) for k, v in stats.items() if v}
    out.update(skipped_updates=skipped, optimizer_steps=steps, update_seconds=seconds,
               update_tokens_per_s=tokens_seen / max(seconds, 1e-9), **checks)
    return out


def micro_batch_weight(micro_mask: torch.Tensor, minibatch_mask: torch.Tensor) -> torch.Tensor:
    """A micro-batch's share of its minibatch's policy tokens: what its loss (a token-mean)
    is multiplied by so that the accumulated gradient is that of one loss over the whole
    minibatch."""
    return micro_mask.sum() / minibatch_mask.sum().clamp(min=1)


# ----------------------------------------------------------------------------- setup helpers


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextmanager
def deterministic_backward(device: torch.device):
    """Torch's deterministic algorithms for the duration, on the CPU (restored after).

    Why: with more than one thread some CPU kernels of the backward pass accumulate with atomic
    adds in the order the threads happen to run (``index_put_(accumulate=True)``: the backward
    of the gathers in the shared-prefix pass and the packed sampling supports), so two runs of
    one command parted in the last bits of the first update whenever another job was taking CPU
    time (issue 23; tests/test_determinism.py). Only the updates (PPO, the warm start) need it:
    the rollouts and scoring passes agreed, and deterministic mode roughly doubled the time of
    generation on the CPU. On a GPU it would cost speed and needs CUBLAS_WORKSPACE_CONFIG, so
    it is left to the user there."""
    if torch.device(device).type != "cpu":
        yield
        return
    was, warn_only = (torch.are_deterministic_algorithms_enabled(),
                      torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)


def resolve_dtype(cfg: TrainConfig) -> Optional[torch.dtype]:
    return {None: None, "float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[cfg.dtype]


def make_optimizer(policy: PolicyWithValue, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with two groups: the LM at ``lr`` and the value head at ``value_head_lr``."""
    head = list(policy.value_head.parameters())
    head_ids = {id(p) for p in head}
    lm = [p for p in policy.parameters() if id(p) not in head_ids and p.requires_grad]
    return torch.optim.AdamW([{"params": lm, "lr": cfg.lr},
                              {"params": head, "lr": cfg.value_head_lr}],
                             weight_decay=0.0)  # torch's AdamW decays by 0.01 unless told


def epoch_seeds(cfg: TrainConfig, epoch: int, stage: Optional[dict] = None,
                replay=None) -> list[Any]:
    """The training instances of an epoch: a pure function of (seed, epoch, curriculum stage,
    replay buffer), so a resumed run plays the same games. Seeds are drawn from the training
    range and turned into the task's instances (``Task.train_instances``: for OpenSpiel the
    stage's games and opponent); with failure replay ``replay_fraction`` of them are replaced
    by replayed failures; with GRPO each game is played group_size times."""
    rng = random.Random(f"{cfg.seed}:{epoch}")
    seeds = cfg.train_seeds()
    grpo = cfg.advantage_estimator == "grpo"
    n = cfg.episodes_per_epoch // cfg.group_size if grpo else cfg.episodes_per_epoch
    games = get_task(cfg.task).train_instances(
        cfg, [seeds[rng.randrange(len(seeds))] for _ in range(n)], stage)
    if replay is not None and cfg.replay_fraction > 0:
        games = replay.mix(games, cfg.replay_fraction, rng)
    if grpo:
        return [g for g in games for _ in range(cfg.group_size)]
    return games


def prefixed(section: str, stats: dict[str, Any]) -> dict[str, Any]:
    """``section/key`` for each key, except the self-check's ``check/...`` keys, which keep
    their own section (the tracker shows them together)."""
    return {(k if k.startswith("check/") else f"{section}/{k}"): v for k, v in stats.items()}


def scalars(metrics: dict[str, Any]) -> dict[str, Any]:
    """The numbers of an evaluation (its lists and per-game tables left out): what a scalar
    logger takes."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def without_lost(batch: PPOBatch) -> PPOBatch:
    """The batch without the episodes whose server session was lost (gamerl.core.sessions): they
    carry no loss already (mask 0), but GRPO's group baselines and the whitening must not see
    them either."""
    keep = [i for i, ep in enumerate(batch.episodes) if not ep.lost]
    if len(keep) == len(batch):
        return batch
    # every per-row tensor (PPOBatch.PER_ROW): trunk_cache too, or later rows would be updated
    # from another episode's frozen-layer states (shapes still match, nothing fails)
    return batch.select(torch.tensor(keep, dtype=torch.long, device=batch.input_ids.device))


__all__ = ["LOGPROB_TOLERANCE", "PPOBatch", "check_logprobs", "collect", "compute_advantages",
           "deterministic_backward", "epoch_seeds", "group_ids", "make_optimizer",
           "micro_batch_weight", "ppo_loss", "ppo_update", "prefixed", "resolve_dtype", "scalars",
           "seed_everything", "support_rows", "without_lost"]
