"""Run the trunk over a shared prompt prefix once, not once per episode.

The episodes of an epoch open alike: every one with the system prompt, and a GRPO group's
``group_size`` episodes with the same first observation, token for token. The scoring pass, the
reference pass and the update each ran the whole trunk over every row, so a group of 4 paid for
its prompt 4 times (Password Game, SmolLM2: a 117-token prompt before a ~50-token answer).

Here a micro-batch's rows are put in groups that share a prefix; the trunk runs once over the
groups' prefixes (``[G, P]``, right padded) with a KV cache, the cache rows are repeated for each
member row, and the trunk runs over the rest of every row (``[B, S]``, right padded) attending to
its group's prefix through that cache. The hidden states are put back in the row's own layout.
Every real token sees the same keys at the same positions as in one pass over the row, so the
result is the same up to float rounding, and gradients flow into the prefix through the repeated
cache (the update's graph is that of the unshared forward). Rows must be right padded (the PPO
batch's layout).

Used where it saves work (see ``plan``), with plain per-layer key/value caches and SDPA or eager
attention only: ``flash_attention_2``'s variable-length path and gradient checkpointing (which
turns the cache off in training) keep the plain forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
from transformers.cache_utils import DynamicCache

from ..models.kv_cache import CACHE_ARG, cache_of
from ..models.policy import positions_from_mask
from .turn_cache import reusable

# Share only where the plan computes at most this fraction of the plain forward's token slots.
MAX_COST_FRACTION = 0.85
SHARED_ATTENTION = ("sdpa", "eager")


@dataclass
class PrefixPlan:
    """Which rows share which prefix.

    group:      [B] long, each row's group
    leader:     [G] long, a row of each group (its first ``prefix_len`` tokens are the prefix)
    prefix_len: [G] long, tokens of the group's prefix (at least 1, less than every member's length)
    lengths:    [B] long, each row's real tokens
    """

    group: torch.Tensor
    leader: torch.Tensor
    prefix_len: torch.Tensor
    lengths: torch.Tensor

    @property
    def cost(self) -> int:
        """Token slots the two passes compute: ``G x P`` prefix + ``B x S`` rest."""
        rest = self.lengths - self.prefix_len[self.group]
        return len(self.leader) * int(self.prefix_len.max()) + len(self.group) * int(rest.max())


def _common_prefix_lengths(input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[B, B] long: tokens rows i and j share from the start, at most min(len_i, len_j) - 1, so
    that a shared prefix always leaves each row at least one token of its own."""
    width = input_ids.shape[1]
    real = torch.arange(width, device=input_ids.device)[None, :] < lengths[:, None]
    same = (input_ids[:, None, :] == input_ids[None, :, :]) & real[:, None, :] & real[None, :, :]
    lcp = same.long().cumprod(-1).sum(-1)
    cap = torch.minimum(lengths[:, None], lengths[None, :]) - 1
    return torch.minimum(lcp, cap)


def _greedy_groups(lcp: torch.Tensor, lengths: torch.Tensor) -> PrefixPlan:
    """Rows in order: each row not yet placed leads a group of the unplaced rows that share its
    longest common prefix with any of them (a GRPO group's identical prompt); a row that shares
    nothing keeps all but its last token as its own "prefix"."""
    n = len(lengths)
    placed = torch.zeros(n, dtype=torch.bool)
    group = torch.empty(n, dtype=torch.long)
    leaders, prefix = [], []
    for i in range(n):
        if placed[i]:
            continue
        others = ~placed  # a new tensor: placed itself is not changed
        others[i] = False
        best = int(lcp[i][others].max()) if bool(others.any()) else 0
        members = others & (lcp[i] >= best) if best >= 1 else torch.zeros(n, dtype=torch.bool)
        members[i] = True
        group[members] = len(leaders)
        placed |= members
        leaders.append(i)
        prefix.append(best if best >= 1 else max(int(lengths[i]) - 1, 1))
    return PrefixPlan(group, torch.tensor(leaders), torch.tensor(prefix), lengths)


def plan(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Optional[PrefixPlan]:
    """The cheaper of two groupings (all rows sharing their common prefix, or the greedy groups),
    or None where neither computes less than ``MAX_COST_FRACTION`` of the plain forward or the
    rows are not right padded."""
    rows, width = input_ids.shape
    if rows < 2:
        return None
    mask = attention_mask.detach().cpu().long()
    lengths = mask.sum(-1)
    right_padded = torch.arange(width)[None, :] < lengths[:, None]
    if not torch.equal(right_padded.long(), mask) or int(lengths.min()) < 2:
        return None
    lcp = _common_prefix_lengths(input_ids.detach().cpu(), lengths)
    candidates = [_greedy_groups(lcp, lengths)]
    common = int(lcp[0].min())  # lcp[0, 0] is len_0 - 1, so this is the all-rows prefix
    if common >= 1:
        candidates.append(PrefixPlan(torch.zeros(rows, dtype=torch.long), torch.tensor([0]),
                                     torch.tensor([common]), lengths))
    best = min(candidates, key=lambda p: p.cost)
    return best if best.cost <= MAX_COST_FRACTION * rows * int(lengths.max()) else None


def usable(trunk: nn.Module) -> bool:
    """Whether this trunk can run the shared forward (see the module docstring)."""
    attn = getattr(getattr(trunk, "config", None), "_attn_implementation", None)
    checkpointing = bool(getattr(trunk, "gradient_checkpointing", False)) and trunk.training
    return attn in SHARED_ATTENTION and not checkpointing


def trunk_hidden(trunk: nn.Module, input_ids: torch.Tensor,
                 attention_mask: torch.Tensor, share: bool = True) -> torch.Tensor:
    """[B, T, H] the trunk's last hidden state of right-padded rows, computing shared prefixes
    once where that pays (``plan``); else one plain pass. Padding positions hold unspecified
    finite values in both cases."""
    p = plan(input_ids, attention_mask) if share and usable(trunk) else None
    if p is None:
        return trunk(input_ids=input_ids, attention_mask=attention_mask,
                     position_ids=positions_from_mask(attention_mask),
                     use_cache=False).last_hidden_state
    device = input_ids.device
    group, leader = p.group.to(device), p.leader.to(device)
    prefix_len, lengths = p.prefix_len.to(device), p.lengths.to(device)
    width_p = int(p.prefix_len.max())
    cols_p = torch.arange(width_p, device=device)
    prefix_ids = input_ids[leader, :width_p]
    prefix_mask = (cols_p[None, :] < prefix_len[:, None]).to(attention_mask.dtype)
    # A cache that adds a layer as each one runs: the model's default one has a layer for every
    # layer of its config, and a trunk view (SplitTrunk's frozen bottom) leaves the rest empty.
    first = trunk(input_ids=prefix_ids, attention_mask=prefix_mask,
                  position_ids=positions_from_mask(prefix_mask), use_cache=True,
                  **{CACHE_ARG: DynamicCache()})
    past = cache_of(first)
    if not reusable(past):  # not plain keys/values: the plain pass, as if never planned
        return trunk_hidden(trunk, input_ids, attention_mask, share=False)
    for layer in past.layers:  # [G, heads, P, head_dim] -> one copy per member row
        layer.keys, layer.values = layer.keys[group], layer.values[group]

    # The rest of each row: tokens prefix_len .. length-1, right padded to S.
    start = prefix_len[group]  # [B]
    rest_len = lengths - start
    width_s = int(rest_len.max())
    cols_s = torch.arange(width_s, device=device)
    src = (start[:, None] + cols_s[None, :]).clamp(max=input_ids.shape[1] - 1)
    rest_ids = input_ids.gather(1, src)
    rest_mask = (cols_s[None, :] < rest_len[:, None]).to(attention_mask.dtype)
    full_mask = torch.cat([prefix_mask[group], rest_mask], dim=1)
    rest = trunk(input_ids=rest_ids, attention_mask=full_mask,
                 position_ids=positions_from_mask(full_mask)[:, width_p:],
                 **{CACHE_ARG: past}, use_cache=True).last_hidden_state

    # Back to each row's layout: column t is prefix column t before ``start``, else rest
    # column t - start (clamped on padding).
    combined = torch.cat([first.last_hidden_state[group], rest], dim=1)  # [B, P + S, H]
    cols = torch.arange(input_ids.shape[1], device=device)[None, :]
    index = torch.where(cols < start[:, None], cols,
                        width_p + (cols - start[:, None]).clamp(0, width_s - 1))
    return combined.gather(1, index[:, :, None].expand(-1, -1, combined.shape[-1]))
