"""Scoring a training batch from the frozen bottom's states that the rollout kept, against
running the bottom again, on a preset's own games.

    python bench/bottom_states_bench.py --preset smollm2-135m-r12 \\
        --checkpoint checkpoints/r12_head_s0/warmstart \\
        --json bench/results/bottom_states_smollm2_r12.json
    python bench/bottom_states_bench.py --quick          # tiny, a smoke run

Why: with ``trainable_layers`` scoring ran the frozen bottom over every token of the epoch's
episodes once more, though the rollout had just computed the same states
(``gamerl.core.bottom_states``). This plays one epoch's training rollout (the preset's games,
sampling and layers; ``--checkpoint``: the weights to play with, such as a run's warm start)
twice from the same random state, without keeping the states and keeping them (what keeping
costs the rollout; the same tokens are sampled), then scores those episodes both ways
(``gamerl.core.epoch.score_episodes``) and reports the seconds and the largest differences of the
old log-probs, values and reference log-probs (float rounding: the same weights and tokens).
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

from gamerl.config import get_config, parse_overrides  # noqa: E402
from gamerl.core.bottom_states import boundary_layer, forget  # noqa: E402
from gamerl.core.epoch import epoch_seeds, score_episodes, seed_everything  # noqa: E402
from gamerl.core.evaluate import local_env_factory  # noqa: E402
from gamerl.core.rollout import LMPolicy, RolloutConfig, rollout  # noqa: E402
from gamerl.models import (PolicyWithValue, SplitTrunk, freeze_below_top_layers,  # noqa: E402
                           load_policy, load_reference)
from machine import machine_info, write_json  # noqa: E402  (bench/, the script's folder)


def play(policy, tok, cfg, seeds, keep: bool):
    """``(episodes, seconds)`` of one training rollout from seed ``cfg.seed``."""
    rcfg = RolloutConfig.from_train_config(cfg)
    layer = boundary_layer(policy.lm, policy.split.n_top) if keep else None
    seed_everything(cfg.seed)
    t0 = time.perf_counter()
    episodes = rollout(LMPolicy(policy.lm, tok, rcfg, bottom_states_layer=layer), tok, seeds,
                       local_env_factory(cfg), rcfg)
    return episodes, time.perf_counter() - t0


def largest_differences(a, b) -> dict:
    m = a.mask.bool()
    return {name: float((getattr(a, name)[m] - getattr(b, name)[m]).abs().max())
            for name in ("old_logprobs", "old_values", "ref_logprobs")}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="smollm2-135m-r12")
    ap.add_argument("--task", default="password_game")
    ap.add_argument("--checkpoint", help="the weights to play with (default: the preset's model)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--quick", action="store_true", help="tiny, 2 of 4 layers trained, 8 games")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    overrides = parse_overrides(args.set)
    if args.quick:
        args.preset = "tiny"
        overrides = {"trainable_layers": 2, "num_rules": 4, "episodes_per_epoch": 8,
                     "max_steps": 3, **overrides}
    cfg = get_config(args.preset, task=args.task, progress=False, device="cpu", **overrides)
    if not cfg.trainable_layers:
        ap.error(f"{args.preset} trains every layer: no frozen bottom to keep")
    lm, tok = load_policy(args.checkpoint or cfg.model, device="cpu")
    reference = load_reference(lm)
    policy = PolicyWithValue(lm)
    freeze_below_top_layers(lm, cfg.trainable_layers)
    policy.split = SplitTrunk.of(lm, cfg.trainable_layers)
    seeds = epoch_seeds(cfg, 0)
    plain, plain_s = play(policy, tok, cfg, seeds, keep=False)
    kept, kept_s = play(policy, tok, cfg, seeds, keep=True)
    same = [a.token_ids for a in plain] == [b.token_ids for b in kept]
    scored = score_episodes(policy, reference, tok, kept, seeds, cfg)
    forget(kept)  # already let go by scoring; the second scoring runs the bottom
    rerun = score_episodes(policy, reference, tok, kept, seeds, cfg)
    tokens = int(scored.attention_mask.sum())
    result = {
        "machine": machine_info(), "preset": args.preset, "task": args.task,
        "checkpoint": args.checkpoint, "episodes": len(seeds), "tokens": tokens,
        "trainable_layers": cfg.trainable_layers, "same_episodes": same,
        "rollout_seconds": {"states not kept": round(plain_s, 1), "states kept": round(kept_s, 1)},
        "score_seconds": {"bottom run again": round(rerun.score_seconds, 1),
                          "states kept": round(scored.score_seconds, 1)},
        "largest_difference": largest_differences(scored, rerun)}
    print(f"{args.preset}: {len(seeds)} episodes, {tokens} tokens, top {cfg.trainable_layers} "
          f"layers trained; the same episodes both ways: {same}")
    print(f"rollout   {plain_s:7.1f} s, keeping the states {kept_s:7.1f} s")
    print(f"scoring   {rerun.score_seconds:7.1f} s running the bottom, "
          f"{scored.score_seconds:7.1f} s from the kept states "
          f"({rerun.score_seconds / max(scored.score_seconds, 1e-9):.2f}x)")
    print("largest differences:", {k: f"{v:.2e}" for k, v in result["largest_difference"].items()})
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
