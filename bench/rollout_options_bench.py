"""A rollout option on and off: the same games played in one process, on, off, then on again
(to see the noise), with whether the episodes are token for token the same.

Options (``RolloutConfig`` fields, on by default; ``drop_finished_rows`` where the model runs on a
CPU, ``generate`` on a GPU):
* ``share_prompt_prefix``: the rows' common opening (system prompt, the game's first message)
  runs once, as one row (``gamerl.core.turn_cache.prefill_shared_prefix``);
* ``inplace_kv_cache``: decoding writes each token's keys and values into spare columns of the
  cache instead of concatenating, which copies the whole cache per token
  (``gamerl.models.kv_cache.growing_cache``);
* ``drop_finished_rows``: rows that have answered leave the decoding batch
  (``gamerl.core.decode``; off: ``generate``, which feeds them padding until the turn's longest
  answer ends). It draws its random numbers for the remaining rows only, so the episodes are
  other samples of the same policy, not the same tokens: compare the decoded row-steps, the
  answer lengths and the rules satisfied instead;
* ``cuda_graphs`` (off by default: the one run "on" here is the first, which pays the compile):
  decoding into a static cache, compiled into CUDA graphs on a GPU (``LMPolicy._generate_on_graphs``);
  the speedup printed takes the faster of the two "on" runs, the second, after the compile.

    python bench/rollout_options_bench.py --preset smollm2-135m --task wordle --games 32
    python bench/rollout_options_bench.py --preset smollm2-135m --games 32      # Password Game
    python bench/rollout_options_bench.py --option inplace_kv_cache --preset smollm2-135m-r12 \
        --model checkpoints/RUN/warmstart --games 32                           # a trained policy
    python bench/rollout_options_bench.py --option drop_finished_rows --preset smollm2-135m-r12 \
        --model checkpoints/RUN/warmstart --games 32
    python bench/rollout_options_bench.py --option drop_finished_rows --preset qwen3-0.6b \
        --model qwen3-0.6b-random --games 20 --set max_steps=1 --profile out/prof.txt  # a GPU
    python bench/rollout_options_bench.py --option cuda_graphs --preset qwen3-0.6b \
        --model qwen3-0.6b-random --games 20 --set max_steps=3                    # a GPU
    python bench/rollout_options_bench.py --quick                               # tiny, seconds

Prints, per run, the wall time of the rollout, the prefill columns a row ran (all turns), the
tokens run once for all rows, and whether the episodes are token for token the same (and their
sampling-time log-probs bit for bit, or by how much they differ). The games are the preset's held-out instances (``eval_instances``), the policy the
preset's model as it comes (no warm start: its answers run longest, the evaluation's worst case)
unless ``--model`` names another.
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
from gamerl.config import parse_overrides  # noqa: E402
from gamerl.core.evaluate import eval_instances, local_env_factory  # noqa: E402
from gamerl.core.rollout import LMPolicy, RolloutConfig, rollout, summarize  # noqa: E402
from gamerl.models import load_policy  # noqa: E402
from procmem import gpu_peak_gb, gpu_reset_peak  # noqa: E402  (bench/, the script's folder)


OPTIONS = ("share_prompt_prefix", "inplace_kv_cache", "drop_finished_rows", "cuda_graphs")


def play(lm, tok, cfg, instances, option: str, on: bool) -> tuple[dict, list]:
    rcfg = RolloutConfig.from_train_config(cfg)
    setattr(rcfg, option, on)
    policy = LMPolicy(lm, tok, rcfg)
    torch.manual_seed(0)
    gpu_reset_peak(lm.device)
    t0 = time.perf_counter()
    episodes = rollout(policy, tok, instances, local_env_factory(cfg), rcfg)
    seconds = time.perf_counter() - t0
    row = {option: on, "seconds": round(seconds, 2), "peak_gpu_memory_gb": gpu_peak_gb(lm.device),
           "prefilled_columns": policy.prefilled_tokens,
           "shared_prefix_tokens": policy.shared_prefix_tokens,
           "prompt_tokens": episodes[0].prompt_len,
           "tokens_per_game": round(sum(len(e.token_ids) for e in episodes) / len(episodes), 1),
           "turns": round(sum(len(e.turns) for e in episodes) / len(episodes), 2),
           "decoded_row_steps": policy.decoded_row_steps,
           "answer_tokens_per_turn": round(sum(ep.policy_mask.count(1) for ep in episodes)
                                           / max(1, sum(len(e.turns) for e in episodes)), 1),
           **{k: round(v, 3) for k, v in summarize(episodes, cfg).items()
              if k in ("reward", "success_rate", "rules_satisfied", "win_rate")}}
    return row, episodes


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--task", default="password_game")
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--option", choices=OPTIONS, default="share_prompt_prefix")
    ap.add_argument("--model", help="the policy (a run's warmstart/ or best/); default: the preset's")
    ap.add_argument("--quick", action="store_true", help="tiny, 8 games")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a preset override, e.g. max_steps=1 (answers of one turn)")
    ap.add_argument("--profile", help="after the three runs, profile one more with the option on "
                    "(torch.profiler) and write its op table here")
    args = ap.parse_args(argv)
    if args.quick:
        args.preset, args.games = "tiny", 8
    overrides = parse_overrides(args.set)
    cfg = get_config(args.preset, task=args.task, **overrides)
    lm, tok = load_policy(args.model or cfg.model)
    instances = eval_instances(cfg, args.games)
    rows, played = [], []
    for on in (True, False, True):
        row, episodes = play(lm, tok, cfg, instances, args.option, on)
        rows.append(row)
        played.append(episodes)
        print(json.dumps(row), flush=True)
    pairs = list(zip(played[0], played[1]))
    same = sum(a.token_ids == b.token_ids for a, b in pairs)
    same_logprobs = sum(a.gen_logprobs == b.gen_logprobs for a, b in pairs)  # bit for bit
    logprob_gap = max((abs(x - y) for a, b in pairs if a.token_ids == b.token_ids
                       for x, y in zip(a.gen_logprobs, b.gen_logprobs)), default=0.0)
    off, on = rows[1]["seconds"], min(rows[0]["seconds"], rows[2]["seconds"])
    result = {"preset": args.preset, "task": args.task, "games": args.games,
              "model": args.model or cfg.model, "option": args.option,
              "threads": torch.get_num_threads(), "rows": rows, "same_episodes": same,
              "same_logprobs": same_logprobs, "max_logprob_gap": logprob_gap,
              "speedup": round(off / on, 3)}
    print(f"{args.preset} {args.task}, {args.games} games, {args.option}: off {off:.1f} s, on "
          f"{on:.1f} s ({off / on:.2f}x); episodes the same: {same} of {args.games} (log-probs bit for bit: "
          f"{same_logprobs}, largest gap {logprob_gap:.1e})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.profile:
        write_profile(lm, tok, cfg, instances, args.option, Path(args.profile))
    return result


def write_profile(lm, tok, cfg, instances, option: str, path: Path) -> None:
    """One more run with the option on, under torch.profiler: where a decoding step's time goes
    (kernels against the Python and launch overhead around them)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available()
                                           else [])
    with profile(activities=activities) as prof:
        row, _ = play(lm, tok, cfg, instances, option, True)
    sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    tables = [f"# {json.dumps(row)}"]
    for key in ("self_cpu_time_total", sort):
        tables.append(f"## sorted by {key}\n" + prof.key_averages().table(sort_by=key, row_limit=25))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(tables) + "\n")
    print(f"profile ({row['seconds']} s under the profiler) -> {path}", flush=True)


if __name__ == "__main__":
    main()
