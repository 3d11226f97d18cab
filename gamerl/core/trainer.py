"""PPO for multi-turn games, in the style of CleanRL's ppo.py: one readable loop.

One epoch (``Trainer.train_epoch``) is three calls, each a plain function you can run by hand:

    batch = collect(policy, reference, tokenizer, seeds, make_env, cfg)   # play, then score
    adv_stats = compute_advantages(batch, cfg)                            # rewards -> advantages
    upd_stats = ppo_update(policy, optimizer, batch, cfg)                 # clipped PPO steps

``collect``: all episodes play in lockstep (rollout.py: one batched ``generate`` per turn); then
one no-grad forward pass of the policy gives the old log-probs and values, and one of the frozen
reference gives the reference log-probs, for every token. (The log-probs recorded while sampling
are kept as ``gen_logprobs`` and only compared: the ratio's denominator must come from the same
computation as its numerator, so the first minibatch sees a ratio of exactly 1.)

Alignment: every per-token tensor is ``[B, T]`` with index t = token t. ``logprobs[:, t]`` is
log pi(x_t | x_<t) (from the logits at t-1) and ``values[:, t]`` is V of the state before x_t
(the hidden state at t-1), so the action x_t and the value of the state it was taken in share
an index, which is what ``ppo.compute_gae`` expects. ``mask`` is 1 on policy tokens only.

``compute_advantages``: env rewards (on each turn's last policy token) x ``reward_scale``;
optionally minus ``kl_coef`` x KL(pi_old || pi_ref) on every policy token (the KL-in-reward way);
token-level GAE skipping environment tokens (``ppo.compute_gae``), or GRPO group advantages;
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
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import ppo
from ..runs.checkpoint import (STATE_FILE, CheckpointError, load_checkpoint_state, save_checkpoint,
                         set_rng_state)
from ..config.train_config import TrainConfig, default_run_dir
from .evaluate import eval_instances, evaluate, format_table, local_env_factory, reference_rows
from ..games.registry import get_task
from .curriculum import Curriculum
from ..models.lora import LoraSettings, adapter_disabled, apply_lora, is_peft, load_4bit, load_lora_policy
from ..models.loading import (PolicyWithValue, SplitTrunk, freeze_below_top_layers, lm_head, lm_trunk,
                     load_policy, load_reference, positions_from_mask, unwrap_lm)
from .replay import FailureReplay
from ..runs.rundir import RunLock, open_run
from ..tracking.samples import episode_table, sample_rows
from .scoring import Sampling, score_tokens
from .rollout import (Episode, LMPolicy, RolloutConfig, TokenBatch, episodes_to_batch, rollout,
                      summarize)
from ..tracking.tracker import EPISODES_JSONL, METRICS_JSONL, Tracker, read_jsonl, save_figures, truncate_jsonl
from .warmstart import cached_warm_start, warm_start

log = logging.getLogger("gamerl")


# ----------------------------------------------------------------------------- forward passes


@dataclass
class PolicyPass:
    """What one forward pass of the policy gives, aligned as the module docstring says."""

    logprobs: torch.Tensor  # [B, T] log pi(token t) of the sampling distribution; 0 off-mask
    values: torch.Tensor  # [B, T] V(state before token t)
    entropy: Optional[torch.Tensor] = None  # [B, T] of the sampling distribution at t
    support: Optional[torch.Tensor] = None  # [N, V/8] packed supports (derive_support=True)
    trunk_cache: Optional[torch.Tensor] = None  # [B, T, H] the frozen bottom's output (split)


def _policy_positions(input_ids: torch.Tensor, mask: Optional[torch.Tensor],
                      attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, T-1] bool: the positions t-1 whose next token t is scored (policy tokens only)."""
    return (mask if mask is not None else attention_mask)[:, 1:].bool()


def _scatter(sel: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """N per-token values back to [B, T] (0 elsewhere, column 0 included); keeps the graph."""
    zeros = torch.zeros(sel.shape, dtype=torch.float32, device=sel.device)
    return F.pad(zeros.masked_scatter(sel, values), (1, 0))


def forward_policy(policy: PolicyWithValue, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor, sampling: Sampling, *,
                   mask: Optional[torch.Tensor] = None, support: Optional[torch.Tensor] = None,
                   derive_support: bool = False, with_entropy: bool = False,
                   entropy_grad: bool = False,
                   trunk_input: Optional[torch.Tensor] = None) -> PolicyPass:
    """Log-probs, values (and entropy) of every policy token, as the rollout sampled them.

    The trunk runs over the whole sequence; the LM head and the fp32 log-softmax only at the
    positions whose next token is a policy token (``mask``; all tokens when None), in chunks,
    under ``sampling``'s temperature and top-k/top-p support (``gamerl.core.scoring``): the old pass
    derives the supports (``derive_support``), the update passes them back (``support``, the
    ``[N, V/8]`` rows of exactly these positions, in row-major order). In multi-turn games most
    tokens are prompt and feedback, so this skips most of the ``[B, T, vocab]`` logits.

    With ``policy.split`` (``trainable_layers``: only the top layers train) the frozen bottom's
    output is returned as ``trunk_cache`` when it is computed here, and ``trunk_input`` (that
    cache) skips the bottom entirely: the update passes run the top layers only."""
    split: Optional[SplitTrunk] = getattr(policy, "split", None)
    cache = None
    if split is None:
        hidden = lm_trunk(policy.lm)(input_ids=input_ids, attention_mask=attention_mask,
                                     position_ids=positions_from_mask(attention_mask),
                                     use_cache=False).last_hidden_state
    else:
        if trunk_input is None:
            with torch.no_grad():  # frozen: no graph below the trained layers
                trunk_input = cache = split.bottom_states(input_ids, attention_mask)
        hidden = split.top_states(trunk_input, attention_mask)
    values = F.pad(policy.value_head(hidden)[:, :-1], (1, 0))  # V(state before token t)
    sel = _policy_positions(input_ids, mask, attention_mask)
    scores = score_tokens(hidden[:, :-1][sel], lm_head(policy.lm), input_ids[:, 1:][sel],
                          sampling, support=support, derive_support=derive_support,
                          with_entropy=with_entropy, entropy_grad=entropy_grad)
    entropy = _scatter(sel, scores.entropy) if with_entropy else None
    return PolicyPass(_scatter(sel, scores.logprobs), values, entropy, scores.support, cache)


@torch.no_grad()
def reference_logprobs(ref_lm, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       sampling: Sampling, mask: Optional[torch.Tensor] = None,
                       support: Optional[torch.Tensor] = None,
                       trunk_input: Optional[torch.Tensor] = None,
                       n_top: Optional[int] = None) -> torch.Tensor:
    """log pi_ref(token t) over the same supports as the policy's (0 off-mask).

    With LoRA the reference is the policy's own (peft) model with its adapters switched off:
    the frozen base weights, with no second copy in memory. With ``trunk_input`` (the policy's
    frozen bottom output, which the reference shares) only the reference's top ``n_top``
    layers run."""
    if is_peft(ref_lm):
        with adapter_disabled(ref_lm):
            return reference_logprobs(unwrap_lm(ref_lm), input_ids, attention_mask, sampling,
                                      mask, support, trunk_input, n_top)
    if trunk_input is None:
        hidden = lm_trunk(ref_lm)(input_ids=input_ids, attention_mask=attention_mask,
                                  position_ids=positions_from_mask(attention_mask),
                                  use_cache=False).last_hidden_state
    else:
        hidden = _split_of(ref_lm, n_top).top_states(trunk_input, attention_mask)
    hidden = hidden[:, :-1]
    sel = _policy_positions(input_ids, mask, attention_mask)
    scores = score_tokens(hidden[sel], lm_head(ref_lm), input_ids[:, 1:][sel], sampling,
                          support=support)
    return _scatter(sel, scores.logprobs)


def _split_of(lm, n_top: int) -> SplitTrunk:
    """The reference's SplitTrunk, made once (views only: no weights are copied)."""
    split = getattr(lm, "_gamerl_split", None)
    if split is None or split.n_top != n_top:
        split = SplitTrunk.of(lm, n_top)
        lm._gamerl_split = split
    return split


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

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx: torch.Tensor) -> dict[str, Any]:
        """The tensors of rows ``idx``, cut to the longest of them (right padding is waste),
        with their policy tokens' supports."""
        width = int(self.attention_mask[idx].sum(-1).max())
        names = ("input_ids", "attention_mask", "mask", "old_logprobs", "old_values",
                 "ref_logprobs", "advantages", "returns")
        out: dict[str, Any] = {n: getattr(self, n)[idx, :width] for n in names}
        out["support"] = None
        out["trunk_cache"] = None if self.trunk_cache is None else self.trunk_cache[idx, :width]
        if self.support is not None:
            index = self.support_index[idx, :width][:, 1:]
            out["support"] = self.support[index[out["mask"][:, 1:].bool()]]
        return out


def collect(policy: PolicyWithValue, reference, tokenizer, seeds: list[Any],
            make_env: Callable[..., Any], cfg: TrainConfig) -> PPOBatch:
    """Play one episode per instance (seed) with the current policy, then score every token:
    old log-probs and values (deriving each token's sampling support), and the reference's
    log-probs over the same supports."""
    t0 = time.time()
    rcfg = RolloutConfig.from_train_config(cfg)
    episodes = rollout(LMPolicy(policy.lm, tokenizer, rcfg), tokenizer, seeds, make_env, rcfg,
                       progress="rollout" if cfg.progress else None)
    t1 = time.time()
    tb: TokenBatch = episodes_to_batch(episodes, tokenizer.pad_token_id).to(policy.device)
    sampling = Sampling.from_config(cfg)
    old_logprobs, old_values, ref_logprobs, supports, caches = [], [], [], [], []
    was_training = policy.training
    policy.eval()
    with torch.no_grad():
        for s in range(0, len(episodes), cfg.score_batch_size):
            rows = slice(s, s + cfg.score_batch_size)
            ids, am, m = tb.input_ids[rows], tb.attention_mask[rows], tb.mask[rows]
            old = forward_policy(policy, ids, am, sampling, mask=m, derive_support=True)
            old_logprobs.append(old.logprobs)
            old_values.append(old.values)
            supports.append(old.support)
            caches.append(old.trunk_cache)
            ref_logprobs.append(reference_logprobs(reference, ids, am, sampling, mask=m,
                                                   support=old.support,
                                                   trunk_input=old.trunk_cache,
                                                   n_top=cfg.trainable_layers))
    policy.train(was_training)
    support = torch.cat(supports) if supports[0] is not None else None
    return PPOBatch(
        episodes=episodes, input_ids=tb.input_ids, attention_mask=tb.attention_mask,
        mask=tb.mask, env_rewards=tb.rewards, gen_logprobs=tb.gen_logprobs,
        old_logprobs=torch.cat(old_logprobs).float(), old_values=torch.cat(old_values).float(),
        ref_logprobs=torch.cat(ref_logprobs).float(), support=support,
        support_index=None if support is None else support_rows(tb.mask),
        trunk_cache=torch.cat(caches) if caches[0] is not None else None,
        group_ids=group_ids(seeds).to(policy.device),
        rollout_seconds=t1 - t0, score_seconds=time.time() - t1, dtype=unwrap_lm(policy.lm).dtype)


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

    GAE (``cfg.discount_per`` "turn": gamma/lam between turns, or "token": verl's per-token
    GAE), with the KL penalty (``kl_estimator``) in the reward when ``kl_in_reward``; then the
    advantages are whitened over the batch's policy tokens. GRPO: each episode's scaled return
    against its group's, used AS IS (already normalised per group: whitening again would shift
    a tied group's zeros, see ``ppo.compute_grpo_advantages``)."""
    mask = batch.mask
    m = mask.bool()
    kl = ppo.kl_penalty(batch.old_logprobs, batch.ref_logprobs, cfg.kl_estimator)
    kl = torch.where(m, kl, torch.zeros_like(kl))
    rewards = batch.env_rewards * cfg.reward_scale
    gae = cfg.advantage_estimator == "gae"
    if gae and cfg.kl_in_reward and cfg.kl_coef:
        rewards = rewards - cfg.kl_coef * kl  # on policy tokens only (kl is 0 elsewhere)
    if gae:
        estimator = ppo.compute_turn_gae if cfg.discount_per == "turn" else ppo.compute_gae
        advantages, returns = estimator(rewards, batch.old_values, mask, cfg.gamma, cfg.lam)
        raw = advantages
        if cfg.whiten_advantages:
            advantages = ppo.masked_whiten(advantages, mask)
    else:  # GRPO: the episode's (scaled) return against the other plays of the same game
        scores = rewards.sum(-1)
        advantages = raw = ppo.compute_grpo_advantages(scores, batch.group_ids, mask)
        returns = torch.where(m, advantages + batch.old_values, torch.zeros_like(advantages))
    batch.rewards, batch.advantages, batch.returns = rewards, advantages, returns
    return {
        "kl_ref": float(ppo.masked_mean(kl, mask)),  # KL(pi_old || pi_ref) per policy token
        "kl_ref_k3": float(ppo.masked_mean(ppo.kl_penalty(batch.old_logprobs, batch.ref_logprobs, "k3"), mask)),
        "advantage_mean_raw": float(ppo.masked_mean(raw, mask)),
        "return_mean": float(ppo.masked_mean(returns, mask)),
        "value_mean": float(ppo.masked_mean(batch.old_values, mask)),
        "explained_variance": ppo.explained_variance(batch.old_values, returns, mask),
        # sampling-time vs recomputed log-probs: the inference and training numerics agree?
        **check_logprobs("gen_vs_old", batch.gen_logprobs, batch.old_logprobs, mask, batch.dtype),
    }


# ----------------------------------------------------------------------------- the update


def ppo_update(policy: PolicyWithValue, optimizer: torch.optim.Optimizer, batch: PPOBatch,
               cfg: TrainConfig) -> dict[str, float]:
    """``ppo_epochs`` x minibatches of clipped PPO on one batch. Returns averaged diagnostics,
    with the self-check of the first micro-batch (before any step the new log-probs must equal
    the old ones: ratio 1)."""
    policy.train()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    use_critic = cfg.advantage_estimator == "gae"
    kl_loss = cfg.kl_coef > 0 and not (cfg.kl_in_reward and use_critic)
    sampling = Sampling.from_config(cfg)
    # The entropy is always logged; it needs a graph only when the bonus uses it.
    entropy_grad = cfg.entropy_coef != 0
    stats: dict[str, list[float]] = defaultdict(list)
    checks: dict[str, float] = {}
    skipped, steps, tokens_seen = 0, 0, 0
    t0 = time.time()
    n = len(batch)
    for ppo_epoch in range(cfg.ppo_epochs):
        epoch_kl = []
        order = torch.randperm(n)
        for start in range(0, n, cfg.minibatch_size):
            rows = order[start:start + cfg.minibatch_size]
            mb_tokens = batch.mask[rows].sum().clamp(min=1)
            micro = cfg.micro_batch_size or len(rows)
            optimizer.zero_grad(set_to_none=True)
            finite = True
            for ms in range(0, len(rows), micro):
                mb = batch.rows(rows[ms:ms + micro])
                new = forward_policy(policy, mb["input_ids"], mb["attention_mask"], sampling,
                                     mask=mb["mask"], support=mb["support"], with_entropy=True,
                                     entropy_grad=entropy_grad, trunk_input=mb["trunk_cache"])
                if not checks:  # the first micro-batch, before any optimizer step
                    checks = check_logprobs("first_ratio", new.logprobs.detach(),
                                            mb["old_logprobs"], mb["mask"], batch.dtype)
                pg = ppo.ppo_policy_loss(new.logprobs, mb["old_logprobs"], mb["advantages"],
                                         mb["mask"], cfg.clip_range, cfg.clip_range_high,
                                         cfg.loss_agg, cfg.clip_ratio_c)
                v_loss, v_clip = ppo.ppo_value_loss(new.values, mb["old_values"], mb["returns"],
                                                    mb["mask"], cfg.value_clip_range)
                ent = ppo.masked_mean(new.entropy, mb["mask"])
                loss = pg.loss - cfg.entropy_coef * ent
                if use_critic:
                    loss = loss + cfg.vf_coef * v_loss
                if kl_loss:  # an estimator whose gradient is a KL's (validate refuses k1)
                    kl = ppo.masked_mean(ppo.kl_penalty(new.logprobs, mb["ref_logprobs"],
                                                        cfg.kl_loss_estimator), mb["mask"])
                    loss = loss + cfg.kl_coef * kl
                else:  # logged only
                    with torch.no_grad():
                        kl = ppo.masked_mean(ppo.kl_penalty(new.logprobs, mb["ref_logprobs"],
                                                            "k3"), mb["mask"])
                if not ppo.all_finite(loss):  # the NaN guard, part 1: never backprop a nan
                    finite = False
                    break
                # Weight each micro-batch by its share of the minibatch, so the accumulated
                # gradient is that of one loss over the whole minibatch (token- or episode-mean).
                weight = (mb["mask"].sum() / mb_tokens if cfg.loss_agg == "token-mean"
                          else torch.tensor(len(mb["input_ids"]) / len(rows)))
                (loss * weight).backward()
                tokens_seen += int(mb["attention_mask"].sum())
                for k, v in (("policy_loss", pg.loss), ("value_loss", v_loss), ("entropy", ent),
                             ("approx_kl", pg.approx_kl), ("clip_fraction", pg.clip_fraction),
                             ("ratio_mean", pg.ratio_mean), ("value_clip_fraction", v_clip),
                             ("kl_ref_update", kl), ("loss", loss)):
                    stats[k].append(float(v.detach()) if torch.is_tensor(v) else float(v))
                epoch_kl.append(float(pg.approx_kl))
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
        # CleanRL's early stop: the policy moved too far from the one that collected the data.
        if cfg.target_kl is not None and epoch_kl and np.mean(epoch_kl) > cfg.target_kl:
            stats["early_stop_epoch"].append(ppo_epoch)
            break
    seconds = time.time() - t0
    out = {k: float(np.nanmean(v)) for k, v in stats.items() if v}
    out.update(skipped_updates=skipped, optimizer_steps=steps, update_seconds=seconds,
               update_tokens_per_s=tokens_seen / max(seconds, 1e-9), **checks)
    return out


# ----------------------------------------------------------------------------- setup helpers


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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
                             weight_decay=cfg.weight_decay, eps=cfg.adam_eps)


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
    them either. Their mask is 0, so they own no packed support rows: the rows keep their order."""
    keep = [i for i, ep in enumerate(batch.episodes) if not ep.lost]
    if len(keep) == len(batch):
        return batch
    idx = torch.tensor(keep, dtype=torch.long, device=batch.input_ids.device)
    rows = {name: getattr(batch, name)[idx] for name in (
        "input_ids", "attention_mask", "mask", "env_rewards", "gen_logprobs", "old_logprobs",
        "old_values", "ref_logprobs", "group_ids")}
    index = support_rows(rows["mask"]) if batch.support is not None else None
    return replace(batch, episodes=[batch.episodes[i] for i in keep], support_index=index,
                   **rows)


# ----------------------------------------------------------------------------- the trainer


@dataclass
class TrainerState:
    epoch: int = 0  # finished epochs (the resume point)
    best_reward: float = -math.inf
    best_epoch: int = -1
    skipped_updates: int = 0
    wandb_id: Optional[str] = None
    curriculum: Optional[dict] = None  # Curriculum.state_dict()
    replay: Optional[dict] = None  # FailureReplay.state_dict()


class Trainer:
    """Composes warm start, baseline evaluation, the PPO loop, checkpoints, logging and figures.

        trainer = Trainer(get_config("tiny"), run_dir="checkpoints/demo")
        summary = trainer.train()            # baseline eval, epochs, final eval, summary.json

    ``resume=True`` continues from ``run_dir/last`` (model, value head, optimizer, RNG, counters)
    with ``cfg`` as given (the CLI passes the run's own config.json plus explicit overrides, such
    as more epochs); fields that differ from the checkpoint's config are logged. The Trainer
    holds the run directory (a lock) until ``train()`` ends or ``close()``; it refuses, before
    writing anything, a directory in use, a fresh start in a directory that holds a run, and a
    resume it cannot continue exactly (gamerl.runs.rundir).
    """

    def __init__(self, cfg: TrainConfig, run_dir: str | Path | None = None, *, resume: bool = False,
                 make_env: Optional[Callable[[], Any]] = None):
        # transformers draws a progress bar for every save/load; with a checkpoint per epoch they
        # would bury our own bars (tqdm, per epoch) and the log.
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()

        self.cfg = cfg
        self.task = get_task(cfg.task)
        self.run_dir = Path(run_dir or cfg.out_dir or default_run_dir(cfg))
        # One writer per run directory, taken before anything in it is read or written.
        self._lock = RunLock(self.run_dir)
        try:
            self._open(resume, make_env)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, resume: bool, make_env: Optional[Callable[[], Any]]) -> None:
        """Refuse or recover (gamerl.runs.rundir.open_run), then load the models and the state."""
        cfg = self.cfg
        last = open_run(self.run_dir, resume)
        # Everything of last/ that is not a model, read now: a refusal must come before any
        # write (config.json is written after the models load, for a resumed run).
        saved = load_checkpoint_state(last, verify=False) if last is not None else None
        if resume and last is None:
            print(f"resuming {self.run_dir} before its first PPO checkpoint: the warm start and "
                  "baseline continue from what was saved", flush=True)
        self.make_env = make_env or local_env_factory(cfg)
        self.state = TrainerState()
        # The warm start is a checkpoint of this run too: check it before writing anything.
        init, self.warmstart_stats = cfg.model, None
        ws_dir = self.run_dir / "warmstart"
        if cfg.warmstart:
            self.warmstart_stats = cached_warm_start(cfg, ws_dir)
            if self.warmstart_stats is None and last is not None:
                raise CheckpointError(
                    f"--resume refused, nothing was changed: {ws_dir} is missing or was made "
                    "with other warm-start settings, and last/ was trained from it (it is the "
                    "KL reference, and the base of LoRA adapters)")
        if last is None:  # first: a warm start killed now resumes with these settings
            cfg.save(self.run_dir / "config.json")
        seed_everything(cfg.seed)
        device = torch.device(cfg.device) if cfg.device else None
        dtype = resolve_dtype(cfg)

        # The initial policy: the warm-started model (cached in the run dir) or the model itself.
        if cfg.warmstart:
            if self.warmstart_stats is None:  # continues from warmstart_progress/ if killed
                lm, tok = load_policy(cfg.model, device=device, dtype=dtype,
                                      attn_implementation=cfg.attn_implementation)
                self.warmstart_stats = warm_start(lm, tok, cfg, ws_dir, progress=cfg.progress)
                del lm
            init = str(ws_dir)
        self.base_model = init  # what LoRA adapters sit on (and merge into)
        if cfg.lora:
            self.policy, self.tokenizer = self._lora_policy(init, last, device, dtype)
            # The reference is the same model with the adapters off (reference_logprobs).
            self.reference = self.policy.lm
        else:
            lm, self.tokenizer = load_policy(init, device=device, dtype=dtype,
                                             gradient_checkpointing=cfg.gradient_checkpointing,
                                             attn_implementation=cfg.attn_implementation)
            # The reference is the policy PPO starts from, frozen: KL measures drift from it.
            self.reference = load_reference(lm)
            if last is None:
                self.policy = PolicyWithValue(lm)
            else:
                del lm
                self.policy = PolicyWithValue.load(last, device=self.reference.device,
                                                   dtype=self.reference.dtype,
                                                   attn_implementation=cfg.attn_implementation)
                if cfg.gradient_checkpointing:
                    self.policy.lm.gradient_checkpointing_enable(
                        gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.trainable_layers:  # the top layers train; the frozen bottom runs once an epoch
            freeze_below_top_layers(self.policy.lm, cfg.trainable_layers)
            self.policy.split = SplitTrunk.of(self.policy.lm, cfg.trainable_layers)
        self.optimizer = make_optimizer(self.policy, cfg)
        # What to play: the curriculum's stage (OpenSpiel) and replayed failures.
        self.curriculum = (Curriculum.from_dict(cfg.curriculum, cfg.curriculum_window)
                           if cfg.curriculum else None)
        self.replay = FailureReplay(cfg.replay_capacity) if cfg.replay_fraction > 0 else None

        if last is not None:
            self._restore(last, saved)
            cfg.save(self.run_dir / "config.json")
        baseline_file = self.run_dir / "baseline.json"
        self.baseline = json.loads(baseline_file.read_text()) if baseline_file.exists() else None
        self.tracker = Tracker(self.run_dir, cfg.to_dict(), mode=cfg.wandb_mode,
                               project=cfg.wandb_project, run_id=self.state.wandb_id,
                               name=self.run_dir.name)
        self.state.wandb_id = self.tracker.run_id

    def _restore(self, last: Path, saved: dict[str, Any]) -> None:
        """Optimizer, counters, curriculum, replay buffer and RNG from ``last`` (checked by
        open_run, read by load_checkpoint_state); the records of epochs after it are dropped
        (the kill interrupted them)."""
        cfg = self.cfg
        changed = {k: (v, getattr(cfg, k)) for k, v in saved["train_config"].items()
                   if hasattr(cfg, k) and getattr(cfg, k) != v}
        if changed:
            log.info("resume: config differs from the checkpoint's: %s", changed)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.state = TrainerState(**{k: v for k, v in saved["state"].items()
                                     if k in TrainerState.__dataclass_fields__})
        # best/ can be newer and better than last/ (save_every > 1, or a kill between the two
        # saves of an epoch): compare against it, or the next epoch overwrites a better model.
        best = self.run_dir / "best"  # checked by open_run
        if best.exists():
            best_state = json.loads((best / STATE_FILE).read_text())
            if best_state.get("best_reward", -math.inf) > self.state.best_reward:
                self.state.best_reward = best_state["best_reward"]
                self.state.best_epoch = best_state.get("best_epoch", self.state.best_epoch)
        if self.curriculum is not None and self.state.curriculum:
            self.curriculum.load_state_dict(self.state.curriculum)
        if self.replay is not None and self.state.replay:
            self.replay.load_state_dict(self.state.replay)
        set_rng_state(saved["rng"])
        for name in (METRICS_JSONL, EPISODES_JSONL):  # forget epochs the kill interrupted
            truncate_jsonl(self.run_dir / name, self.state.epoch - 1)
        print(f"resumed from {last}: continuing at epoch {self.state.epoch} of {cfg.epochs}",
              flush=True)

    def close(self) -> None:
        """Finish the logs and let go of the run directory (train() does this when it ends)."""
        tracker = getattr(self, "tracker", None)
        if tracker is not None:
            tracker.finish()
        self._lock.release()

    def _lora_policy(self, init: str, last: Optional[Path], device, dtype):
        """A LoRA policy on ``init``: fresh adapters, or the checkpoint's (resume). 4-bit base
        weights with ``load_in_4bit`` (CUDA + bitsandbytes; gamerl.models.lora says so otherwise)."""
        cfg = self.cfg
        if last is not None:
            policy, tok = load_lora_policy(init, last, trainable=True, device=device, dtype=dtype)
        else:
            if cfg.load_in_4bit:
                lm, tok = load_4bit(init, gradient_checkpointing=cfg.gradient_checkpointing,
                                    attn_implementation=cfg.attn_implementation)
            else:
                lm, tok = load_policy(init, device=device, dtype=dtype,
                                      gradient_checkpointing=cfg.gradient_checkpointing,
                                      attn_implementation=cfg.attn_implementation)
            settings = LoraSettings.from_dict(dict(
                rank=cfg.lora_rank, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
                target_modules=cfg.lora_target_modules))
            policy = PolicyWithValue(apply_lora(lm, settings))
        return policy, tok

    def stage(self) -> Optional[dict]:
        """The curriculum's current stage as train_instances takes it (None: no curriculum)."""
        if self.curriculum is None:
            return None
        st = self.curriculum.stage
        return {"name": st.name, "games": list(st.games), "opponent": st.opponent}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, n: Optional[int] = None, greedy: bool = False,
                 name: Optional[str] = None) -> dict[str, Any]:
        """Held-out evaluation. With ``name``, a table of sample episodes (different games,
        mixed outcomes: gamerl.tracking.samples) goes to ``RUN/samples_<name>.md``: what the policy
        actually played, not only its averages."""
        metrics, episodes = evaluate(self.policy.lm, self.tokenizer, eval_instances(self.cfg, n),
                                     self.cfg, greedy=greedy, make_env=self.make_env,
                                     sample_seed=self.cfg.seed + 1234, return_episodes=True,
                                     progress=f"evaluating ({name or 'held-out'})"
                                     if self.cfg.progress else None)
        if name is not None:
            played = [ep for ep in episodes if not ep.lost]
            table = episode_table(played, self.cfg.task)
            (self.run_dir / f"samples_{name}.md").write_text(
                f"# Sample held-out episodes: {name}\n\n{table}\n")
            # the same episodes (and the model's own words) in wandb / TensorBoard
            self.tracker.log_table(name, *sample_rows(played, self.cfg.task, with_answers=True),
                                   step=self._eval_step(name))
        return metrics

    def epoch_line(self, epoch: int, metrics: dict[str, Any]) -> str:
        """``epoch 3/30: reward 8.34  rules satisfied 4.12  success 41%  KL(k3) 0.038 ...``:
        the epoch's training batch (and held-out numbers when it was evaluated)."""
        parts = [f"epoch {epoch + 1}/{self.cfg.epochs}:",
                 f"reward {metrics['rollout/reward']:.2f}"]
        parts += [f"{k.replace('_', ' ')} {metrics[f'rollout/{k}']:.2f}"
                  for k in self.task.headline if f"rollout/{k}" in metrics]
        parts += [f"success {metrics['rollout/success_rate']:.0%}",
                  f"KL(k3) {metrics.get('adv/kl_ref_k3', math.nan):.3f}",
                  f"clip {metrics.get('update/clip_fraction', math.nan):.2f}",
                  f"EV {metrics.get('adv/explained_variance', math.nan):.2f}"]
        if "eval/reward" in metrics:
            parts.append(f"| held-out reward {metrics['eval/reward']:.2f}")
        seconds = sum(metrics.get(k, 0.0) for k in ("perf/rollout_seconds", "perf/score_seconds",
                                                    "update/update_seconds"))
        parts.append(f"({seconds:.0f}s)")
        return "  ".join(parts)

    def _eval_step(self, name: str) -> int:
        """The tracker step an evaluation's records go under (steps only grow, as wandb needs):
        the baseline at 0, a mid-training one with its epoch's metrics, the final one after."""
        if name == "baseline":
            return 0
        return self.state.epoch + 1 if name == "final" else self.state.epoch

    # ------------------------------------------------------------------ one epoch
    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """Collect, compute advantages, update: the PPO loop body."""
        cfg = self.cfg
        instances = epoch_seeds(cfg, epoch, self.stage(), self.replay)
        batch = collect(self.policy, self.reference, self.tokenizer, instances, self.make_env, cfg)
        episodes = batch.episodes  # with the lost ones, which the log counts
        batch = without_lost(batch)
        if len(batch):
            adv_stats = compute_advantages(batch, cfg)
            upd_stats = ppo_update(self.policy, self.optimizer, batch, cfg)
        else:  # the server lost every session: nothing to learn from, but the run goes on
            log.warning("epoch %d: every episode lost its server session; no update", epoch)
            adv_stats = {"kl_ref": math.nan}
            upd_stats = {"skipped_updates": 0, "optimizer_steps": 0}
        extra = self.after_epoch(batch.episodes)

        roll = summarize(episodes, cfg)
        if not len(batch):
            roll["reward"] = math.nan  # no result: never a "best" epoch
        policy_tokens = float(batch.mask.sum())
        metrics = {"kind": "epoch", "epoch": epoch,
                   **{f"rollout/{k}": v for k, v in roll.items()},
                   **prefixed("adv", adv_stats), **prefixed("update", upd_stats),
                   "perf/rollout_seconds": batch.rollout_seconds,
                   "perf/rollout_tokens_per_s": policy_tokens / max(batch.rollout_seconds, 1e-9),
                   "perf/score_seconds": batch.score_seconds, **extra}
        self.tracker.log_episodes([ep.record() for ep in episodes], epoch)
        return metrics

    def after_epoch(self, episodes: list[Episode]) -> dict[str, Any]:
        """Feed the epoch's results to the failure replay (episodes that failed or went badly,
        with the task's badness as priority) and the curriculum (successes, in order; a stage
        change is announced). Returns their numbers for the log."""
        out: dict[str, Any] = {}
        if self.replay is not None:
            for ep in episodes:
                badness = self.task.badness(ep, self.cfg)
                if not ep.success or badness >= 0.5:
                    self.replay.add(ep.instance, badness)
            out.update(self.replay.metrics())
        if self.curriculum is not None:
            announcement = self.curriculum.update([ep.success for ep in episodes])
            if announcement:
                tqdm.write(announcement)
            out.update(self.curriculum.metrics())
            out["curriculum/stage_name"] = self.curriculum.stage.name
        return out

    # ------------------------------------------------------------------ checkpoints
    def save(self, name: str, metrics: Optional[dict[str, Any]] = None) -> Path:
        if not self._lock.held:  # another process may own the directory by now
            raise RuntimeError(f"{self.run_dir} was released (train() ended or close() was "
                               "called): this Trainer no longer writes there")
        if self.curriculum is not None:
            self.state.curriculum = self.curriculum.state_dict()
        if self.replay is not None:
            self.state.replay = self.replay.state_dict()
        return save_checkpoint(self.run_dir / name, self.policy, self.tokenizer, self.optimizer,
                               asdict(self.state), self.cfg.to_dict(), metrics)

    # ------------------------------------------------------------------ the whole run
    def train(self) -> dict[str, Any]:
        """Baseline, epochs, final evaluation, summary.json; lets go of the run directory when it
        ends, however it ends."""
        try:
            return self._train()
        finally:
            self.close()

    def _train(self) -> dict[str, Any]:
        cfg, t_start = self.cfg, time.time()
        if self.baseline is None:  # measured once, after the warm start and before any PPO
            self.baseline = self.evaluate(name="baseline")
            (self.run_dir / "baseline.json").write_text(json.dumps(self.baseline, indent=2) + "\n")
            self.tracker.log({"kind": "eval", "epoch": -1, "name": "baseline",
                              **scalars(self.baseline)},
                             step=0)
        bar = tqdm(range(self.state.epoch, cfg.epochs), desc="PPO", disable=not cfg.progress,
                   initial=self.state.epoch, total=cfg.epochs)
        for epoch in bar:
            metrics = self.train_epoch(epoch)
            self.state.epoch = epoch + 1
            self.state.skipped_updates += int(metrics["update/skipped_updates"])
            metrics["update/skipped_updates_total"] = self.state.skipped_updates
            if cfg.eval_every and (epoch + 1) % cfg.eval_every == 0 and epoch + 1 < cfg.epochs:
                ev = self.evaluate(name=f"epoch{epoch + 1}")
                metrics.update({f"eval/{k}": v for k, v in scalars(ev).items()})
            # best/: the highest held-out reward when evaluating during training, else the
            # highest training-batch reward (free, noisier).
            score = metrics.get("eval/reward", metrics["rollout/reward"])
            self.tracker.log(metrics, step=epoch + 1)
            if score > self.state.best_reward:
                self.state.best_reward, self.state.best_epoch = score, epoch
                self.save("best", metrics)
            if (epoch + 1) % cfg.save_every == 0 or epoch + 1 == cfg.epochs:
                self.save("last", metrics)
            bar.set_postfix(reward=f"{metrics['rollout/reward']:.2f}",
                            **{k.split("_")[0]: f"{metrics[f'rollout/{k}']:.2f}"
                               for k in self.task.headline if f"rollout/{k}" in metrics},
                            success=f"{metrics['rollout/success_rate']:.0%}",
                            kl_k3=f"{metrics.get('adv/kl_ref_k3', math.nan):.3f}")
            # one line per epoch whatever the bars do: a log file of a --no-progress run reads
            tqdm.write(self.epoch_line(epoch, metrics))

        final = self.evaluate(name="final")
        refs = reference_rows(self.tokenizer, eval_instances(cfg), cfg, self.make_env)
        rows = {"baseline": self.baseline, "final": final, **refs}
        summary = {"config": cfg.to_dict(), "run_dir": str(self.run_dir),
                   "baseline": self.baseline, "final": final, **refs,
                   "references": list(refs), "eval_seeds": [cfg.eval_seed_start,
                                                           cfg.eval_seed_start + cfg.eval_episodes],
                   "epochs": self.state.epoch, "best_epoch": self.state.best_epoch,
                   "skipped_updates": self.state.skipped_updates,
                   "warmstart": self.warmstart_stats,
                   "train_seconds_this_process": time.time() - t_start}
        self.tracker.log({"kind": "eval", "epoch": self.state.epoch, "name": "final",
                          **scalars(final)},
                         step=self.state.epoch + 1)
        summary["figures"] = [p.name for p in save_figures(
            self.run_dir, read_jsonl(self.run_dir / METRICS_JSONL), self.baseline, final,
            headline=(self.task.headline or ("reward",))[0], references=refs,
            best_epoch=self.state.best_epoch if self.state.best_epoch >= 0 else None)]
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self.tracker.summary({f"final/{k}": v for k, v in scalars(final).items()})
        self.tracker.finish()
        summary["table"] = format_table(rows, self.task.headline)
        return summary


__all__ = ["PPOBatch", "Trainer", "TrainerState", "collect", "compute_advantages",
           "epoch_seeds", "forward_policy", "make_optimizer", "ppo_update", "prefixed",
           "reference_logprobs", "support_rows",
           "seed_everything"]
