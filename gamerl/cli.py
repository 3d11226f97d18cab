"""Command line: ``python -m gamerl {train, evaluate, merge, configure, build-tiny}``.

    python -m gamerl train --preset tiny                      # warm start, baseline, PPO, summary
    python -m gamerl train --preset tiny --epochs 5 --set lr=3e-4 --set num_rules=5
    python -m gamerl train --preset tiny --out checkpoints/run1 --resume   # continue a killed run
    python -m gamerl train --task wordle --preset tiny         # the other games
    python -m gamerl train --config config/train_config.json  # + env_config.json (the game)
    python -m gamerl evaluate --checkpoint checkpoints/run1/best --episodes 64
    python -m gamerl evaluate --checkpoint RUN/best --episodes 100 --opponent mcts  # OpenSpiel
    python -m gamerl train --preset tiny --env-url http://127.0.0.1:8000   # games over HTTP
    python -m gamerl merge --base MODEL --adapters RUN/best --output merged/   # LoRA -> standalone
    python -m gamerl configure                                 # writes config/*.json interactively
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


class UsageError(Exception):
    """A mistake in what was asked: one line on stderr, exit status 2, nothing written."""


def _train_config(args: argparse.Namespace):
    """(cfg, run directory, env_url) from the flags, every setting checked; no torch import, no
    model load, nothing written (UsageError otherwise)."""
    from .config.cli_settings import parse_overrides
    from .config.train_config import TrainConfig, get_config
    from .config.train_config import default_run_dir

    overrides = parse_overrides(args.set or [])  # ValueError: a UsageError in _train
    for flag, name in (("epochs", "epochs"), ("episodes_per_epoch", "episodes_per_epoch"),
                       ("wandb_mode", "wandb_mode"), ("wandb_project", "wandb_project"),
                       ("seed", "seed"), ("model", "model"),
                       ("eval_episodes", "eval_episodes"), ("device", "device")):
        if getattr(args, flag) is not None:
            overrides[name] = getattr(args, flag)
    if args.progress is not None:  # presentation: never saved with the run (config.py)
        overrides["progress"] = args.progress
    if args.out and args.run_name:
        raise UsageError("give --out DIR or --run-name NAME (checkpoints/NAME), not both")
    out = Path(args.out) if args.out else Path("checkpoints") / args.run_name if args.run_name \
        else None
    if args.resume and out is None:  # the most recent run of this preset
        runs = sorted(Path("checkpoints").glob(f"{args.preset or 'tiny'}-*"), key=os.path.getmtime)
        if not runs:
            raise UsageError("--resume: no run directory found; pass --out DIR")
        out = runs[-1]
    env_url = args.env_url
    if args.resume and out is not None and (out / "config.json").exists():
        # A resumed run keeps its own settings; only flags given now change them (e.g. --epochs).
        cfg = TrainConfig.load(out / "config.json", resuming=True).replace(**overrides)
    elif args.config:  # the JSON files (gamerl/config/jsonconfig.py), then the flags
        from .config.jsonconfig import load_run_config

        # The file's own "preset" picks the starting settings unless --preset is given (for the
        # env file's task: load_run_config rebuilds a base made for another one).
        task = {"task": args.task} if args.task else {}  # else get_config's (the Password Game)
        base = get_config(args.preset, **task) if args.preset else None
        cfg, url = load_run_config(args.config, args.env_config, base=base)
        if args.task and cfg.task != args.task:
            raise UsageError(f"--task {args.task} but {args.config} configures {cfg.task}")
        cfg = cfg.replace(**overrides) if overrides else cfg
        env_url = env_url or url
        if out is None and cfg.out_dir:
            out = Path(cfg.out_dir)
    else:
        task = {"task": args.task} if args.task else {}  # else get_config's (the Password Game)
        cfg = get_config(args.preset or "tiny", **task, **overrides)
    out = out or default_run_dir(cfg)
    return cfg.replace(out_dir=str(out)), out, env_url


def _game_env(cfg, env_url: str | None):
    """The run's environments: in-process, or a game server's at ``env_url``. The game reads
    its own settings (``task_config``: Wordle's rewards, OpenSpiel's games) here, so a bad one
    is one line, before any model loads or run directory is made, not a traceback mid-run."""
    from .core.evaluate import http_env_factory, local_env_factory

    try:
        return http_env_factory(cfg, env_url) if env_url else local_env_factory(cfg)
    except (TypeError, ValueError) as e:
        raise UsageError(f"task_config {json.dumps(cfg.task_config)} for {cfg.task}: {e}") \
            from None


def _check_reachable(env_url: str) -> None:
    """The game server answers /health, or one line says why not (before any model loads)."""
    import httpx

    try:
        httpx.get(env_url.rstrip("/") + "/health", timeout=5.0).raise_for_status()
    except httpx.HTTPError as e:
        raise UsageError(f"no game server answers at {env_url} ({type(e).__name__}: {e}); "
                         "start one with python -m tasks.<game>.server, or leave out --env-url "
                         "to play in-process") from None


def _check_resumable(out: Path, cfg) -> None:
    """``--resume`` refused at once, before any model or directory is touched, when ``out`` holds
    no run, or a finished one that ``cfg.epochs`` would not extend (resuming it would only
    repeat its final evaluation and rewrite summary.json)."""
    from .runs.rundir import run_contents

    if not run_contents(out):
        raise UsageError(f"--resume: {out} holds no run to continue "
                         f"({'it does not exist' if not out.exists() else 'no last/, no logs'}); "
                         "check --out, or start without --resume; nothing was written")
    summary = out / "summary.json"
    if summary.exists():
        try:
            done = int(json.loads(summary.read_text()).get("epochs"))
        except (ValueError, TypeError):
            return  # unreadable: open_run judges the run from its checkpoints
        if cfg.epochs <= done:
            raise UsageError(
                f"--resume: {out} is a finished run ({done} epochs, summary.json written); "
                f"resuming it would only repeat its final evaluation. To train it further give "
                f"--epochs N with N > {done} (the total); to evaluate it: python -m gamerl "
                f"evaluate --checkpoint {out / 'best'}")


def print_config(cfg) -> None:
    """Every setting of ``cfg``, section by section: its value and what it is."""
    from .config.cli_settings import setting_descriptions
    from .config.train_config import SETTING_SECTION

    meaning = setting_descriptions()
    values = cfg.settings()
    width = max(map(len, SETTING_SECTION))
    section = None
    for name, sec in SETTING_SECTION.items():
        if sec != section:
            section = sec
            print(f"[{section}]")
        text = meaning[name]
        print(f"  {name:<{width}} = {json.dumps(values[name])}"
              + (f"  # {text[:100]}" if text else ""))


def _train(args: argparse.Namespace) -> int:
    from .games.registry import get_task

    try:
        cfg, out, env_url = _train_config(args)
    except (ValueError, FileNotFoundError) as e:  # a setting, or a --config file that is not there
        raise UsageError(str(e)) from None
    if args.print_config:  # what would run, and nothing else: no model, no directory
        print_config(cfg)
        return 0
    if args.resume:
        _check_resumable(out, cfg)
    if env_url:
        _check_reachable(env_url)
    from .models import ModelUnavailableError, check_device, resolve_model

    # before a run directory exists: a device or model that is not here leaves nothing
    try:
        check_device(cfg.device)
    except ValueError as e:
        raise UsageError(str(e) + (" (given with --resume, --device changes the run's device)"
                                   if args.resume else "")) from None
    try:
        resolve_model(cfg.model, probe=True)
    except ModelUnavailableError as e:
        raise UsageError(str(e)) from None
    from .core.trainer import Trainer

    make_env = _game_env(cfg, env_url)
    print(f"run directory: {out}", flush=True)
    t0 = time.time()
    from .runs.checkpoint import CheckpointError
    from .runs.rundir import RunLockedError

    try:
        trainer = Trainer(cfg, out, resume=args.resume, make_env=make_env)
    except (CheckpointError, RunLockedError, FileExistsError) as e:
        raise SystemExit(f"gamerl train: {e}") from None  # a refusal: nothing was changed
    summary = trainer.train()
    wall = time.time() - t0
    print()
    print(summary["table"])
    b, f = summary["baseline"], summary["final"]
    changes = [f"{k.replace('_', ' ')} {b[k]:.2f} -> {f[k]:.2f}"
               for k in get_task(cfg.task).headline if isinstance(f.get(k), (int, float))]
    print(f"\n{cfg.task}, held-out games: {f['episodes']} (seeds {summary['eval_seeds'][0]}.."
          f"{summary['eval_seeds'][1]}; {f['distinct_games']} distinct); " + ", ".join(
              changes + [f"success {b['success_rate']:.1%} -> {f['success_rate']:.1%}",
                         f"reward {b['reward']:.2f} -> {f['reward']:.2f}"]))
    samples = out / "samples_final.md"
    if samples.exists():
        print("\nsample held-out episodes (final policy; all of them in " f"{samples}):")
        print(samples.read_text().split("\n", 2)[-1].strip())
    print(f"wall time {wall:.0f}s; summary: {out / 'summary.json'}; figures: "
          + ", ".join(summary["figures"]))
    return 0


def check_checkpoint(ckpt: Path) -> None:
    """Refuse a damaged checkpoint (CheckpointError); one without a manifest (an older gamerl,
    or not a run's) cannot be checked: say so and go on (its weights are safetensors)."""
    from .runs.checkpoint import MANIFEST_FILE, verify_checkpoint

    if (ckpt / MANIFEST_FILE).exists():
        verify_checkpoint(ckpt)
    else:
        logging.getLogger("gamerl").warning("%s has no %s: its files cannot be checked", ckpt,
                                            MANIFEST_FILE)


def load_checkpoint_lm(ckpt: Path, cfg, device=None):
    """(lm, tokenizer) of a checkpoint directory: a full model, or LoRA adapters (then on top of
    the run's base: its warm-start model if it had one, else ``cfg.model``), each checked
    against its manifest first."""
    from .models import load_policy

    check_checkpoint(ckpt)
    if (ckpt / "adapter_config.json").exists():
        from .models.lora import load_lora_policy

        base = ckpt.parent / "warmstart" if cfg.warmstart else None
        base = str(base) if base is not None and base.exists() else cfg.model
        if base != cfg.model:
            check_checkpoint(Path(base))
        policy, tok = load_lora_policy(base, ckpt, trainable=False, device=device,
                                       load_in_4bit=cfg.load_in_4bit,
                                       attn_implementation=cfg.attn_implementation)
        return policy.lm, tok
    return load_policy(str(ckpt), device=device)


def _evaluation_config(args: argparse.Namespace):
    """``evaluate``'s settings and, for ``--model``, the model: (cfg, lm, tokenizer). A
    checkpoint's settings are its run's config.json (its model is loaded later, once the
    game's settings have been checked: lm and tokenizer are None); ``--model`` takes
    ``--preset``'s settings and loads the model as it is, untrained (the zero-shot row)."""
    from .runs.checkpoint import CONFIG_FILE
    from .config.train_config import TrainConfig, get_config
    from .models import ModelUnavailableError, check_device, load_policy, resolve_model

    if (args.checkpoint is None) == (args.model is None):
        raise UsageError("give --checkpoint DIR (a trained run) or --model NAME (a model as "
                         "loaded, before any training), not both")
    if args.checkpoint is not None and (args.preset or args.task):
        raise UsageError("--preset/--task go with --model; a checkpoint keeps its run's settings")
    if args.env_url:
        _check_reachable(args.env_url)
    lm = tok = None
    if args.model is not None:
        try:
            cfg = get_config(args.preset or "tiny", **({"task": args.task} if args.task else {}),
                             model=args.model, **({"device": args.device} if args.device else {}))
            check_device(cfg.device)
            resolve_model(cfg.model, probe=True)
        except (ValueError, ModelUnavailableError) as e:
            raise UsageError(str(e)) from None
        lm, tok = load_policy(cfg.model, device=cfg.device)
    else:
        ckpt = Path(args.checkpoint)
        cfg_file = ckpt / CONFIG_FILE
        if not cfg_file.exists() and (ckpt.parent / "config.json").exists():
            cfg_file = ckpt.parent / "config.json"  # e.g. the run's warmstart/ directory
        if not cfg_file.exists():
            raise SystemExit(f"{ckpt}: no {CONFIG_FILE}; is this a gamerl checkpoint directory?")
        cfg = TrainConfig.load(cfg_file)
        if args.device:
            cfg = cfg.replace(device=args.device)
        try:  # the run's own device (a GPU run evaluated on a laptop) or --device
            check_device(cfg.device)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.eval_batch_size is not None:
        try:
            cfg = cfg.replace(eval_batch_size=args.eval_batch_size)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.task_config is not None:  # e.g. a shaped run's policy under the game's own reward
        try:
            cfg = cfg.replace(task_config=json.loads(args.task_config))
        except ValueError as e:  # json.JSONDecodeError is one
            raise UsageError(f"--task-config: {e}") from None
    return cfg, lm, tok


def _evaluate(args: argparse.Namespace) -> int:
    from .core.evaluate import eval_instances, evaluate, format_table, reference_rows
    from .games.registry import get_task

    cfg, lm, tok = _evaluation_config(args)
    report = get_task(cfg.task).evaluation_report
    given = [flag for flag in ("opponent", "games") if getattr(args, flag)]
    if given and not set(given) <= set(report.flags if report else ()):
        raise UsageError(f"--{given[0]} is for OpenSpiel runs; this run's task is {cfg.task}")
    make_env = _game_env(cfg, args.env_url)  # before the model loads: a bad setting is quick
    if args.checkpoint is not None:
        from .runs.checkpoint import CheckpointError

        try:
            lm, tok = load_checkpoint_lm(Path(args.checkpoint), cfg, device=cfg.device)
        except CheckpointError as e:
            raise SystemExit(f"gamerl evaluate: {e}") from None
    if report is not None:  # the game's own report (OpenSpiel: win/draw/loss per game)
        def play(run_cfg, n, overrides):
            return evaluate(lm, tok, eval_instances(run_cfg, n, overrides), run_cfg,
                            greedy=args.greedy, make_env=make_env,
                            sample_seed=run_cfg.seed + 1234)

        rows = report.run(play, cfg, args.episodes,
                          **{flag: getattr(args, flag) for flag in report.flags})
        print(report.format(rows))
    else:
        seeds = eval_instances(cfg, args.episodes)
        res = evaluate(lm, tok, seeds, cfg, greedy=args.greedy, sample_seed=cfg.seed + 1234,
                       make_env=make_env)
        rows = {"policy": res, **reference_rows(tok, seeds, cfg, make_env)}
        print(format_table(rows, get_task(cfg.task).report_columns, cfg.to_dict()))
        _print_evaluation_notes(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def _print_evaluation_notes(rows: dict) -> None:
    """Under the table: how many distinct games, lost server sessions, per-rule pass rates."""
    res = rows["policy"]
    print(f"held-out games: {res['episodes']}, {res['distinct_games']} distinct")
    hit = {name: r for name, r in rows.items()
           if r.get("lost_episodes") or r.get("replayed_episodes")}
    if hit:  # the game server lost sessions mid-episode (gamerl.core.sessions)
        print("episodes whose server session was lost: " + ", ".join(
            f"{name} {r['replayed_episodes']} replayed, {r['lost_episodes']} dropped (left out "
            "of the table)" for name, r in hit.items()))
    if "per_rule_pass_rate" in res:
        print("per-rule pass rate (policy):",
              " ".join(f"{i + 1}:{r:.2f}" for i, r in enumerate(res["per_rule_pass_rate"])))


def _merge(args: argparse.Namespace) -> int:
    from .runs.checkpoint import CheckpointError
    from .models.lora import merge_adapters

    try:
        check_checkpoint(Path(args.adapters))
        if Path(args.base).is_dir():
            check_checkpoint(Path(args.base))
    except CheckpointError as e:
        raise SystemExit(f"gamerl merge: {e}") from None
    print(merge_adapters(args.base, args.adapters, args.output))
    return 0


def _configure(args: argparse.Namespace) -> int:
    from .config.configure import configure_main

    return configure_main(args)


def _build_tiny(args: argparse.Namespace) -> int:
    from .models import build_tiny, default_tiny_dir, ensure_tiny

    path = build_tiny(args.out) if args.force else ensure_tiny(args.out or default_tiny_dir())
    print(path)
    return 0


def _add_train(sub) -> None:
    """``train``: its flags, and every preset with one line in its help."""
    from .config.presets import PRESET_SUMMARIES, PRESETS
    from .games.registry import TASKS

    t = sub.add_parser("train", help="warm start (if set), baseline eval, PPO, final eval",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="presets:\n" + "\n".join(
                           f"  {name:<17} {PRESET_SUMMARIES[name]}" for name in sorted(PRESETS))
                       + "\n\nEvery setting, its value and meaning: --print-config; any of them: "
                       "--set NAME=VALUE.")
    t.add_argument("--preset", choices=sorted(PRESETS), help="default tiny (with --config: the "
                   "file's own preset); the list is below")
    t.add_argument("--task", choices=sorted(TASKS),
                   help="the game (default password_game; openspiel with --config)")
    t.add_argument("--config", help="train_config.json (python -m gamerl configure writes it)")
    t.add_argument("--env-config", dest="env_config",
                   help="env_config.json (default: the one next to --config)")
    t.add_argument("--out", help="run directory (default checkpoints/<preset>-<timestamp>)")
    t.add_argument("--run-name", dest="run_name", help="the run's name: its directory "
                   "checkpoints/NAME and its wandb name")
    t.add_argument("--print-config", dest="print_config", action="store_true",
                   help="print every setting of this run (value, section, meaning) and exit: "
                   "no model is loaded, nothing is written")
    t.add_argument("--resume", action="store_true", help="continue from OUT/last (refused, "
                   "changing nothing, when it is missing or damaged: docs/how-to/resume.md)")
    t.add_argument("--epochs", type=int)
    t.add_argument("--episodes-per-epoch", dest="episodes_per_epoch", type=int)
    t.add_argument("--eval-episodes", dest="eval_episodes", type=int)
    t.add_argument("--wandb-mode", dest="wandb_mode", choices=["offline", "online", "disabled"])
    t.add_argument("--wandb-project", dest="wandb_project")
    t.add_argument("--seed", type=int)
    t.add_argument("--model")
    t.add_argument("--device")
    t.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="tqdm bars (default on; --no-progress for log files: one line per epoch "
                   "is printed either way)")
    t.add_argument("--env-url", help="play through a Password Game server at this URL "
                   "(python -m tasks.password_game.server) instead of in-process")
    t.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="override any TrainConfig field (repeatable)")
    t.set_defaults(fn=_train)


def _add_evaluate(sub) -> None:
    """``evaluate``: a checkpoint, or a model before training, on held-out games."""
    from .config.presets import PRESETS
    from .games.registry import TASKS

    e = sub.add_parser("evaluate", help="evaluate a checkpoint, or a model before training, on "
                       "held-out games")
    e.add_argument("--checkpoint", help="a best/ or last/ directory (or RUN/warmstart)")
    e.add_argument("--model", help="instead of --checkpoint: a model as loaded, untrained (the "
                   "zero-shot row), with --preset's settings")
    e.add_argument("--preset", choices=sorted(PRESETS), help="with --model (default tiny)")
    e.add_argument("--task", choices=sorted(TASKS), help="with --model (default "
                   "password_game)")
    e.add_argument("--episodes", dest="episodes", type=int,
                   help="held-out games (default: the run's eval_episodes; OpenSpiel: per game, "
                   "default 100)")
    e.add_argument("--opponent", choices=["random", "mcts"], help="OpenSpiel: the opponent bot")
    e.add_argument("--games", help="OpenSpiel: comma-separated games (default: the run's)")
    e.add_argument("--greedy", action="store_true", help="argmax decoding instead of sampling")
    e.add_argument("--batch-size", dest="eval_batch_size", type=int, help="games played at "
                   "once (default: the run's eval_batch_size, 0: all; fewer use less memory)")
    e.add_argument("--device")
    e.add_argument("--task-config", help="the game's settings as a JSON object, in place of "
                   "the run's task_config (e.g. '{}': a run trained on a shaped reward, scored "
                   "with the game's defaults; the same games and samples)")
    e.add_argument("--json", help="also write the rows to this JSON file")
    e.add_argument("--env-url", help="play through a Password Game server at this URL")
    e.set_defaults(fn=_evaluate)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gamerl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    _add_train(sub)
    _add_evaluate(sub)
    m = sub.add_parser("merge", help="merge LoRA adapters into a standalone model")
    m.add_argument("--base", required=True, help="the base model the adapters were trained on "
                   "(tiny, a hub id, or a directory such as RUN/warmstart)")
    m.add_argument("--adapters", required=True, help="a LoRA checkpoint (RUN/best or RUN/last)")
    m.add_argument("--output", required=True, help="directory for the merged model")
    m.set_defaults(fn=_merge)

    c = sub.add_parser("configure", help="write config/train_config.json and env_config.json "
                       "interactively")
    from .config.configure import add_arguments as add_configure_arguments

    add_configure_arguments(c)
    c.set_defaults(fn=_configure)

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
    try:
        return args.fn(args)
    except UsageError as e:
        print(f"python -m gamerl {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
