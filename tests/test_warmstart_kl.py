"""``warmstart_kl_coef``: the warm start's cross-entropy plus the exact KL to the model as it came.

The math against numbers worked by hand; the term is zero at the first step (the reference is the
model itself) and with a split trunk it is the same whether the bottoms are cached or not; a warm
start with the term ends nearer the base model than one without; a killed one resumes to the
same weights; the setting is part of the cached warm start's identity."""

from __future__ import annotations

import math

import pytest
import torch

from gamerl.config import get_config
from gamerl.models import SplitTrunk, load_policy, load_reference

from conftest import Killed, count_calls  # pytest (prepend import mode) puts tests/ on sys.path


def test_exact_kl_matches_the_hand_computed_value():
    from gamerl.core.warmstart import exact_kl

    # p = softmax(0, ln 3) = (1/4, 3/4); q = softmax(0, 0) = (1/2, 1/2):
    # KL(p||q) = 1/4 ln(1/2) + 3/4 ln(3/2) = -0.173287 + 0.304099 = 0.130812
    logits = torch.tensor([[0.0, math.log(3.0)], [1.0, 1.0]])
    ref = torch.tensor([[0.0, 0.0], [5.0, 5.0]])  # the second row: equal distributions, 0
    assert exact_kl(logits, ref).item() == pytest.approx((0.130812 + 0.0) / 2, abs=1e-6)
    # not symmetric: KL(q||p) = 1/2 ln 2 + 1/2 ln(2/3) = 0.143841
    assert exact_kl(ref[:1], logits[:1]).item() == pytest.approx(0.143841, abs=1e-6)
    # a shift of all logits changes nothing (softmax)
    assert exact_kl(logits + 7.0, ref).item() == pytest.approx(exact_kl(logits, ref).item(),
                                                               abs=1e-6)


def _cfg(tiny_dir, **kw):
    base = dict(model=str(tiny_dir), num_rules=4, max_steps=2, warmstart=True,
                warmstart_steps=8, warmstart_examples=8, warmstart_batch_size=4,
                warmstart_lr=3e-3, warmstart_checkpoint_seconds=0, wandb_mode="disabled",
                progress=False, device="cpu")
    return get_config("tiny", **{**base, **kw})


def test_the_kl_term_is_zero_at_the_start_and_split_or_whole_agree(tiny_dir):
    import gamerl.core.warmstart as ws

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    examples = ws.demonstrations(_cfg(tiny_dir), tok, seed=1)[:3]
    ref = load_reference(lm)
    pad = tok.pad_token_id
    with torch.no_grad():
        loss, ce, kl = ws.sft_kl_loss(lm, ref, examples, pad, 0.5)
        assert abs(kl.item()) < 1e-6  # the reference is the model itself
        assert ce.item() == pytest.approx(ws.sft_loss(lm, examples, pad).item(), abs=1e-6)
        assert loss.item() == pytest.approx(ce.item(), abs=1e-6)
    # move the policy's top layers a little: the split (bottoms cached or not) and the whole
    # model give the same KL, and it is the exact KL of the two models' answer logits
    with torch.no_grad():
        for p in list(lm.parameters())[-6:]:
            p.add_(0.05 * torch.randn_like(p))
    split, ref_split = SplitTrunk.of(lm, 1), SplitTrunk.of(ref, 1)
    with torch.no_grad():
        whole = ws.sft_kl_loss(lm, ref, examples, pad, 0.5)
        per_step = ws.sft_kl_loss(lm, ref, examples, pad, 0.5, split, ref_split)
        bottoms = ws.frozen_bottoms(lm, split, examples, pad)
        cached = ws.sft_kl_loss(lm, ref, examples, pad, 0.5, split, ref_split, bottoms)
        logits, _ = ws.answer_logits(lm, examples, pad)
        ref_logits, _ = ws.answer_logits(ref, examples, pad)
    by_hand = (torch.softmax(logits, -1) * (torch.log_softmax(logits, -1)
                                            - torch.log_softmax(ref_logits, -1))).sum(-1).mean()
    assert whole[2].item() > 1e-4
    assert whole[2].item() == pytest.approx(by_hand.item(), rel=1e-5)
    for other in (per_step, cached):
        for a, b in zip(whole, other):
            assert a.item() == pytest.approx(b.item(), rel=1e-4, abs=1e-6)
    assert whole[0].item() == pytest.approx(whole[1].item() + 0.5 * whole[2].item(), rel=1e-6)


def _kl_to_base(tiny_dir, path, examples, pad) -> float:
    import gamerl.core.warmstart as ws

    base = load_policy(str(tiny_dir), device="cpu")[0]
    trained = load_policy(str(path), device="cpu")[0]
    with torch.no_grad():
        return ws.sft_kl_loss(trained, base, examples, pad, 1.0)[2].item()


def test_a_warm_start_with_the_kl_term_stays_nearer_the_base_model(tiny_dir, tmp_path):
    import gamerl.core.warmstart as ws

    lm, tok = load_policy(str(tiny_dir), device="cpu")
    plain = ws.warm_start(lm, tok, _cfg(tiny_dir, warmstart_steps=30), tmp_path / "plain")
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    held = ws.warm_start(lm, tok, _cfg(tiny_dir, warmstart_steps=30, warmstart_kl_coef=2.0),
                         tmp_path / "held")
    # kl_first, kl_last: the means of the first and last 10 steps' KL
    assert "kl_first" not in plain and 0 <= held["kl_first"] < held["kl_last"]
    examples = ws.demonstrations(_cfg(tiny_dir), tok, seed=5)[:4]  # other games than trained on
    pad = tok.pad_token_id
    near, far = (_kl_to_base(tiny_dir, tmp_path / name, examples, pad) for name in ("held", "plain"))
    print(f"KL to the base on unseen games: with the term {near:.4f}, without {far:.4f}")
    assert near < 0.8 * far
    # the marker: a warm start made with the term is not the one made without
    assert ws.cached_warm_start(_cfg(tiny_dir, warmstart_steps=30), tmp_path / "held") is None
    assert ws.cached_warm_start(_cfg(tiny_dir, warmstart_steps=30, warmstart_kl_coef=2.0),
                                tmp_path / "held")
    assert ws.cached_warm_start(_cfg(tiny_dir, warmstart_steps=30), tmp_path / "plain")


def test_a_killed_warm_start_with_the_kl_term_resumes_to_the_same_weights(tiny_dir, tmp_path,
                                                                          monkeypatch):
    import gamerl.core.warmstart as ws

    cfg = _cfg(tiny_dir, warmstart_kl_coef=1.0, trainable_layers=1, warmstart_steps=6)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    straight = ws.warm_start(lm, tok, cfg, tmp_path / "straight" / "warmstart")

    real = ws.sft_kl_loss
    count_calls(monkeypatch, ws, "sft_kl_loss", kill_at=4)
    torch.manual_seed(0)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    with pytest.raises(Killed):
        ws.warm_start(lm, tok, cfg, tmp_path / "killed" / "warmstart")
    monkeypatch.setattr(ws, "sft_kl_loss", real)
    lm, tok = load_policy(str(tiny_dir), device="cpu")
    resumed = ws.warm_start(lm, tok, cfg, tmp_path / "killed" / "warmstart")
    # the reference is the model as it came, not the checkpoint the resume loaded
    assert resumed["kl_last"] == pytest.approx(straight["kl_last"], rel=1e-5)
    assert resumed["loss_last"] == pytest.approx(straight["loss_last"], rel=1e-5)
    a = load_policy(str(tmp_path / "straight" / "warmstart"), device="cpu")[0]
    b = load_policy(str(tmp_path / "killed" / "warmstart"), device="cpu")[0]
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name


def test_a_negative_kl_coefficient_is_refused():
    with pytest.raises(ValueError, match="warmstart_kl_coef"):
        get_config("tiny", warmstart_kl_coef=-0.1)


def test_rounds_alone_report_no_demonstration_loss_or_kl(tiny_dir):
    """With ``warmstart_steps=0`` (rounds alone, from a saved warm start) and the KL term on,
    the stats had ``kl_first`` = ``kl_last`` = 0.0, a mean of no steps: now they have neither,
    and the rounds keep their own losses."""
    import gamerl.core.warmstart as ws

    cfg = _cfg(tiny_dir, warmstart_steps=0, warmstart_kl_coef=0.5, warmstart_rft_rounds=1,
               warmstart_rft_steps=2)
    rounds = [{"stats": {"round": 1}, "episodes": []}]
    stats = ws._warm_start_stats(cfg, [1.0, 3.0], rounds, 5.0, [0.25, 0.75])
    assert not {"loss_first", "loss_last", "kl_first", "kl_last"} & set(stats)
    assert stats["steps"] == 2 and stats["rft"] == [
        {"round": 1, "loss_first": 2.0, "loss_last": 2.0}]
    # with demonstration steps, their ends (the means of up to 10 steps) as before
    cfg = _cfg(tiny_dir, warmstart_steps=2, warmstart_kl_coef=0.5)
    stats = ws._warm_start_stats(cfg, [1.0, 3.0], [], 5.0, [0.25, 0.75])
    assert (stats["loss_first"], stats["loss_last"], stats["kl_first"], stats["kl_last"]) == (
        2.0, 2.0, 0.5, 0.5)
