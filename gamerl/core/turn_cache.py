"""The KV cache carried from one turn's ``generate`` call to the next turn of the same episodes.

Turn t+1 of an episode starts with everything of turn t: its context and its answer. Without
this, every turn prefills the whole conversation again, and on a CPU that prefill is most of a
multi-turn rollout (SmolLM2-135M, 32 Password Game episodes, 3 turns: 41 s of the 66 s spent in
``generate``; docs/benchmarks.md). After each call ``LMPolicy`` keeps the cache and the padded
token matrix; when the next call's contexts extend those rows (the same episode objects, each
row's tokens a prefix of its new context) only the new tokens are prefilled: the feedback message
and the next assistant header.

Layout, row by row: ``[left pads][context][answer through its stop token][pads after the stop]``.
The attention mask is 0 on both kinds of pads. ``generate`` derives position ids from the
mask's cumulative sum, so every real token keeps the position it would have in a fresh,
left-padded prefill of the same tokens, and attends to the same keys. The new tokens are
appended left-padded among themselves, so that every row again ends at the last column.
Columns that no remaining row attends to (the pads of episodes that ended, the generated pads
every row shares) are dropped from the matrix and the cache alike.

Anything else (new episodes, a context that does not extend its row, a cache that is not plain
per-layer keys and values) gets a fresh prefill: reuse only ever skips work whose result would
be the same.

A fresh prefill whose rows all open with the same tokens (the system prompt and the game's
instructions: every Wordle game's first turn is one text, 152 SmolLM2 tokens) runs those tokens
once, as one row, and every row attends to that row's keys (``prefill_shared_prefix``). The
layout is the one above with the pads in the middle, ``[shared prefix][pads][rest of the
context]``, so ``generate`` and ``TurnCache`` take it as they take a carried turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from ..models.kv_cache import CACHE_ARG, cache_of, is_plain_layer


def left_pad(rows: Sequence[Sequence[int]], pad_id: int,
             device: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` ``[B, W]`` long: the rows left padded with ``pad_id`` so that every row
    ends at the last column (how ``generate`` takes a batch), mask 1 on real tokens."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if len(r):
            ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids.to(device), mask.to(device)


# Share a prefix only from this many tokens on: below it the one-row pass is not worth a call.
MIN_SHARED_PREFIX = 8


def shared_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """Tokens every row starts with, at most the shortest row's length less one: each row keeps
    a token of its own to prefill, whose logits give its first sampled token."""
    first = rows[0]
    n = min(len(r) for r in rows) - 1
    for r in rows[1:]:
        k = 0
        while k < n and r[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def prefill_shared_prefix(lm: Any, contexts: Sequence[Sequence[int]], pad_id: int,
                          device: Any = None, cache: Any = None) -> Optional[tuple[torch.Tensor, torch.Tensor, Any, int]]:
    """``(input_ids, attention_mask, past, shared)`` for a fresh ``generate`` call on
    ``contexts`` whose common first ``shared`` tokens were run once, as one row: ``past`` holds
    their keys and values for every row (expanded, not copied), ``input_ids``/``attention_mask``
    are ``[B, shared + R]``, the shared tokens then the rest of each context left padded (the
    pads sit between the two; positions come from the mask, so every real token keeps the
    position and the keys of a plain left-padded prefill). None where fewer than two rows or
    fewer than ``MIN_SHARED_PREFIX`` tokens are shared, or the model's cache is not plain
    per-layer keys and values. ``cache``: an empty cache to fill (``growing_cache``), else the
    model's default. Call it under ``torch.no_grad()`` with the model in eval mode."""
    if len(contexts) < 2:
        return None
    shared = shared_prefix_length(contexts)
    if shared < MIN_SHARED_PREFIX:
        return None
    prefix = torch.tensor([list(contexts[0][:shared])], dtype=torch.long, device=device)
    past = cache_of(lm(input_ids=prefix, use_cache=True, logits_to_keep=1, **{CACHE_ARG: cache}))
    if not reusable(past):
        return None
    rows = len(contexts)
    for layer in past.layers:  # [1, heads, T, head_dim] -> [B, ...]: generate's first step
        # concatenates, which copies them
        layer.keys = layer.keys.expand(rows, -1, -1, -1)
        layer.values = layer.values.expand(rows, -1, -1, -1)
    rest_ids, rest_mask = left_pad([c[shared:] for c in contexts], pad_id, device)
    ids = torch.cat([prefix.expand(rows, -1), rest_ids], dim=1)
    mask = torch.cat([torch.ones((rows, shared), dtype=rest_mask.dtype, device=rest_mask.device),
                      rest_mask], dim=1)
    return ids, mask, past, shared


def reusable(past: Any) -> bool:
    """A cache whose layers are plain full-attention keys/values ``[B, heads, T, head_dim]``
    (not sliding windows, not recurrent states): the only kind sliced here."""
    from transformers.cache_utils import DynamicCache

    return (type(past) is DynamicCache and len(past.layers) > 0
            and all(is_plain_layer(layer) and layer.is_initialized for layer in past.layers))


def call_mask(in_mask: torch.Tensor, sequences: torch.Tensor,
              answers: Sequence[Sequence[int]]) -> torch.Tensor:
    """``[B, W_in + G]`` 1 on a finished call's real tokens: the input's, then each row's answer
    (its first ``len(answers[i])`` generated columns; the pads after its stop token are 0)."""
    gen = torch.zeros((len(answers), sequences.shape[1] - in_mask.shape[1]), dtype=in_mask.dtype,
                      device=in_mask.device)
    for i, answer in enumerate(answers):
        gen[i, :len(answer)] = 1
    return torch.cat([in_mask, gen], dim=1)


@dataclass
class TurnCache:
    """What one ``generate`` call leaves for the next turn.

    episodes: the episode of each row (identity matches a row to a later context)
    tokens:   each row's real tokens, the context then the answer through its stop token
    ids:      [B, W] the call's padded matrix, prompt columns then generated columns
    mask:     [B, W] 1 on real tokens
    past:     the model's cache over ``ids[:, :W-1]`` (the last sampled column was never fed)
    """

    episodes: list[Any]
    tokens: list[list[int]]
    ids: torch.Tensor
    mask: torch.Tensor
    past: Any

    @classmethod
    def after_generate(cls, episodes: Sequence[Any], contexts: Sequence[list[int]],
                       answers: Sequence[list[int]], in_mask: torch.Tensor,
                       sequences: torch.Tensor, past: Any) -> Optional["TurnCache"]:
        """The cache of a finished call, or None where it cannot be carried (see ``reusable``).

        in_mask: [B, W_in] the call's attention mask; sequences: [B, W_in + G] its output;
        answers[i]: row i's answer (the first ``len(answers[i])`` generated columns are real).
        """
        if any(ep is None for ep in episodes) or not reusable(past):
            return None
        if past.get_seq_length() != sequences.shape[1] - 1:
            return None
        return cls(episodes=list(episodes), tokens=[list(c) + list(a) for c, a in zip(contexts, answers)],
                   ids=sequences, mask=call_mask(in_mask, sequences, answers), past=past)

    def extend(self, contexts: Sequence[list[int]], episodes: Sequence[Any],
               pad_id: int) -> Optional[tuple[torch.Tensor, torch.Tensor, Any]]:
        """``(input_ids, attention_mask, past)`` for a call on ``contexts`` that prefills only
        their new tokens, or None where any context does not extend a row of this cache. The
        cache is consumed either way (``generate`` grows it in place)."""
        row_of = {id(ep): r for r, ep in enumerate(self.episodes)}
        rows, suffixes = [], []
        for ctx, ep in zip(contexts, episodes):
            r = row_of.get(id(ep))
            if r is None or self.episodes[r] is not ep:
                return None
            known = self.tokens[r]
            if len(ctx) <= len(known) or ctx[:len(known)] != known:
                return None
            rows.append(r)
            suffixes.append(ctx[len(known):])
        index = torch.tensor(rows, dtype=torch.long, device=self.ids.device)
        ids, mask = self.ids[index], self.mask[index]
        keep = mask.bool().any(dim=0)  # [W] columns some remaining row attends to
        keep_cached = keep[:-1]
        if not bool(keep_cached.any()):
            return None
        past = self.past
        # Every row stays, in order, and every column: the cache is used as it is (a growing
        # layer keeps its spare room). Else a layer at a time, so that only one layer's old
        # keys and its copy live together (a copy of every layer while the old ones lived was
        # most of a 73 GB peak at Qwen3-0.6B's size; a growing layer lets its buffer go when
        # its keys and values are replaced: kv_cache.GrowingLayer).
        same_rows, all_columns = rows == list(range(len(self.episodes))), bool(keep_cached.all())
        if not (same_rows and all_columns):
            for layer in past.layers:  # rows, then columns: [B, heads, T, head_dim]
                keys, values = layer.keys, layer.values
                if not same_rows:
                    keys, values = keys[index], values[index]
                if not all_columns:
                    keys, values = keys[:, :, keep_cached], values[:, :, keep_cached]
                layer.keys, layer.values = keys, values
        new_ids, new_mask = left_pad(suffixes, pad_id, ids.device)  # rows end together
        new_ids, new_mask = new_ids.to(ids.dtype), new_mask.to(mask.dtype)
        self.past = None
        return (torch.cat([ids[:, keep], new_ids], dim=1), torch.cat([mask[:, keep], new_mask], dim=1),
                past)
