"""The warm start's forward runs a batch in passes (``SFT_ROWS_PER_PASS`` rows, shortest first,
the shared prompt once per pass): a speed change only. Its loss and gradients are those of the
plain forward, one pass over the whole batch right padded to its longest row, written out here
by hand with the model's own forward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gamerl.core.warmstart as ws
from gamerl.config import get_config
from gamerl.models import load_policy


def _plain_loss(lm, batch, pad_id):
    """Mean cross-entropy over the answer tokens, the whole batch in one padded forward."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id)
    attn = torch.zeros_like(ids)
    for i, (seq, _) in enumerate(batch):
        ids[i, :len(seq)] = torch.tensor(seq)
        attn[i, :len(seq)] = 1
    logits = lm(input_ids=ids, attention_mask=attn).logits.float()
    picked, targets = [], []
    for i, (seq, mask) in enumerate(batch):
        for t in range(1, len(seq)):
            if mask[t]:  # position t-1 predicts answer token t
                picked.append(logits[i, t - 1])
                targets.append(seq[t])
    return F.cross_entropy(torch.stack(picked), torch.tensor(targets))


def _grads(lm, loss):
    lm.zero_grad(set_to_none=True)
    loss.backward()
    return [p.grad.clone() for p in lm.parameters() if p.grad is not None]


@pytest.mark.parametrize("rows_per_pass", [1, 2, 3, 8])
def test_passes_give_the_plain_forwards_loss_and_gradients(tiny_dir, monkeypatch,
                                                           rows_per_pass):
    cfg = get_config("tiny", model=str(tiny_dir), num_rules=4, max_steps=3, max_new_tokens=12,
                     warmstart_examples=7, device="cpu")
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    lm.train()
    batch = ws.demonstrations(cfg, tok, seed=0)
    lengths = [len(ids) for ids, _ in batch]
    assert len(set(lengths)) > 2  # rows of several lengths: the passes pad differently
    reference = _plain_loss(lm, batch, tok.pad_token_id)
    expected = _grads(lm, reference)

    monkeypatch.setattr(ws, "SFT_ROWS_PER_PASS", rows_per_pass)
    loss = ws.sft_loss(lm, batch, tok.pad_token_id)
    assert loss.item() == pytest.approx(reference.item(), abs=1e-5)
    for got, want in zip(_grads(lm, loss), expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
