"""Rollout and PPO-update throughput: batched vs one-episode-at-a-time generation, update tokens/s.

    python bench/rollout_bench.py                      # tiny on CPU (+ Qwen3-0.6B size on CUDA)
    python bench/rollout_bench.py --quick              # a smoke run (seconds)
    python bench/rollout_bench.py --json bench/results/rollout_bench_cpu.json

Measures, in one run, side by side:
1. rollout tokens/s, batched: every live episode generates its turn in ONE ``generate`` call
   (gamerl.core.rollout, as the trainer does), vs sequential: the same code with one episode at a
   time. tokens/s counts policy tokens (what the model generated), wall time includes the game and
   the tokenizer;
2. PPO update tokens/s: one ``ppo_update`` pass (forward + backward + AdamW) over a collected
   batch; tokens/s counts every token of the sequences (prompt, feedback and answers);
3. on CUDA, also for Qwen3-0.6B's architecture with random weights (bf16) and MFU:
   update FLOPs ~ 6 x N_trunk per token + 6 x vocab x hidden per policy token (the trainer runs
   the LM head only at policy positions; attention FLOPs left out, PaLM-style), generation FLOPs
   ~ 2 x (N_trunk + vocab x hidden) per generated token; divided by the GPU's dense bf16 peak.

Models: tiny with random weights and Qwen3-0.6B-size random weights never stop early (they do not
know <|im_end|>), so every answer runs to max_new_tokens: the numbers are per generated token.
The game is the tiny preset's (6 rules, 3 turns, compact feedback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from gamerl.config import get_config  # noqa: E402
from gamerl.core.evaluate import local_env_factory  # noqa: E402
from gamerl.models import (PolicyWithValue, count_parameters, ensure_tiny, load_policy,  # noqa: E402
                           load_reference, load_tokenizer, qwen3_0_6b_config)
from gamerl.core.rollout import LMPolicy, RolloutConfig, rollout  # noqa: E402
from gamerl.core.epoch import collect, compute_advantages, make_optimizer, ppo_update  # noqa: E402
from machine import machine_info, sync, write_json  # noqa: E402  (bench/, the script's folder)

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0,
                    "L4": 121.0}


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def time_rollout(lm, tok, seeds, cfg, batched: bool) -> dict:
    rcfg = RolloutConfig.from_train_config(cfg)
    make_env = local_env_factory(cfg)
    torch.manual_seed(0)
    sync(lm.device)
    t0 = time.perf_counter()
    if batched:
        policy = LMPolicy(lm, tok, rcfg)
        episodes = rollout(policy, tok, seeds, make_env, rcfg)
        calls = policy.generate_calls
    else:
        episodes, calls = [], 0
        for s in seeds:
            policy = LMPolicy(lm, tok, rcfg)
            episodes += rollout(policy, tok, [s], make_env, rcfg)
            calls += policy.generate_calls
    sync(lm.device)
    seconds = time.perf_counter() - t0
    tokens = sum(sum(ep.policy_mask) for ep in episodes)
    return {"episodes": len(seeds), "policy_tokens": tokens, "seconds": seconds,
            "tokens_per_s": tokens / seconds, "generate_calls": calls}


def time_update(policy, ref, tok, seeds, cfg) -> dict:
    batch = collect(policy, ref, tok, seeds, local_env_factory(cfg), cfg)
    compute_advantages(batch, cfg)
    # Warm-up pass (allocator, kernels), then the weights it changed are put back and the
    # optimizer made anew: the timed pass starts from the weights that sampled the batch, as in
    # training (else its first-ratio self-check rightly reports a policy that did not sample).
    weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    ppo_update(policy, make_optimizer(policy, cfg), batch, cfg.replace(ppo_epochs=1))
    policy.load_state_dict(weights)
    opt = make_optimizer(policy, cfg)
    sync(policy.device)
    stats = ppo_update(policy, opt, batch, cfg)
    sync(policy.device)
    total = int(batch.attention_mask.sum()) * cfg.ppo_epochs
    policy_tokens = int(batch.mask.sum()) * cfg.ppo_epochs
    return {"tokens": total, "policy_tokens": policy_tokens, "seconds": stats["update_seconds"],
            "tokens_per_s": total / stats["update_seconds"],
            "optimizer_steps": stats["optimizer_steps"]}


def bench_model(name: str, lm, tok, cfg, n_batched: int, n_sequential: int,
                peak: float | None) -> dict:
    print(f"[{name}] rollouts: {n_batched} episodes batched, {n_sequential} one at a time ...",
          flush=True)
    seeds = list(range(n_batched))
    batched = time_rollout(lm, tok, seeds, cfg, batched=True)
    sequential = time_rollout(lm, tok, seeds[:n_sequential], cfg, batched=False)
    print(f"[{name}] PPO update ...", flush=True)
    policy = PolicyWithValue(lm)
    ref = load_reference(lm)
    update = time_update(policy, ref, tok, list(range(cfg.episodes_per_epoch)), cfg)
    text_cfg = lm.config.get_text_config()
    n_all = count_parameters(lm)
    head = text_cfg.vocab_size * text_cfg.hidden_size
    n_trunk = n_all - head  # tied embeddings: the LM head is the embedding matrix
    row = {"model": name, "device": str(lm.device), "dtype": str(lm.dtype).replace("torch.", ""),
           "parameters": n_all, "max_new_tokens": cfg.max_new_tokens, "turns": cfg.max_steps,
           "rollout_batched": batched, "rollout_sequential": sequential,
           "batched_speedup": batched["tokens_per_s"] / sequential["tokens_per_s"],
           "update": update, "update_minibatch_episodes": cfg.minibatch_size}
    if peak:
        upd_flops = 6 * n_trunk * update["tokens"] + 6 * head * update["policy_tokens"]
        gen_flops = 2 * (n_trunk + head) * batched["policy_tokens"]
        row["peak_tflops"] = peak
        row["update_mfu"] = upd_flops / update["seconds"] / (peak * 1e12)
        row["rollout_mfu"] = gen_flops / batched["seconds"] / (peak * 1e12)
    return row


def format_rows(rows: list[dict]) -> str:
    head = (f"{'model':<22} {'device':<7} {'batched tok/s':>13} {'1-at-a-time tok/s':>17} "
            f"{'speedup':>8} {'update tok/s':>12} {'update MFU':>10} {'rollout MFU':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        mfu = lambda k: f"{r[k]:.1%}" if k in r else "-"  # noqa: E731
        lines.append(f"{r['model']:<22} {r['device']:<7} {r['rollout_batched']['tokens_per_s']:>13,.0f} "
                     f"{r['rollout_sequential']['tokens_per_s']:>17,.0f} {r['batched_speedup']:>7.1f}x "
                     f"{r['update']['tokens_per_s']:>12,.0f} {mfu('update_mfu'):>10} "
                     f"{mfu('rollout_mfu'):>11}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--no-cuda", action="store_true", help="skip the CUDA rows")
    parser.add_argument("--peak-tflops", type=float, help="GPU dense bf16 peak, for MFU")
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    rows = []
    tiny_cfg = get_config("tiny", device="cpu", wandb_mode="disabled", progress=False,
                          episodes_per_epoch=8 if args.quick else 32,
                          ppo_epochs=1 if args.quick else 4)
    lm, tok = load_policy("tiny", device="cpu")
    rows.append(bench_model("tiny", lm, tok, tiny_cfg, n_batched=8 if args.quick else 64,
                            n_sequential=2 if args.quick else 16, peak=None))

    if torch.cuda.is_available() and not args.no_cuda:
        from transformers import AutoModelForCausalLM

        device = torch.device("cuda")
        tok = load_tokenizer(str(ensure_tiny()))  # ids < 1024 are valid Qwen3 ids; no download
        torch.manual_seed(0)
        qwen = AutoModelForCausalLM.from_config(qwen3_0_6b_config(), dtype=torch.bfloat16,
                                                attn_implementation="sdpa").to(device)
        qwen.generation_config.pad_token_id = tok.pad_token_id
        qcfg = get_config("qwen3-0.6b", device="cuda", wandb_mode="disabled", progress=False,
                          num_rules=6, max_steps=3, max_new_tokens=64 if args.quick else 256,
                          episodes_per_epoch=8 if args.quick else 32,
                          ppo_epochs=1 if args.quick else 2, gradient_checkpointing=False)
        rows.append(bench_model("Qwen3-0.6B (random)", qwen, tok, qcfg,
                                n_batched=8 if args.quick else 64, n_sequential=2 if args.quick else 4,
                                peak=peak_tflops(device, args.peak_tflops)))

    print()
    print(format_rows(rows))
    result = {"rows": rows, "quick": args.quick,
              "machine": machine_info(
                  loadavg_start=load_start,
                  loadavg_end=os.getloadavg() if hasattr(os, "getloadavg") else None),
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
