"""Sampling a turn's answers for a batch of games, dropping the rows that have finished.

``transformers``' ``generate`` keeps every row of a batch in every decoding step until the last
row stops: a row that closed its answer after 14 tokens is fed padding for the remaining 34
steps of a 48-token budget. In the Password Game most answers are short and a few run to the
budget (SmolLM2-135M on 12 rules: about half of all decoded row-steps were such padding,
docs/benchmarks.md), so half of the decoding did nothing. This loop samples exactly as
``generate`` does (the same model call, the same fp32 logits, our temperature / top-k / top-p
processors, ``torch.multinomial`` on their softmax, or their argmax when greedy), but once at least a
quarter of the rows in the batch have finished, it moves their keys and values aside and goes
on with the others only. At the end the rows are put back together, so that the caller gets
what ``generate`` returns: every row's tokens, pads after its stop token, and one KV cache over
all rows for the next turn (``TurnCache``), whose columns after a row's stop are zeros that its
mask hides.

Used on a CPU (``RolloutConfig.drop_finished_rows=None``): there a step's time grows with its
rows. On a GPU a step of a model this size is kernel launches whatever the rows, and this loop
measured 0.96-1.02x ``generate``'s speed on an H200 (docs/benchmarks.md, the third lease): no
gain, so the library's ``generate`` runs there.

What differs from ``generate``: the random numbers. ``torch.multinomial`` draws for the rows
still in the batch only, so the same seed samples other answers than ``generate`` would (of the
same distribution); and a row's logits come from a smaller matrix product, which can change
their last bits. The log-probs recorded are those of the distribution that sampled each token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from ..models.kv_cache import CACHE_ARG, cache_of
from ..models.policy import positions_from_mask

__all__ = ["Decoded", "sample_turn", "COMPACT_FRACTION"]

# Rows that finished are moved out of the batch once they make up this share of it: each move
# copies the remaining rows' cache once, about what one decoding step reads.
COMPACT_FRACTION = 0.25


@dataclass
class Decoded:
    """What ``sample_turn`` returns, shaped as ``generate``'s output.

    sequences: [B, W + G] the input columns then the G sampled ones (pad after a row's stop)
    logprobs:  [B, G] fp32 log-prob of each sampled token under the processed distribution
               (0 after a row's stop), or None when not recorded
    past:      the KV cache over ``sequences[:, :-1]``, all B rows in order
    row_steps: row-steps the model ran (rows x decoding steps, the prefill not counted)
    """

    sequences: torch.Tensor
    logprobs: Optional[torch.Tensor]
    past: Any
    row_steps: int


def _select_rows(past: Any, index: torch.Tensor) -> None:
    """Keep only rows ``index`` of every layer (a growing layer frees its buffer on the way)."""
    for layer in past.layers:
        layer.keys, layer.values = layer.keys[index], layer.values[index]


@torch.no_grad()
def sample_turn(lm: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, past: Any, *,
                max_new_tokens: int, stop_ids: Sequence[int], pad_id: int,
                processors: Optional[Any] = None, do_sample: bool = True,
                record_logprobs: bool = False,
                compact_fraction: float = COMPACT_FRACTION) -> Decoded:
    """Sample up to ``max_new_tokens`` tokens for every row of a left-padded batch.

    Args:
        lm: a causal LM (eval mode, under no_grad).
        input_ids, attention_mask: ``[B, W]``; the first ``past.get_seq_length()`` columns are
            already in ``past`` (a carried turn, a shared prefix) or none are.
        past: a ``DynamicCache`` of plain per-layer keys and values (``turn_cache.reusable``
            once filled), possibly empty; it is filled and returned.
        stop_ids: tokens that end a row's answer (kept, as ``generate`` keeps its eos).
        processors: a ``LogitsProcessorList`` (temperature, top-k, top-p) applied to the fp32
            logits, called as ``generate`` calls it (the rows' tokens so far, the scores).
        do_sample: draw from the softmax of the processed scores; else take their argmax.
        record_logprobs: also return log pi(token) under the processed distribution.
        compact_fraction: drop finished rows once they are this share of the batch (> 1: never).
    """
    device = input_ids.device
    batch, width = input_ids.shape
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    cached = past.get_seq_length() if past is not None else 0

    rows = torch.arange(batch, device=device)  # the original row of each row in the batch
    mask = attention_mask
    seen = input_ids  # the batch's tokens so far (what processors are shown)
    step_ids = input_ids[:, cached:]
    step_pos = positions_from_mask(mask)[:, cached:]
    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logprobs = (torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
                if record_logprobs else None)
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # of the rows in the batch
    fed = torch.zeros(batch, dtype=torch.bool, device=device)  # their stop token is in the cache
    parked: list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]] = []
    row_steps = 0
    steps = 0
    for step in range(max_new_tokens):
        out = lm(input_ids=step_ids, attention_mask=mask, position_ids=step_pos,
                 use_cache=True, logits_to_keep=1, **{CACHE_ARG: past})
        past = cache_of(out)
        if step:
            row_steps += len(rows)
        fed |= done  # the stop tokens fed just now are in the cache
        logits = out.logits[:, -1].to(dtype=torch.float32, copy=True)
        del out
        scores = processors(seen, logits) if processors is not None else logits
        if do_sample:
            next_tokens = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)
        else:
            next_tokens = scores.argmax(dim=-1)
        next_tokens = torch.where(done, torch.full_like(next_tokens, pad_id), next_tokens)
        seen = torch.cat([seen, next_tokens[:, None]], dim=1)
        # every row written (finished ones: a pad, a 0, as before): no boolean index, no wait
        tokens[rows, step] = next_tokens
        if logprobs is not None:
            lp = torch.log_softmax(scores, dim=-1).gather(-1, next_tokens[:, None]).squeeze(1)
            logprobs[rows, step] = torch.where(done, torch.zeros_like(lp), lp)
        steps = step + 1
        done = done | torch.isin(next_tokens, stops)
        # rows whose stop token is in the cache leave the batch once there are enough of them
        leaving = done & fed
        n_done, n_leaving = torch.stack((done.sum(), leaving.sum())).tolist()  # the step's wait
        if n_done == len(rows):
            break
        if len(rows) > 1 and n_leaving >= compact_fraction * len(rows):
            stay = _park(past, rows, leaving, parked)
            rows, done, fed = rows[stay], done[stay], fed[stay]
            next_tokens, mask, seen = next_tokens[stay], mask[stay], seen[stay]
        mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
        step_ids = next_tokens[:, None]
        step_pos = positions_from_mask(mask)[:, -1:]

    sequences = torch.cat([input_ids, tokens[:, :steps]], dim=1)
    if parked:
        past = _reassemble(past, rows, parked, batch, width + steps - 1)
    return Decoded(sequences=sequences,
                   logprobs=None if logprobs is None else logprobs[:, :steps],
                   past=past, row_steps=row_steps)


def _park(past: Any, rows: torch.Tensor, leaving: torch.Tensor, parked: list) -> torch.Tensor:
    """Move the ``leaving`` rows' keys and values out of ``past`` into ``parked`` (with their
    original row numbers); returns the positions of the rows that stay."""
    go = leaving.nonzero().squeeze(1)
    parked.append((rows[go], [(layer.keys[go], layer.values[go]) for layer in past.layers]))
    stay = (~leaving).nonzero().squeeze(1)
    _select_rows(past, stay)
    return stay


def _reassemble(past: Any, rows: torch.Tensor,
                parked: list[tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]],
                batch: int, length: int) -> Any:
    """One cache of ``batch`` rows and ``length`` columns: the rows still in ``past`` and those
    parked earlier (shorter: their columns after they left stay zero, which their masks hide;
    zeros, not uninitialised memory, since a NaN key would poison even a masked score)."""
    for i, layer in enumerate(past.layers):
        keys, values = layer.keys, layer.values
        k_all = keys.new_zeros((batch, keys.shape[1], length, keys.shape[3]))
        v_all = values.new_zeros((batch, values.shape[1], length, values.shape[3]))
        k_all[rows, :, :keys.shape[2]] = keys
        v_all[rows, :, :values.shape[2]] = values
        for parked_rows, layers in parked:
            k, v = layers[i]
            k_all[parked_rows, :, :k.shape[2]] = k
            v_all[parked_rows, :, :v.shape[2]] = v
            layers[i] = None  # let this layer's parked copy go before the next layer's
        layer.keys, layer.values = k_all, v_all
    return past
