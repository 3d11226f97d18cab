"""The warm start's step timed by rows per forward pass, on a preset's own demonstrations.

    python bench/warmstart_passes.py --preset smollm2-135m --task wordle \\
        --json bench/results/warmstart_passes_smollm2_wordle.json
    python bench/warmstart_passes.py --quick          # tiny, a smoke run

Why: a warm start on every layer of SmolLM2 was most of Wordle's preset run (1,300-1,385 s of
~40 minutes on 2 cores). Its steps ran the whole batch in one pass, right padded to the longest
row, each row with its own copy of the system prompt. ``gamerl.core.warmstart.answer_logits``
now runs ``SFT_ROWS_PER_PASS`` rows at a time, shortest first, the shared prompt once per pass
(``prefix_share``). This times one optimizer step (``warmstart._sft_step``: forward, backward,
AdamW) on the same ``--steps`` batches for each rows-per-pass value, and the old way ("one pass,
prompt per row": ``trunk_hidden`` told not to share), on the preset's demonstrations (its
``warmstart_batch_size``), training the layers the preset's warm start trains. The first step
of the first setting is a warm-up (allocator, kernels) and is not counted; each setting
restarts from the same weights, so every one sees the same numbers.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import gamerl.core.forward as forward  # noqa: E402
import gamerl.core.warmstart as ws  # noqa: E402
from gamerl.config import get_config, parse_overrides  # noqa: E402
from gamerl.models import load_policy  # noqa: E402
from machine import machine_info, write_json  # noqa: E402  (bench/, the script's folder)


def time_steps(lm, cfg, batches, pad_id: int, rows_per_pass: int, share: bool) -> dict:
    """Seconds of ``len(batches)`` warm-start steps and their losses, from ``lm`` as given."""
    lm = copy.deepcopy(lm)
    split = ws._trainable_part(lm, cfg)
    params = [p for p in lm.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.warmstart_lr, weight_decay=0.0)
    real_rows, real_hidden = ws.SFT_ROWS_PER_PASS, forward.trunk_hidden
    ws.SFT_ROWS_PER_PASS = rows_per_pass
    if not share:  # the SFT passes reach the trunk through gamerl.core.forward
        forward.trunk_hidden = lambda trunk, ids, attn, share=True: real_hidden(trunk, ids, attn,
                                                                                False)
    lm.train()
    try:
        t0, losses = time.perf_counter(), []
        for batch in batches:
            losses.append(ws._sft_step(lm, optimizer, params, batch, pad_id, split, None))
        seconds = time.perf_counter() - t0
    finally:
        ws.SFT_ROWS_PER_PASS, forward.trunk_hidden = real_rows, real_hidden
    return {"seconds": round(seconds, 2), "losses": [round(x, 5) for x in losses]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="smollm2-135m")
    ap.add_argument("--task", default="wordle")
    ap.add_argument("--steps", type=int, default=4, help="timed steps per setting")
    ap.add_argument("--rows", default="8,4,2,1", help="rows-per-pass values to time")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--quick", action="store_true", help="tiny, 2 steps")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    preset = "tiny" if args.quick else args.preset
    if args.quick:
        args.steps = 2
    cfg = get_config(preset, task=args.task, **parse_overrides(args.set))
    cfg.warmstart_examples = (args.steps + 1) * cfg.warmstart_batch_size
    lm, tok = load_policy(cfg.model, device="cpu")
    demos = ws.demonstrations(cfg, tok, seed=cfg.seed)
    rng = random.Random(0)
    batches = [rng.sample(demos, cfg.warmstart_batch_size) for _ in range(args.steps + 1)]
    lengths = [len(ids) for ids, _ in demos]
    print(f"{preset} ({args.task}): {len(demos)} demonstrations of {min(lengths)}-"
          f"{max(lengths)} tokens, {cfg.warmstart_batch_size} per step, layers trained: "
          f"{ws.warm_start_layers(cfg) or 'all'}", flush=True)
    time_steps(lm, cfg, batches[:1], tok.pad_token_id, cfg.warmstart_batch_size, False)  # warm-up
    rows = []
    settings = [(cfg.warmstart_batch_size, False)] + [
        (int(n), True) for n in args.rows.split(",")]
    for rows_per_pass, share in settings:
        r = time_steps(lm, cfg, batches[1:], tok.pad_token_id, rows_per_pass, share)
        name = (f"{rows_per_pass} row{'s' if rows_per_pass > 1 else ''} per pass"
                + ("" if share else ", prompt per row (before)"))
        rows.append({"setting": name, "rows_per_pass": rows_per_pass, "shared_prompt": share, **r})
        print(f"{name:<40} {r['seconds']:7.1f} s for {args.steps} steps  "
              f"({rows[0]['seconds'] / r['seconds']:.2f}x)", flush=True)
    result = {"machine": machine_info(), "preset": preset, "task": args.task,
              "batch_size": cfg.warmstart_batch_size, "steps": args.steps,
              "demonstration_tokens": [min(lengths), max(lengths)], "rows": rows}
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
