"""The shared prompt prefix in the rollout: the same games played with the rows' common opening
run once (``gamerl.core.turn_cache.prefill_shared_prefix``) and with a plain left-padded
prefill, in one process, one after the other (then the shared run again, to see the noise).

    python bench/prompt_prefix_bench.py --preset smollm2-135m --task wordle --games 32
    python bench/prompt_prefix_bench.py --preset smollm2-135m --games 32      # Password Game
    python bench/prompt_prefix_bench.py --quick                               # tiny, seconds

Prints, per run, the wall time of the rollout, the prefill columns a row ran (all turns), the
tokens run once for all rows, and whether the episodes are token for token the same. The games
are the preset's held-out instances (``eval_instances``), the policy the preset's model as it
comes (no warm start: its answers run longest, the evaluation's worst case).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from gamerl.config import get_config  # noqa: E402
from gamerl.core.evaluate import eval_instances, local_env_factory  # noqa: E402
from gamerl.core.rollout import LMPolicy, RolloutConfig, rollout  # noqa: E402
from gamerl.models import load_policy  # noqa: E402


def play(lm, tok, cfg, instances, share: bool) -> tuple[dict, list]:
    rcfg = RolloutConfig.from_train_config(cfg)
    rcfg.share_prompt_prefix = share
    policy = LMPolicy(lm, tok, rcfg)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    episodes = rollout(policy, tok, instances, local_env_factory(cfg), rcfg)
    seconds = time.perf_counter() - t0
    row = {"share_prompt_prefix": share, "seconds": round(seconds, 2),
           "prefilled_columns": policy.prefilled_tokens,
           "shared_prefix_tokens": policy.shared_prefix_tokens,
           "prompt_tokens": episodes[0].prompt_len,
           "tokens_per_game": round(sum(len(e.token_ids) for e in episodes) / len(episodes), 1),
           "turns": round(sum(len(e.turns) for e in episodes) / len(episodes), 2)}
    return row, episodes


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--task", default="password_game")
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="tiny, 8 games")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    if args.quick:
        args.preset, args.games = "tiny", 8
    cfg = get_config(args.preset, task=args.task)
    lm, tok = load_policy(cfg.model)
    instances = eval_instances(cfg, args.games)
    rows, played = [], []
    for share in (True, False, True):
        row, episodes = play(lm, tok, cfg, instances, share)
        rows.append(row)
        played.append(episodes)
        print(json.dumps(row), flush=True)
    same = sum(a.token_ids == b.token_ids for a, b in zip(played[0], played[1]))
    plain, shared = rows[1]["seconds"], min(rows[0]["seconds"], rows[2]["seconds"])
    result = {"preset": args.preset, "task": args.task, "games": args.games,
              "threads": torch.get_num_threads(), "rows": rows, "same_episodes": same,
              "speedup": round(plain / shared, 3)}
    print(f"{args.preset} {args.task}, {args.games} games: plain {plain:.1f} s, shared prompt "
          f"{shared:.1f} s ({plain / shared:.2f}x); episodes the same: {same} of {args.games}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
