"""The KV cache a multi-turn rollout holds, and the process's peak memory while it plays.

    python bench/rollout_memory.py --preset smollm2-135m-r12 --games 32
    python bench/rollout_memory.py --quick                                    # tiny, seconds

To compare two versions of the code, run it from a worktree of each (``git worktree add``); the
script imports the ``gamerl`` beside it. Prints, as JSON: the most bytes the turn cache's layers
held right after a turn's ``TurnCache.extend`` (keys, values and a growing layer's buffers, each
storage once: what the next ``generate`` starts from), the process's peak RSS above what it
held after loading the model (Linux: ``VmHWM`` reset through ``/proc/self/clear_refs``), the
wall time and the tokens played (equal tokens: the same episodes). The policy is the preset's
model as it comes (its answers run longest) unless ``--model`` names another; the games are the
preset's held-out instances; CPU, the preset's dtype.
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
from gamerl.core import turn_cache  # noqa: E402
from gamerl.core.evaluate import eval_instances, local_env_factory  # noqa: E402
from gamerl.core.rollout import LMPolicy, RolloutConfig, rollout  # noqa: E402
from gamerl.models import load_policy  # noqa: E402
from procmem import reset_peak, status_bytes  # noqa: E402  (bench/, the script's folder)


def cache_bytes(past) -> int:
    """Bytes of the storages a cache's layers hold (keys, values, growing buffers), each once."""
    storages = {}
    for layer in past.layers:
        for name in ("keys", "values", "_key_buffer", "_value_buffer"):
            t = getattr(layer, name, None)
            if t is not None:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="smollm2-135m-r12")
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--model", help="the policy (a run's warmstart/ or best/); default: the preset's")
    ap.add_argument("--quick", action="store_true", help="tiny, 8 games")
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args(argv)
    preset, games = ("tiny", 8) if args.quick else (args.preset, args.games)
    cfg = get_config(preset, **({"model": args.model} if args.model else {}))

    held: list[int] = []
    extend = turn_cache.TurnCache.extend

    def measured_extend(self, *a, **k):
        out = extend(self, *a, **k)
        if out is not None:
            held.append(cache_bytes(out[2]))
        return out

    torch.manual_seed(cfg.seed)
    lm, tok = load_policy(cfg.model, device="cpu")
    rcfg = RolloutConfig.from_train_config(cfg)
    policy = LMPolicy(lm, tok, rcfg)
    peak_known = reset_peak()
    start_rss = status_bytes("VmRSS")
    turn_cache.TurnCache.extend = measured_extend
    try:
        t0 = time.perf_counter()
        episodes = rollout(policy, tok, eval_instances(cfg, games), local_env_factory(cfg), rcfg)
        seconds = time.perf_counter() - t0
    finally:
        turn_cache.TurnCache.extend = extend
    peak = status_bytes("VmHWM") if peak_known else None
    result = {"preset": preset, "model": cfg.model, "games": len(episodes),
              "seconds": round(seconds, 1), "tokens": sum(len(e.token_ids) for e in episodes),
              "max_cache_gb_after_extend": round(max(held, default=0) / 1e9, 3),
              "peak_rss_above_start_gb": (round((peak - start_rss) / 1e9, 3)
                                          if peak is not None and start_rss is not None else None),
              "torch": torch.__version__, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    print(json.dumps(result), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
