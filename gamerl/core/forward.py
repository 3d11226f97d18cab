"""The forward passes: one helper runs the trunk (the whole stack, or with ``trainable_layers``
the frozen bottom then the trained top, shared prefixes once), and the rollout's scoring, the
reference pass and the warm start all call it.

Alignment (as gamerl/core/epoch.py says): ``logprobs[:, t]`` is log pi(x_t | x_<t), from the
logits at t-1, and ``values[:, t]`` is V of the state before x_t; ``mask`` is 1 on policy tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from ..models import PolicyWithValue, SplitTrunk, lm_head, lm_trunk, unwrap_lm
from ..models.lora import adapter_disabled, is_peft
from .prefix_share import trunk_hidden
from .scoring import Sampling, score_tokens


def hidden_states(lm, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                  split: Optional[SplitTrunk] = None, bottom: Optional[torch.Tensor] = None,
                  share_prefix: bool = True) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``(hidden [B, T, H], bottom)``: the trunk's last hidden states of right-padded rows.

    Without ``split`` the whole trunk runs (with a graph where gradients are on). With ``split``
    (only the top layers train) the frozen bottom runs without a graph, or not at all when its
    output ``bottom`` is given, then the top layers; the bottom's output computed here is
    returned so later passes can skip it (None where it was given or not split).
    ``share_prefix``: rows that open with the same tokens run that prefix once
    (``gamerl.core.prefix_share``; the same numbers up to float rounding)."""
    if split is None:
        return trunk_hidden(lm_trunk(lm), input_ids, attention_mask, share=share_prefix), None
    computed = None
    if bottom is None:
        with torch.no_grad():  # frozen: no graph below the trained layers
            bottom = computed = trunk_hidden(split.bottom, input_ids, attention_mask,
                                             share=share_prefix)
    return split.top_states(bottom, attention_mask), computed


@dataclass
class PolicyPass:
    """What one forward pass of the policy gives, aligned as the module docstring says."""

    logprobs: torch.Tensor  # [B, T] log pi(token t) of the sampling distribution; 0 off-mask
    values: torch.Tensor  # [B, T] V(state before token t)
    entropy: Optional[torch.Tensor] = None  # [B, T] of the sampling distribution at t
    support: Optional[torch.Tensor] = None  # [N, V/8] packed supports (derive_support=True)
    trunk_cache: Optional[torch.Tensor] = None  # [B, T, H] the frozen bottom's output (split)
    last_values: Optional[torch.Tensor] = None  # [B] V(state after each row's last token)


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
                   trunk_input: Optional[torch.Tensor] = None,
                   share_prefix: bool = True) -> PolicyPass:
    """Log-probs, values (and entropy) of every policy token, as the rollout sampled them.

    The trunk runs over the whole sequence (``hidden_states``); the LM head and the fp32
    log-softmax only at the positions whose next token is a policy token (``mask``; all tokens
    when None), in chunks, under ``sampling``'s temperature and support (``gamerl.core.scoring``):
    the old pass derives the supports (``derive_support``), the update passes them back
    (``support``, the ``[N, V/8]`` rows of exactly these positions, in row-major order). In
    multi-turn games most tokens are prompt and feedback, so this skips most of the
    ``[B, T, vocab]`` logits.

    With ``policy.split`` (``trainable_layers``) the frozen bottom's output is returned as
    ``trunk_cache`` when it is computed here, and ``trunk_input`` (that cache) skips the bottom
    entirely: the update passes run the top layers only."""
    hidden, cache = hidden_states(policy.lm, input_ids, attention_mask,
                                  split=getattr(policy, "split", None), bottom=trunk_input,
                                  share_prefix=share_prefix)
    all_values = policy.value_head(hidden)  # [B, T]: V(state after token t)
    values = F.pad(all_values[:, :-1], (1, 0))  # V(state before token t)
    # V(state after the row's last token; rows are right padded): a truncated episode's bootstrap
    last = (attention_mask.sum(-1) - 1).clamp(min=0)
    last_values = all_values.gather(1, last[:, None]).squeeze(1)
    sel = _policy_positions(input_ids, mask, attention_mask)
    scores = score_tokens(hidden[:, :-1][sel], lm_head(policy.lm), input_ids[:, 1:][sel],
                          sampling, support=support, derive_support=derive_support,
                          with_entropy=with_entropy, entropy_grad=entropy_grad)
    entropy = _scatter(sel, scores.entropy) if with_entropy else None
    return PolicyPass(_scatter(sel, scores.logprobs), values, entropy, scores.support, cache,
                      last_values)


@torch.no_grad()
def reference_logprobs(ref_lm, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       sampling: Sampling, mask: Optional[torch.Tensor] = None,
                       support: Optional[torch.Tensor] = None,
                       trunk_input: Optional[torch.Tensor] = None,
                       n_top: Optional[int] = None, share_prefix: bool = True) -> torch.Tensor:
    """log pi_ref(token t) over the same supports as the policy's (0 off-mask).

    With LoRA the reference is the policy's own (peft) model with its adapters switched off:
    the frozen base weights, with no second copy in memory. With ``trunk_input`` (the policy's
    frozen bottom output, which the reference shares) only the reference's top ``n_top``
    layers run."""
    if is_peft(ref_lm):
        with adapter_disabled(ref_lm):
            return reference_logprobs(unwrap_lm(ref_lm), input_ids, attention_mask, sampling,
                                      mask, support, trunk_input, n_top, share_prefix)
    split = None if trunk_input is None else _split_of(ref_lm, n_top)
    hidden, _ = hidden_states(ref_lm, input_ids, attention_mask, split=split,
                              bottom=trunk_input, share_prefix=share_prefix)
    sel = _policy_positions(input_ids, mask, attention_mask)
    scores = score_tokens(hidden[:, :-1][sel], lm_head(ref_lm), input_ids[:, 1:][sel], sampling,
                          support=support)
    return _scatter(sel, scores.logprobs)


def _split_of(lm, n_top: int) -> SplitTrunk:
    """The reference's SplitTrunk, made once (views only: no weights are copied)."""
    split = getattr(lm, "_gamerl_split", None)
    if split is None or split.n_top != n_top:
        split = SplitTrunk.of(lm, n_top)
        lm._gamerl_split = split
    return split
