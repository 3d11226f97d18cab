"""Command line: ``python -m gamerl {train, evaluate, build-tiny}``.

    python -m gamerl train --preset tiny                      # warm start, baseline, PPO, summary
    python -m gamerl train --preset tiny --epochs 5 --set lr=3e-4 --set num_rules=5
    python -m gamerl train --preset tiny --out checkpoints/run1 --resume   # continue a killed run
    python -m gamerl evaluate --checkpoint checkpoints/run1/best --episodes 64
    python -m gamerl train --preset tiny --env-url http://127.0.0.1:8000   # games over HTTP
    python -m gamerl build-tiny

``--set NAME=VALUE`` overrides any TrainConfig field (repeatable); the common ones have flags.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path


def _quiet_transformers() -> None:
    # Weight-loading/saving progress bars on every from_pretrained drown our own bars.
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:
        pass


def _train(args: argparse.Namespace) -> int:
    from .config import TrainConfig, coerce_override, get_config
    from .trainer import Trainer, default_run_dir

    overrides = {}
    for item in args.set or []:
        if "=" not in item:
            raise SystemExit(f"--set expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        overrides[name.strip()] = coerce_override(name.strip(), value)
    for flag, name in (("epochs", "epochs"), ("episodes_per_epoch", "episodes_per_epoch"),
                       ("wandb_mode", "wandb_mode"), ("seed", "seed"), ("model", "model"),
                       ("eval_episodes", "eval_episodes"), ("device", "device")):
        if getattr(args, flag) is not None:
            overrides[name] = getattr(args, flag)
    if args.no_progress:
        overrides["progress"] = False
    out = Path(args.out) if args.out else None
    if args.resume and out is None:  # the most recent run of this preset
        runs = sorted(Path("checkpoints").glob(f"{args.preset}-*"), key=os.path.getmtime)
        if not runs:
            raise SystemExit("--resume: no run directory found; pass --out DIR")
        out = runs[-1]
    if args.resume and out is not None and (out / "config.json").exists():
        # A resumed run keeps its own settings; only flags given now change them (e.g. --epochs).
        cfg = TrainConfig.load(out / "config.json").replace(**overrides)
    else:
        cfg = get_config(args.preset, **overrides)
    out = out or default_run_dir(cfg)
    cfg = cfg.replace(out_dir=str(out))
    print(f"run directory: {out}", flush=True)
    t0 = time.time()
    make_env = None
    if args.env_url:
        from .evaluate import http_env_factory
        make_env = http_env_factory(cfg, args.env_url)
    trainer = Trainer(cfg, out, resume=args.resume, make_env=make_env)
    summary = trainer.train()
    wall = time.time() - t0
    print()
    print(summary["table"])
    b, f = summary["baseline"], summary["final"]
    print(f"\nheld-out games: {f['episodes']} (seeds {summary['eval_seeds'][0]}.."
          f"{summary['eval_seeds'][1] - 1}); rules satisfied {b['rules_satisfied']:.2f} -> "
          f"{f['rules_satisfied']:.2f}, success {b['success_rate']:.1%} -> {f['success_rate']:.1%}, "
          f"reward {b['reward']:.2f} -> {f['reward']:.2f}")
    print(f"wall time {wall:.0f}s; summary: {out / 'summary.json'}; figures: "
          + ", ".join(summary["figures"]))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .checkpoint import CONFIG_FILE
    from .config import TrainConfig
    from .evaluate import evaluate, format_table, reference_rows
    from .models import load_policy

    ckpt = Path(args.checkpoint)
    cfg_file = ckpt / CONFIG_FILE
    if not cfg_file.exists() and (ckpt.parent / "config.json").exists():
        cfg_file = ckpt.parent / "config.json"  # e.g. the run's warmstart/ directory
    if not cfg_file.exists():
        raise SystemExit(f"{ckpt}: no {CONFIG_FILE}; is this a gamerl checkpoint directory?")
    cfg = TrainConfig.load(cfg_file)
    if args.device:
        cfg = cfg.replace(device=args.device)
    lm, tok = load_policy(str(ckpt), device=cfg.device)
    seeds = cfg.eval_seeds(args.episodes)
    make_env = None
    if args.env_url:
        from .evaluate import http_env_factory
        make_env = http_env_factory(cfg, args.env_url)
    res = evaluate(lm, tok, seeds, cfg, greedy=args.greedy, sample_seed=cfg.seed + 1234,
                   make_env=make_env)
    rows = {"policy": res, **reference_rows(tok, seeds, cfg, make_env)}
    print(format_table(rows))
    print("per-rule pass rate (policy):",
          " ".join(f"{i + 1}:{r:.2f}" for i, r in enumerate(res["per_rule_pass_rate"])))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def _build_tiny(args: argparse.Namespace) -> int:
    from .models import build_tiny, default_tiny_dir, ensure_tiny

    path = build_tiny(args.out) if args.force else ensure_tiny(args.out or default_tiny_dir())
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    from .config import PRESETS

    parser = argparse.ArgumentParser(prog="python -m gamerl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="warm start (if set), baseline eval, PPO, final eval")
    t.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    t.add_argument("--out", help="run directory (default checkpoints/<preset>-<timestamp>)")
    t.add_argument("--resume", action="store_true", help="continue from OUT/last")
    t.add_argument("--epochs", type=int)
    t.add_argument("--episodes-per-epoch", dest="episodes_per_epoch", type=int)
    t.add_argument("--eval-episodes", dest="eval_episodes", type=int)
    t.add_argument("--wandb-mode", dest="wandb_mode", choices=["offline", "online", "disabled"])
    t.add_argument("--seed", type=int)
    t.add_argument("--model")
    t.add_argument("--device")
    t.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    t.add_argument("--env-url", help="play through a Password Game server at this URL "
                   "(python -m tasks.password_game.server) instead of in-process")
    t.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override any TrainConfig field (repeatable)")
    t.set_defaults(fn=_train)

    e = sub.add_parser("evaluate", help="evaluate a checkpoint on held-out games")
    e.add_argument("--checkpoint", required=True, help="a best/ or last/ directory")
    e.add_argument("--episodes", type=int, help="held-out games (default: the run's eval_episodes)")
    e.add_argument("--greedy", action="store_true", help="argmax decoding instead of sampling")
    e.add_argument("--device")
    e.add_argument("--json", help="also write the rows to this JSON file")
    e.add_argument("--env-url", help="play through a Password Game server at this URL")
    e.set_defaults(fn=_evaluate)

    b = sub.add_parser("build-tiny", help="build (or check) the embedded tiny model")
    b.add_argument("--out", help="directory (default $GAMERL_TINY_DIR or checkpoints/tiny)")
    b.add_argument("--force", action="store_true", help="rebuild even if current")
    b.set_defaults(fn=_build_tiny)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    for noisy in ("httpx", "urllib3", "wandb"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    _quiet_transformers()
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
