"""Peak memory of one PPO update at the Qwen3-0.6B shape (random weights, CPU is fine).

    python bench/update_memory.py                          # 1 episode x 1,024 tokens, 768 policy
    python bench/update_memory.py --tokens 2048 --policy-tokens 1536 --dtype bfloat16
    python bench/update_memory.py --quick                  # the tiny model, seconds (a smoke run)

What it measures: one ``collect``-style scoring pass (old log-probs, values, supports; reference
log-probs) and one ``ppo_update`` step (forward with grad, backward, AdamW) of the trainer's own
code on one synthetic episode: ``--tokens`` tokens, of which ``--policy-tokens`` are the
policy's, spread over ``--turns`` answers with environment tokens between them, sampled as the
seed does (T 0.7, top-k 50, top-p 0.9). The number reported is the process's peak resident
memory (``ru_maxrss``) above what it held after building the model and optimizer state: the
update's working memory (activations, logits, gradients), not the weights.

Why this shape: the seed's episode is up to 30 turns x 256 new tokens = 7,680 policy tokens; the
logits of those alone, in fp32, are 7,680 x 151,936 x 4 B = 4.7 GB. This script uses a shorter
episode so a CPU run takes minutes; what it shows scales linearly in the policy tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from gamerl.config import get_config  # noqa: E402
from procmem import status_bytes  # noqa: E402  (bench/, the script's folder)
from gamerl.models import (PolicyWithValue, load_policy, qwen3_0_6b_config,  # noqa: E402
                           set_gradient_checkpointing)
from gamerl.core.scoring import Sampling  # noqa: E402
from gamerl.core.epoch import (PPOBatch, compute_advantages, make_optimizer,  # noqa: E402
                               ppo_update, support_rows)
from gamerl.core.forward import forward_policy, reference_logprobs  # noqa: E402


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def episode(tokens: int, policy_tokens: int, turns: int, vocab: int, seed: int = 0):
    """ids [1, T], mask [1, T] (turns answers of equal length, env tokens between), rewards."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (1, tokens), generator=g)
    mask = torch.zeros(1, tokens)
    rewards = torch.zeros(1, tokens)
    per_turn = policy_tokens // turns
    gap = (tokens - policy_tokens) // turns  # prompt / feedback before each answer
    pos = 0
    for k in range(turns):
        pos += gap
        mask[0, pos:pos + per_turn] = 1
        rewards[0, pos + per_turn - 1] = float(k % 3)
        pos += per_turn
    return ids, mask, rewards


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--policy-tokens", type=int, default=768)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--quick", action="store_true", help="the tiny model instead (smoke run)")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    t0 = time.perf_counter()
    if args.quick:
        lm, _ = load_policy("tiny", device="cpu", dtype=dtype)
        args.tokens, args.policy_tokens, args.turns = 256, 96, 3
    else:
        from transformers import AutoModelForCausalLM
        lm = AutoModelForCausalLM.from_config(qwen3_0_6b_config(), dtype=dtype,
                                              attn_implementation="sdpa")
    vocab = lm.config.vocab_size
    policy = PolicyWithValue(lm)
    reference = lm  # the same weights: its memory is the policy's; its pass is what is measured
    cfg = get_config("qwen3-0.6b", device="cpu", ppo_epochs=1, minibatch_size=1,
                     micro_batch_size=1, lr=1e-6)
    set_gradient_checkpointing(lm, cfg.gradient_checkpointing)  # the preset's: on
    optimizer = make_optimizer(policy, cfg)
    # Adam's moments are allocated at the first step; make them part of the baseline.
    for group in optimizer.param_groups:
        for p in group["params"]:
            optimizer.state[p]["step"] = torch.tensor(0.0)
            optimizer.state[p]["exp_avg"] = torch.zeros_like(p)
            optimizer.state[p]["exp_avg_sq"] = torch.zeros_like(p)
    init_s = time.perf_counter() - t0
    ids, mask, rewards = episode(args.tokens, args.policy_tokens, args.turns, vocab)
    am = torch.ones_like(ids)
    base = status_bytes("VmRSS")
    sampling = Sampling.from_config(cfg)

    t1 = time.perf_counter()
    policy.eval()
    with torch.no_grad():
        old = forward_policy(policy, ids, am, sampling, mask=mask, derive_support=True)
        ref = reference_logprobs(reference, ids, am, sampling, mask=mask, support=old.support)
    score_s = time.perf_counter() - t1
    score_peak = peak_bytes() - base
    batch = PPOBatch(episodes=[], input_ids=ids, attention_mask=am, mask=mask,
                     env_rewards=rewards, gen_logprobs=old.logprobs.clone(),
                     old_logprobs=old.logprobs, old_values=old.values, ref_logprobs=ref,
                     group_ids=torch.tensor([0]), support=old.support,
                     support_index=None if old.support is None else support_rows(mask),
                     dtype=dtype)
    compute_advantages(batch, cfg)
    t2 = time.perf_counter()
    stats = ppo_update(policy, optimizer, batch, cfg)
    update_s = time.perf_counter() - t2
    peak = peak_bytes() - base
    result = {
        "model": "tiny" if args.quick else "Qwen3-0.6B architecture (random weights)",
        "dtype": args.dtype, "vocab": vocab, "tokens": args.tokens,
        "policy_tokens": args.policy_tokens, "turns": args.turns,
        "rss_after_init_gb": base / 2**30, "scoring_peak_above_init_gb": score_peak / 2**30,
        "update_peak_above_init_gb": peak / 2**30, "init_s": init_s, "scoring_s": score_s,
        "update_s": update_s, "optimizer_steps": stats["optimizer_steps"],
        "support_mb": 0.0 if old.support is None else old.support.numel() / 2**20,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, torch {torch.__version__}",
        "date": time.strftime("%Y-%m-%d"),
    }
    print(f"{result['model']}, {args.dtype}, 1 episode x {args.tokens} tokens "
          f"({args.policy_tokens} policy tokens over {args.turns} turns), vocabulary {vocab:,}")
    grads = sum(p.numel() * p.element_size() for p in policy.parameters() if p.requires_grad)
    result["gradients_gb"] = grads / 2**30
    print(f"  after init (weights and AdamW moments): {base / 2**30:.2f} GB RSS")
    print(f"  scoring pass (old + reference, no grad): peak +{score_peak / 2**30:.2f} GB, "
          f"{score_s:.1f} s; supports {result['support_mb']:.1f} MB")
    print(f"  one PPO update (forward, backward, AdamW): peak +{peak / 2**30:.2f} GB, "
          f"{update_s:.1f} s (of which the gradients themselves: {grads / 2**30:.2f} GB)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
